package main

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/natefinch/atomic"
	"github.com/spf13/cobra"
)

// render is the service file for the target's manager.
func (s serviceSpec) render() string {
	if s.manager == launchd {
		return s.launchdPlist()
	}
	return s.systemdUnit()
}

// binFlags say where the service's binary goes.
type binFlags struct {
	path   string // --bin
	noCopy bool   // --no-copy
}

func (b *binFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&b.path, "bin", "", "where install copies this agent binary for the service to run (default ~/.local/bin/agent; /usr/local/bin/agent with --system)")
	cmd.Flags().BoolVar(&b.noCopy, "no-copy", false, "run this binary where it is rather than a copy (a rebuild or a move then changes or breaks the service)")
}

// binPath is where the service's binary goes: a copy out of the clone or
// the download directory, so that a rebuild or a git clean there leaves
// the service alone, and upgrading is installing again.
func (t serviceTarget) binPath() (string, error) {
	if t.system {
		return "/usr/local/bin/agent", nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "bin", "agent"), nil
}

// place sets where the spec's binary goes.
func (s *serviceSpec) place(b binFlags) error {
	switch {
	case b.noCopy && b.path != "":
		return usagef("--bin and --no-copy: give one")
	case b.noCopy:
		return nil
	case b.path != "":
		p, err := absolutePath("bin", b.path)
		if err != nil {
			return err
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			p = filepath.Join(p, "agent")
		}
		s.binary = p
		return nil
	}
	p, err := s.binPath()
	s.binary = p
	return err
}

// copyBinary puts the agent binary where the service runs it, whole or
// not at all: a new file renamed over the old, so that a running service
// keeps the binary it started from until it restarts.
func (s serviceSpec) copyBinary() error {
	if s.binary == s.source {
		return nil
	}
	src, err := os.Open(s.source)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(s.binary), 0o755); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("copy the agent binary to %s: %w", s.binary, err) }
	tmp, err := os.CreateTemp(filepath.Dir(s.binary), ".agent-*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is none
	// Whole and executable before it takes the name: a service starting
	// then finds the binary runnable.
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), s.binary); err != nil {
		return fail(err)
	}
	return nil
}

// specForCmd makes the spec from the command's flags and agent run's
// flags after --.
func specForCmd(f *serviceFlags, lim serviceLimits, noSandbox bool, bin binFlags, args []string) (serviceSpec, error) {
	t, err := f.target()
	if err != nil {
		return serviceSpec{}, err
	}
	if err := lim.check(t.manager); err != nil {
		return serviceSpec{}, err
	}
	env := map[string]string{}
	if t.manager == systemd {
		if env, err = readEnvFile(t.envFile()); err != nil {
			return serviceSpec{}, err
		}
	}
	spec, err := specFrom(args, t, env)
	if err != nil {
		return spec, err
	}
	spec.sandbox = !noSandbox
	spec.limits = lim
	return spec, spec.place(bin)
}

const runFlagsExample = `  agent service install -- --control-plane https://cp.example.com --token-file ~/.config/agent/token --executor codex
  sudo agent service install --system --run-as builder -- --control-plane https://cp.example.com --token-file /etc/agent/token`

func newServicePrintCmd() *cobra.Command {
	var (
		f         serviceFlags
		lim       serviceLimits
		bin       binFlags
		noSandbox bool
	)
	cmd := &cobra.Command{
		Use:     "print [--system --run-as USER] [--name NAME] [--bin PATH | --no-copy] [--manager systemd|launchd] [--tasks-max N] [--memory-max SIZE] -- RUN-FLAGS...",
		Short:   "Print the systemd unit (launchd plist) service install would write",
		Example: `  agent service print -- --control-plane https://cp.example.com --token-file /etc/agent/token --executor sample`,
		RunE: func(cmd *cobra.Command, args []string) error {
			lim.memorySet = cmd.Flags().Changed("memory-max")
			spec, err := specForCmd(&f, lim, noSandbox, bin, args)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), spec.render())
			sayUnreachable(cmd, spec)
			return nil
		},
	}
	f.add(cmd, true)
	lim.add(cmd)
	bin.add(cmd)
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "leave the unit's sandboxing out")
	return cmd
}

