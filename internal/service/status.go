package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/internal/taskview"
)

// Installation is what an installed unit or plist says.
type Installation struct {
	Binary  string   // the agent binary it runs
	Args    []string // agent run's flags
	DataDir string   // its --data-dir, "" if it names none
	// User is the account a system unit runs as (User=), "" for the
	// manager's own (root, or the user's manager).
	User string
}

// ReadInstalled reads the target's service file; an error that is
// iofs.ErrNotExist when there is none.
func ReadInstalled(t Target) (Installation, error) {
	return ReadServiceFile(t.Manager, t.File())
}

// ReadServiceFile reads a unit or plist Install wrote.
func ReadServiceFile(m Manager, path string) (Installation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Installation{}, err
	}
	var inst Installation
	var words []string
	if m == Launchd {
		if words, err = plistProgramArguments(string(b)); err != nil {
			return Installation{}, fmt.Errorf("%s: %w", path, err)
		}
	} else {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
				words = systemdWords(v)
			}
			if v, ok := strings.CutPrefix(l, "User="); ok {
				inst.User = strings.Trim(v, `"`)
			}
		}
	}
	if len(words) > 0 {
		inst.Binary = words[0]
	}
	if len(words) > 2 {
		inst.Args = words[2:] // after the binary and "run"
	}
	for i, a := range inst.Args {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			inst.DataDir = v
		} else if a == "--data-dir" && i+1 < len(inst.Args) {
			inst.DataDir = inst.Args[i+1]
		}
	}
	return inst, nil
}

// State is the service manager's view of the service.
type State struct {
	Active   string // active (running), inactive (dead), failed, ... ; running on launchd
	PID      int
	Status   string // the agent's last STATUS= line (systemd)
	Restarts string // restarts so far (systemd)
}

// State asks the service manager for the service's state.
func (t Target) State(ctx context.Context) (State, error) {
	out, err := runCtl(ctx, t.showCall())
	if err != nil {
		if t.Manager == Launchd { // launchctl print fails for a job not loaded
			return State{Active: "not loaded"}, nil
		}
		return State{}, err
	}
	if t.Manager == Launchd {
		active, pid := launchdState(out)
		return State{Active: active, PID: pid}, nil
	}
	props := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			props[k] = v
		}
	}
	st := State{Active: props["ActiveState"], Status: props["StatusText"], Restarts: props["NRestarts"]}
	if sub := props["SubState"]; sub != "" {
		st.Active += " (" + sub + ")"
	}
	st.PID, _ = strconv.Atoi(props["MainPID"])
	return st, nil
}

// Running is whether the manager says the service runs.
func (s State) Running() bool {
	return strings.HasPrefix(s.Active, "active") || s.Active == "running"
}

// The exit codes of agent service status.
const (
	StatusRunning      = 0
	StatusUnknown      = 1
	StatusStopped      = 3
	StatusNotInstalled = 4
)

// WriteStatus writes, a line each, whether the service t is installed and
// running, what its manager and the agent say, and from its data
// directory (local: which tasks run, what the outbox holds) and returns
// the exit code that says it (Status*). The local state is shown even
// when the manager cannot be asked (a user bus out of reach over ssh).
func WriteStatus(ctx context.Context, w io.Writer, t Target, local func(dataDir string) (tasks, outbox string)) (int, error) {
	tw := taskview.NewTable(w)
	inst, err := ReadInstalled(t)
	if errors.Is(err, iofs.ErrNotExist) {
		fmt.Fprintf(tw, "service:\tnot installed (no %s)\n", t.File())
		return StatusNotInstalled, tw.Flush()
	}
	if err != nil {
		return StatusUnknown, err
	}
	fmt.Fprintf(tw, "service:\tinstalled (%s)\n", t.File())
	if err := t.CanRunCtl(); err != nil {
		return StatusUnknown, err
	}
	st, stateErr := t.State(ctx)
	if stateErr != nil {
		st.Active = "unknown: " + strings.Join(strings.Fields(stateErr.Error()), " ")
	}
	fmt.Fprintf(tw, "state:\t%s\n", taskview.Visible(st.Active))
	if st.PID > 0 {
		fmt.Fprintf(tw, "main pid:\t%d\n", st.PID)
	}
	if st.Status != "" {
		fmt.Fprintf(tw, "agent says:\t%s\n", taskview.Visible(st.Status))
	}
	if st.Restarts != "" && st.Restarts != "0" {
		fmt.Fprintf(tw, "restarts:\t%s\n", st.Restarts)
	}
	if inst.DataDir != "" {
		tasks, outbox := local(inst.DataDir)
		fmt.Fprintf(tw, "data directory:\t%s\n", inst.DataDir)
		fmt.Fprintf(tw, "tasks:\t%s\n", tasks)
		fmt.Fprintf(tw, "outbox:\t%s\n", outbox)
	}
	fmt.Fprintf(tw, "logs:\t%s\n", t.LogsHint())
	if err := tw.Flush(); err != nil {
		return StatusUnknown, err
	}
	switch {
	case stateErr != nil:
		return StatusUnknown, nil
	case !st.Running():
		return StatusStopped, nil
	}
	return StatusRunning, nil
}
