package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/agentsettings"
	"github.com/edgeagent/agent/internal/agentview"
	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/internal/service"
)

// The service commands: flags become a service.Target (which service) and,
// for print and install, with agent run's flags after -- resolved as the
// service will see them (service_spec.go), a service.Spec; the package
// does the rest.

func newServiceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Run `agent run` as a systemd service (a launchd job on macOS): install, uninstall, status, start, stop, restart, upgrade, logs, print",
		Long: `service install writes a systemd unit (a launchd plist on macOS) that runs
agent run with the flags given after --, made absolute, and starts it;
service uninstall stops and removes it, keeping the data directory. The
unit names the token file or reads AGENT_TOKEN from its environment file;
it never holds the token.

User units by default (systemctl --user; the service runs while you are
logged in, or always after loginctl enable-linger); --system for a system
unit (/etc/systemd/system, needs root), which runs as --run-as USER, or as
the user sudo was run by: never as root unless --run-as root says so.`,
	}
	cmd.AddCommand(newServicePrintCmd(), newServiceInstallCmd(), newServiceUninstallCmd(),
		newServiceStatusCmd(), newServiceStartCmd(), newServiceStopCmd(), newServiceRestartCmd(), newServiceUpgradeCmd(), newServiceLogsCmd())
	return cmd
}

// serviceFlags are what every service subcommand takes: which service.
type serviceFlags struct {
	manager string
	name    string
	system  bool
	runAs   string
	// writes: the command makes a unit (install, print), whose account
	// must be named (see target).
	writes bool
}

func (f *serviceFlags) add(cmd *cobra.Command, withRunAs bool) {
	cmd.Flags().BoolVar(&f.system, "system", false, "a system unit (/etc/systemd/system; a LaunchDaemon on macOS) rather than the user's; needs root")
	cmd.Flags().StringVar(&f.name, "name", "", "which of several agents on this machine: the unit agent-NAME.service (launchd: dev.edgeagent.agent.NAME), with its own data directory and environment file (default: the one named agent)")
	cmd.Flags().StringVar(&f.manager, "manager", string(service.HostManager()), "systemd or launchd (launchd's commands run only on macOS; its plist can be printed anywhere)")
	if withRunAs {
		f.writes = true
		cmd.Flags().StringVar(&f.runAs, "run-as", "", "with --system: the user the service runs as (default: the one sudo was run by; root only as --run-as root)")
	}
}

// target is the service the flags name.
func (f *serviceFlags) target() (service.Target, error) {
	return service.NewTarget(service.Request{Manager: service.Manager(f.manager), Name: f.name, System: f.system, RunAs: f.runAs,
		SudoUser: os.Getenv("SUDO_USER"), Writes: f.writes, StateHome: filepath.Dir(agentsettings.DefaultDataDir())})
}

// controllable is the target of a command that calls the service
// manager on an installed service: installed, and the manager callable
// by this user.
func (f *serviceFlags) controllable() (service.Target, error) {
	t, err := f.target()
	if err != nil {
		return t, err
	}
	if err := t.Installed(); err != nil {
		return t, err
	}
	return t, t.CanRunCtl()
}