func newServiceInstallCmd() *cobra.Command {
	var (
		f                          serviceFlags
		lim                        serviceLimits
		bin                        binFlags
		noSandbox, noStart, dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "install [--system --run-as USER] [--name NAME] [--bin PATH | --no-copy] [--tasks-max N] [--memory-max SIZE] [--no-start] [--dry-run] -- RUN-FLAGS...",
		Short: "Install the service running agent run with RUN-FLAGS, and start it",
		Long: `install copies this agent binary to ~/.local/bin/agent (/usr/local/bin/agent
for --system; --bin PATH elsewhere; --no-copy runs it where it is), so that
rebuilding or cleaning the clone it came from leaves the service alone, and
installing again upgrades it. It writes the unit (the plist on macOS)
running that binary's agent run with the flags
given after --, every path made absolute, creates the environment file
(~/.config/agent/agent.env, 0600; /etc/agent/agent.env for --system) and the
data directory if missing, then enables and starts the service. Installing
again replaces the unit and restarts a running service.

--system runs the service as --run-as USER, by default the user sudo was
run by (SUDO_USER); with neither it is refused, and running as root takes
--run-as root: the service's tasks could write root's home.

The unit bounds the service and all its tasks together: --tasks-max
(TasksMax=, default ` + defaultTasksMax + `: processes and threads) and --memory-max
(MemoryMax=, default ` + defaultMemoryMax + ` of RAM), each also infinity. launchd takes
--tasks-max as NumberOfProcesses (a limit on the user's processes, which
macOS caps at kern.maxprocperuid) and has no memory limit.

--name NAME installs another agent beside the first: the unit
agent-NAME.service (launchd: dev.edgeagent.agent.NAME), its environment
file agent-NAME.env and, unless its flags name one, its own data directory
(~/.local/state/agent-NAME; /var/lib/agent-NAME for a root system service).
Every other service command takes --name to say which.`,
		Example: runFlagsExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			lim.memorySet = cmd.Flags().Changed("memory-max")
			spec, err := specForCmd(&f, lim, noSandbox, bin, args)
			if err != nil {
				return err
			}
			if !dryRun && !noStart {
				if err := spec.canRunCtl(); err != nil {
					return err
				}
			}
			sayUnreachable(cmd, spec)
			if spec.system && spec.account.Uid == "0" {
				cmd.PrintErrf("agent: warning: the service runs as root (--run-as root): its tasks can write %s, ~/.ssh included\n", spec.account.HomeDir)
			}
			return installService(cmd, spec, noStart, dryRun)
		},
	}
	f.add(cmd, true)
	lim.add(cmd)
	bin.add(cmd)
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "leave the unit's sandboxing out (see docs/service.md for what it allows)")
	cmd.Flags().BoolVar(&noStart, "no-start", false, "write the files, print the commands that would load and start the service")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "write nothing: print the file and the commands")
	return cmd
}

// sayUnreachable warns of each path the service needs that its sandbox
// hides, and notes each one it opens beyond the home directory.
func sayUnreachable(cmd *cobra.Command, spec serviceSpec) {
	hidden, opened := spec.unreachable()
	for _, l := range hidden {
		cmd.PrintErrln("agent: warning: " + l)
	}
	for _, l := range opened {
		cmd.PrintErrln("agent: note: " + l)
	}
}

func installService(cmd *cobra.Command, spec serviceSpec, noStart, dryRun bool) error {
	w := cmd.OutOrStdout()
	path, text := spec.file(), spec.render()
	_, err := os.Stat(path)
	steps := spec.installSteps(err == nil)
	if dryRun {
		if spec.binary != spec.source {
			fmt.Fprintf(w, "would copy %s to %s\n", spec.source, spec.binary)
		}
		fmt.Fprintf(w, "would write %s:\n%s", path, text)
		if spec.manager == systemd {
			fmt.Fprintf(w, "would create %s (0600) if missing\n", spec.envFile())
		}
		fmt.Fprintf(w, "would create the data directory %s (0700) if missing\nwould run:\n", spec.dataDir)
		printSteps(w, steps)
		return nil
	}
	// What is written is undone if the install cannot finish.
	var u installUndo
	var keep []func()
	defer func() {
		for _, drop := range keep {
			drop()
		}
	}()
	fail := func(err error) error {
		u.undo(cmd.ErrOrStderr())
		return err
	}
	if err := spec.makeDirs(&u); err != nil {
		return fail(err)
	}
	if spec.manager == systemd {
		created, err := ensureEnvFile(spec.envFile())
		if err != nil {
			return fail(err)
		}
		if created {
			u.made(spec.envFile())
			fmt.Fprintf(w, "created %s (0600): secrets such as AGENT_TOKEN or ANTHROPIC_API_KEY go there\n", spec.envFile())
		} else if st, err := os.Stat(spec.envFile()); err == nil && st.Mode().Perm()&0o077 != 0 {
			cmd.PrintErrf("agent: warning: %s is readable by others (%#o); it holds secrets: chmod 600 it\n", spec.envFile(), st.Mode().Perm())
		}
	}
	if spec.binary != spec.source {
		drop, err := u.replacing(spec.binary)
		if err != nil {
			return fail(err)
		}
		keep = append(keep, drop)
	}
	if err := spec.copyBinary(); err != nil {
		return fail(err)
	}
	if spec.binary != spec.source {
		fmt.Fprintf(w, "copied %s to %s: the service runs that copy; install again to upgrade it\n", spec.source, spec.binary)
	} else {
		fmt.Fprintf(w, "the service runs %s where it is: rebuilding or moving it changes or breaks the service\n", spec.binary)
	}
	drop, err := u.replacing(path)
	if err != nil {
		return fail(err)
	}
	keep = append(keep, drop)
	if err := writeServiceFile(path, text); err != nil {
		return fail(err)
	}
	fmt.Fprintf(w, "wrote %s\n", path)
	if noStart {
		fmt.Fprintln(w, "load and start it with:")
		printSteps(w, steps)
		return nil
	}
	if err := runSteps(cmd.Context(), w, steps); err != nil {
		// The manager may have read the new file: put the old one back and
		// tell it so, best effort.
		u.undo(cmd.ErrOrStderr())
		if spec.manager == systemd {
			_, _ = runCtl(cmd.Context(), spec.systemctl("daemon-reload"))
		}
		return err
	}
	printWhere(w, spec.serviceTarget, spec.dataDir)
	return nil
}

