package main

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/outbox"
)

// installed is what an installed unit or plist says.
type installed struct {
	binary  string   // the agent binary it runs
	args    []string // agent run's flags
	dataDir string   // its --data-dir, "" if it names none
	// user is the account a system unit runs as (User=; launchd's
	// UserName), "" for the manager's own (root, or the user's manager).
	user string
}

// readInstalled reads the target's service file; iofs.ErrNotExist when
// there is none.
func readInstalled(t serviceTarget) (installed, error) {
	return readServiceFile(t.manager, t.file())
}

// readServiceFile reads a unit or plist install wrote.
func readServiceFile(m serviceManager, path string) (installed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return installed{}, err
	}
	var inst installed
	var words []string
	if m == launchd {
		if words, err = plistProgramArguments(string(b)); err != nil {
			return installed{}, fmt.Errorf("%s: %w", path, err)
		}
	} else {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
				words = systemdWords(v)
			}
			if v, ok := strings.CutPrefix(l, "User="); ok {
				inst.user = strings.Trim(v, `"`)
			}
		}
	}
	if len(words) > 0 {
		inst.binary = words[0]
	}
	if len(words) > 2 {
		inst.args = words[2:] // after the binary and "run"
	}
	for i, a := range inst.args {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			inst.dataDir = v
		} else if a == "--data-dir" && i+1 < len(inst.args) {
			inst.dataDir = inst.args[i+1]
		}
	}
	return inst, nil
}

// serviceState is the service manager's view of the service.
type serviceState struct {
	active  string // active (running), inactive (dead), failed, ... ; running on launchd
	pid     int
	status  string // the agent's last STATUS= line (systemd)
	restart string // restarts so far (systemd)
}

func (t serviceTarget) state(cmd *cobra.Command) (serviceState, error) {
	out, err := runCtl(cmd.Context(), t.showCall())
	if err != nil {
		if t.manager == launchd { // launchctl print fails for a job not loaded
			return serviceState{active: "not loaded"}, nil
		}
		return serviceState{}, err
	}
	if t.manager == launchd {
		active, pid := launchdState(out)
		return serviceState{active: active, pid: pid}, nil
	}
	props := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			props[k] = v
		}
	}
	st := serviceState{active: props["ActiveState"], status: props["StatusText"], restart: props["NRestarts"]}
	if sub := props["SubState"]; sub != "" {
		st.active += " (" + sub + ")"
	}
	st.pid, _ = strconv.Atoi(props["MainPID"])
	return st, nil
}

// running is whether the manager says the service runs.
func (s serviceState) running() bool {
	return strings.HasPrefix(s.active, "active") || s.active == "running"
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
			w := cmd.OutOrStdout()
			tw := newTable(w)
			inst, err := readInstalled(t)
			if errors.Is(err, iofs.ErrNotExist) {
				fmt.Fprintf(tw, "service:\tnot installed (no %s)\n", t.file())
				tw.Flush()
				return exitCode(4)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "service:\tinstalled (%s)\n", t.file())
			if err := t.canRunCtl(); err != nil {
				return err
			}
			// The local state is worth showing even when the manager
			// cannot be asked (a user bus out of reach over ssh).
			st, stateErr := t.state(cmd)
			if stateErr != nil {
				st.active = "unknown: " + oneLine(stateErr.Error())
			}
			fmt.Fprintf(tw, "state:\t%s\n", visible(st.active))
			if st.pid > 0 {
				fmt.Fprintf(tw, "main pid:\t%d\n", st.pid)
			}
			if st.status != "" {
				fmt.Fprintf(tw, "agent says:\t%s\n", visible(st.status))
			}
			if st.restart != "" && st.restart != "0" {
				fmt.Fprintf(tw, "restarts:\t%s\n", st.restart)
			}
			if inst.dataDir != "" {
				fmt.Fprintf(tw, "data directory:\t%s\n", inst.dataDir)
				fmt.Fprintf(tw, "tasks:\t%s\n", localTasksLine(inst.dataDir))
				fmt.Fprintf(tw, "outbox:\t%s\n", localOutboxLine(inst.dataDir))
			}
			fmt.Fprintf(tw, "logs:\t%s\n", t.logsHint())
			if err := tw.Flush(); err != nil {
				return err
			}
			switch {
			case stateErr != nil:
				return exitCode(1)
			case !st.running():
				return exitCode(3)
			}
			return nil
		},
	}
	f.add(cmd, false)
	return cmd
}

// localTasksLine says which tasks run, read from the data directory
// without the lock, as agent tasks ls does.
func localTasksLine(dataDir string) string {
	if _, err := os.Stat(datadir.Layout{Dir: dataDir}.Tasks()); errors.Is(err, iofs.ErrNotExist) {
		return "none yet (the agent has not run here)"
	}
	tasks, err := datadir.LoadTasks(dataDir)
	if tasks == nil && err != nil {
		return "unreadable: " + oneLine(err.Error())
	}
	var ids []string
	for _, t := range tasks {
		if t.Phase.Running() {
			ids = append(ids, visible(t.ID))
		}
	}
	if len(ids) == 0 {
		return fmt.Sprintf("none running (%d in the data directory)", len(tasks))
	}
	return fmt.Sprintf("%d running: %s", len(ids), strings.Join(ids, ", "))
}

// localOutboxLine says what the outbox holds, read without the lock, as
// agent outbox stats does.
func localOutboxLine(dataDir string) string {
	if _, err := os.Stat(outboxDir(dataDir)); errors.Is(err, iofs.ErrNotExist) {
		return "none yet (the agent has not run here)"
	}
	snap, err := outbox.Inspect(outboxDir(dataDir))
	if err != nil {
		return "unreadable: " + oneLine(err.Error())
	}
	return fmt.Sprintf("%d records pending, %d dead", snap.Stats.Pending, snap.Stats.Dead)
}

func newServiceStartCmd() *cobra.Command {
	return newServiceCtlCmd("start", "Start the installed service")
}

func newServiceStopCmd() *cobra.Command {
	return newServiceCtlCmd("stop", "Stop the service: the agent drains (see agent run) and exits; it is not restarted")
}

func newServiceRestartCmd() *cobra.Command {
	return newServiceCtlCmd("restart", "Restart the service: the agent drains, exits and starts again (after an upgrade, or to take settings a reload does not)")
}

// newServiceCtlCmd is start, stop or restart: one call of the manager.
func newServiceCtlCmd(verb, short string) *cobra.Command {
	var f serviceFlags
	cmd := &cobra.Command{
		Use:   verb + " [--system] [--name NAME]",
		Short: short,
		Args:  noArgs,
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
			call := map[string]ctlCall{"start": t.startCall(), "stop": t.stopCall(), "restart": t.restartCall()}[verb]
			return runSteps(cmd.Context(), cmd.OutOrStdout(), []ctlStep{{call: call}})
		},
	}
	f.add(cmd, false)
	return cmd
}