// addLimitsFlags binds --tasks-max and --memory-max.
func addLimitsFlags(cmd *cobra.Command, l *service.Limits) {
	cmd.Flags().StringVar(&l.TasksMax, "tasks-max", service.DefaultTasksMax, "the most processes and threads the service and its tasks may run together (TasksMax=; launchd: NumberOfProcesses), or infinity")
	cmd.Flags().StringVar(&l.MemoryMax, "memory-max", service.DefaultMemoryMax, "the most memory the service and its tasks may use together (MemoryMax=): bytes (8GiB, 8G), a share of RAM (75%), or infinity; systemd only")
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

// specFlags are what print and install take to make the unit: which
// service, its limits, its binary and its sandbox.
type specFlags struct {
	serviceFlags
	lim       service.Limits
	bin       binFlags
	noSandbox bool
}

func (s *specFlags) add(cmd *cobra.Command, noSandboxUsage string) {
	s.serviceFlags.add(cmd, true)
	addLimitsFlags(cmd, &s.lim)
	s.bin.add(cmd)
	cmd.Flags().BoolVar(&s.noSandbox, "no-sandbox", false, noSandboxUsage)
}

// spec is the service the flags say, running agent run with args, agent
// run's flags after --, resolved as the service will see them.
func (s *specFlags) spec(cmd *cobra.Command, args []string) (service.Spec, error) {
	s.lim.MemorySet = cmd.Flags().Changed("memory-max")
	t, err := s.target()
	if err != nil {
		return service.Spec{}, err
	}
	return runFlagsOfService.SpecFor(t, args, s.lim, !s.noSandbox, s.bin.path, s.bin.noCopy)
}

const runFlagsExample = `  agent service install -- --control-plane https://cp.example.com --token-file ~/.config/agent/token --executor codex
  sudo agent service install --system --run-as builder -- --control-plane https://cp.example.com --token-file /etc/agent/token`

func newServicePrintCmd() *cobra.Command {
	var f specFlags
	cmd := &cobra.Command{
		Use:     "print [--system --run-as USER] [--name NAME] [--bin PATH | --no-copy] [--manager systemd|launchd] [--tasks-max N] [--memory-max SIZE] -- RUN-FLAGS...",
		Short:   "Print the systemd unit (launchd plist) service install would write",
		Example: `  agent service print -- --control-plane https://cp.example.com --token-file /etc/agent/token --executor sample`,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := f.spec(cmd, args)
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), spec.Render())
			for _, l := range spec.Notices() {
				cmd.PrintErrln(l)
			}
			return nil
		},
	}
	f.add(cmd, "leave the unit's sandboxing out")
	return cmd
}