// printWhere says where the service's data and logs are.
func printWhere(w io.Writer, t serviceTarget, dataDir string) {
	fmt.Fprintf(w, "data directory: %s\nlogs: %s\nstate: agent service status%s\n", dataDir, t.logsHint(), t.flagsHint())
}

// flagsHint repeats the flags that name this target, for a command to
// copy.
func (t serviceTarget) flagsHint() string {
	s := ""
	if t.name != "" {
		s += " --name " + t.name
	}
	if t.manager != hostManager() {
		s += " --manager " + string(t.manager)
	}
	if t.system {
		s += " --system"
	}
	return s
}

// makeDirs creates the data and work directories (0700, owned by the
// service's account) so that the sandbox can name them writable, and
// launchd's log directory. systemd makes its StateDirectory itself.
func (s serviceSpec) makeDirs(u *installUndo) error {
	dirs := []string{s.workDir}
	if !(s.manager == systemd && s.system && s.dataDir == filepath.Join("/var/lib", s.stateDirectory())) {
		dirs = append(dirs, s.dataDir)
	}
	if s.manager == launchd {
		dirs = append(dirs, filepath.Dir(s.logFile()))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(d); err == nil {
			continue
		}
		var made []string // from the top: undone from the deepest
		for p := d; ; p = filepath.Dir(p) {
			if _, err := os.Stat(p); err == nil || filepath.Dir(p) == p {
				break
			}
			made = append([]string{p}, made...)
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		for _, p := range made {
			u.made(p)
		}
		if uid, gid := s.ids(); s.system && uid != os.Geteuid() {
			if err := os.Chown(d, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeServiceFile replaces the unit or plist atomically. 0644 is what
// units are: the service manager and `systemctl cat` read them, and they
// hold no secret (the token is in the token file or the 0600 environment
// file).
func writeServiceFile(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomic.WriteFile(path, strings.NewReader(text)); err != nil {
		return err
	}
	return os.Chmod(path, 0o644) // atomic makes it 0600
}

func newServiceUninstallCmd() *cobra.Command {
	var (
		f      serviceFlags
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "uninstall [--system] [--name NAME] [--dry-run]",
		Short: "Stop, disable and remove the service; the data directory is kept",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.target()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			inst, err := readInstalled(t)
			if errors.Is(err, iofs.ErrNotExist) {
				fmt.Fprintf(w, "not installed: there is no %s\n", t.file())
				return nil
			}
			if err != nil {
				return err
			}
			if dryRun {
				fmt.Fprintln(w, "would run:")
				printSteps(w, t.unloadSteps())
				fmt.Fprintf(w, "would remove %s\nwould run:\n", t.file())
				printSteps(w, t.forgetSteps())
				return nil
			}
			if err := t.canRunCtl(); err != nil {
				return err
			}
			if err := runSteps(cmd.Context(), w, t.unloadSteps()); err != nil {
				return err
			}
			if err := os.Remove(t.file()); err != nil {
				return err
			}
			fmt.Fprintf(w, "removed %s\n", t.file())
			if err := runSteps(cmd.Context(), w, t.forgetSteps()); err != nil {
				return err
			}
			if inst.dataDir != "" {
				fmt.Fprintf(w, "kept the data directory %s (its tasks, logs and any records not yet delivered)\n", inst.dataDir)
			}
			if _, err := os.Stat(t.envFile()); t.manager == systemd && err == nil {
				fmt.Fprintf(w, "kept %s (it may hold secrets)\n", t.envFile())
			}
			return nil
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "change nothing: print the commands")
	return cmd
}
