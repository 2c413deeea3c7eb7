package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

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
			t, err := f.target()
			if err != nil {
				return err
			}
			if err := t.installed(); err != nil {
				return err
			}
			if err := t.canRunCtl(); err != nil {
				return err
			}
			inst, err := readInstalled(t)
			if err != nil {
				return err
			}
			if !filepath.IsAbs(inst.binary) {
				return fmt.Errorf("%s runs %q, not an absolute path: reinstall the service (agent service install)", t.file(), inst.binary)
			}
			src, err := upgradeSource(bin)
			if err != nil {
				return err
			}
			if same, _ := sameFile(src, inst.binary); same {
				return fmt.Errorf("the service already runs %s; give --bin the new agent binary", inst.binary)
			}
			version, err := binaryVersion(cmd.Context(), src)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			spec := serviceSpec{serviceTarget: t, binary: inst.binary, source: src}
			if err := spec.copyBinary(); err != nil {
				return err
			}
			fmt.Fprintf(out, "installed %s (%s) as %s\n", src, version, inst.binary)
			running := upgradeRunning(t, inst)
			if reattachOff(inst.args) && len(running) > 0 {
				fmt.Fprintf(out, "the service runs with --reattach-grace 0: the restart drains %d running task(s) and cuts what has not finished\n", len(running))
			} else {
				for _, id := range running {
					fmt.Fprintf(out, "task %s goes on through the restart: the new agent re-attaches to it\n", visible(id))
				}
			}
			return runSteps(cmd.Context(), out, []ctlStep{{call: t.restartCall()}})
		},
	}
	f.add(cmd, false)
	cmd.Flags().StringVar(&bin, "bin", "", "the new agent binary (default: this one)")
	return cmd
}

// upgradeSource is the new binary: bin, or the running one, symbolic
// links resolved.
func upgradeSource(bin string) (string, error) {
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("this binary's path: %w; give --bin", err)
		}
		bin = exe
	}
	p, err := absolutePath("bin", bin)
	if err != nil {
		return "", err
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return "", fmt.Errorf("--bin %s: no such file", bin)
		}
		return "", fmt.Errorf("--bin %s: %w", bin, err)
	}
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return "", fmt.Errorf("--bin %s: %w", bin, err)
	case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("--bin %s: not an executable file", bin)
	}
	return p, nil
}

// sameFile reports whether a and b are one file.
func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// binaryVersion runs bin's version command: a file that does not run, or
// is not an agent, is refused before it replaces anything.
func binaryVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "version")
	b, err := c.Output()
	line := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil || !strings.HasPrefix(line, "agent ") {
		return "", fmt.Errorf("--bin %s does not run as an agent binary (its version command said %q: %v); nothing replaced", bin, oneLine(line), err)
	}
	return line, nil
}

// upgradeRunning are the tasks the service's data directory shows
// running.
func upgradeRunning(t serviceTarget, inst installed) []string {
	dir := inst.dataDir
	if dir == "" {
		dir = t.defaultDataDir()
	}
	return runningTasks(dir)
}

// reattachOff reports whether agent run's flags turn re-attaching off.
func reattachOff(args []string) bool {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--reattach-grace=")
		if !ok && a == "--reattach-grace" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if ok {
			if d, err := time.ParseDuration(v); err == nil && d == 0 || v == "0" {
				return true
			}
		}
	}
	return false
}