func newServiceInstallCmd() *cobra.Command {
	var (
		f               specFlags
		noStart, dryRun bool
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
(TasksMax=, default ` + service.DefaultTasksMax + `: processes and threads) and --memory-max
(MemoryMax=, default ` + service.DefaultMemoryMax + ` of RAM), each also infinity. launchd takes
--tasks-max as NumberOfProcesses (a limit on the user's processes, which
macOS caps at kern.maxprocperuid) and has no memory limit.

--name NAME installs another agent beside the first: the unit
agent-NAME.service (launchd: dev.edgeagent.agent.NAME), its environment
file agent-NAME.env and, unless its flags name one, its own data directory
(~/.local/state/agent-NAME; /var/lib/agent-NAME for a root system service).
Every other service command takes --name to say which.`,
		Example: runFlagsExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := f.spec(cmd, args)
			if err != nil {
				return err
			}
			if !dryRun && !noStart {
				if err := spec.CanRunCtl(); err != nil {
					return err
				}
			}
			for _, l := range spec.Notices() {
				cmd.PrintErrln(l)
			}
			if spec.System && spec.Account.Uid == "0" {
				cmd.PrintErrf("agent: warning: the service runs as root (--run-as root): its tasks can write %s, ~/.ssh included\n", spec.Account.HomeDir)
			}
			return service.Install(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), spec, noStart, dryRun)
		},
	}
	f.add(cmd, "leave the unit's sandboxing out (see docs/service.md for what it allows)")
	cmd.Flags().BoolVar(&noStart, "no-start", false, "write the files, print the commands that would load and start the service")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "write nothing: print the file and the commands")
	return cmd
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
			return service.Uninstall(cmd.Context(), cmd.OutOrStdout(), t, dryRun)
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "change nothing: print the commands")
	return cmd
}

func newServiceStatusCmd() *cobra.Command {
	var f serviceFlags
	cmd := &cobra.Command{
		Use:   "status [--system] [--name NAME]",
		Short: "Say whether the service is installed and running, its PID, running tasks and pending records (exit 0 running, 3 stopped, 4 not installed, 1 unknown)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.target()
			if err != nil {
				return err
			}
			code, err := service.WriteStatus(cmd.Context(), cmd.OutOrStdout(), t, func(dataDir string) (string, string) {
				return agentview.TasksLine(dataDir), outboxview.Summary(dataDir)
			})
			if err != nil {
				return err
			}
			return exitOr(exitCode(code))
		},
	}
	f.add(cmd, false)
	return cmd
}

func newServiceStartCmd() *cobra.Command {
	return newServiceCtlCmd("start", "Start the installed service", service.Target.Start)
}

func newServiceStopCmd() *cobra.Command {
	return newServiceCtlCmd("stop", "Stop the service: the agent drains (see agent run) and exits; it is not restarted", service.Target.Stop)
}

func newServiceRestartCmd() *cobra.Command {
	return newServiceCtlCmd("restart", "Restart the service: the agent drains, exits and starts again (after an upgrade, or to take settings a reload does not)", service.Target.Restart)
}

// newServiceCtlCmd is start, stop or restart: one call of the manager.
func newServiceCtlCmd(verb, short string, do func(service.Target, context.Context, io.Writer) error) *cobra.Command {
	var f serviceFlags
	cmd := &cobra.Command{
		Use:   verb + " [--system] [--name NAME]",
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.controllable()
			if err != nil {
				return err
			}
			return do(t, cmd.Context(), cmd.OutOrStdout())
		},
	}
	f.add(cmd, false)
	return cmd
}

func newServiceUpgradeCmd() *cobra.Command {
	var (
		f   serviceFlags
		bin string
	)
	cmd := &cobra.Command{
		Use:   "upgrade [--bin PATH] [--system] [--name NAME]",
		Short: "Replace the service's agent binary with a new one and restart it, cutting no running turn",
		Long: `service upgrade puts a new agent binary where the installed service runs
its binary (the unit's ExecStart, the plist's ProgramArguments) and
restarts the service. --bin names the new binary (default: the one running
this command). It is checked first (it must run and say its version), then
copied next to the old one and renamed over it: the service finds either
the old binary or the new one, whole, never a part.

The restart stops the old agent as agent stop does: its running attempts
go on under their keepers (--reattach-grace, default 5m), and the new
agent re-attaches to each where it is, the same process, nothing cut,
nothing sent twice. A service run with --reattach-grace 0 drains instead,
and upgrade says so before it restarts.`,
		Example: `  agent service upgrade --bin ./agent
  sudo agent service upgrade --system --bin /tmp/agent-1.4.0`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.controllable()
			if err != nil {
				return err
			}
			return service.Upgrade(cmd.Context(), cmd.OutOrStdout(), t, bin, agentview.RunningTasks)
		},
	}
	f.add(cmd, false)
	cmd.Flags().StringVar(&bin, "bin", "", "the new agent binary (default: this one)")
	return cmd
}

func newServiceLogsCmd() *cobra.Command {
	var (
		f        serviceFlags
		noFollow bool
	)
	cmd := &cobra.Command{
		Use:   "logs [--system] [--name NAME] [--no-follow]",
		Short: "Show the service's last 100 lines of log and follow them (journalctl -u UNIT -f; on macOS, tail -f of its log file)",
		Long: `logs runs journalctl -u agent.service -n 100 -f (--user for a user
service; agent-NAME.service with --name), or on macOS tail -n 100 -f of the
job's log file, until interrupted. journalctl -p warning -u agent.service
shows the warnings and errors alone: the agent logs each line at its
priority there.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.target()
			if err != nil {
				return err
			}
			if err := t.Installed(); err != nil {
				return err
			}
			return t.Logs(cmd.Context(), !noFollow, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&noFollow, "no-follow", false, "show the last lines and return")
	return cmd
}
