package agentview

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/shellword"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// WriteHealth writes the health record h of the agent on dataDir, a line
// each, times as of now.
func WriteHealth(w io.Writer, h datadir.HealthFile, dataDir string, now time.Time) {
	fmt.Fprintf(w, "executor:       %s\n", h.Executor)
	fmt.Fprintf(w, "grade:          %s (since %s)\n", h.Grade, taskview.Ago(now, h.Since))
	if h.Reason != "" {
		fmt.Fprintf(w, "reason:         %s\n", taskview.Visible(h.Reason))
	}
	if h.Isolation != "" {
		fmt.Fprintf(w, "isolation:      %s\n", taskview.Visible(h.Isolation))
	}
	fmt.Fprintf(w, "control plane:  %s\n", taskview.Visible(h.ControlPlane))
	if st := h.Storage; st.Failing != "" {
		fmt.Fprintf(w, "storage:        %s (since %s; %d reports and %d task states held in memory)\n",
			taskview.Visible(st.Failing), taskview.Ago(now, st.Since), st.HeldReports, st.HeldTasks)
	} else {
		fmt.Fprintf(w, "storage:        writes work\n")
	}
	if free := durable.FreeBytes(dataDir); free >= 0 {
		fmt.Fprintf(w, "disk free:      %s\n", bytesize.Tenths(free))
	}
	if s := h.Starts; s.Max > 0 {
		fmt.Fprintf(w, "starts:         %d starting, %d queued (--max-starts %d)\n", s.Starting, s.Queued, s.Max)
	}
	if ws := h.Workspaces; ws != nil {
		fmt.Fprintf(w, "workspaces:     %d taking %s; %d kept, holding work (agent workspaces ls); measured %s\n",
			ws.Count, bytesize.Tenths(ws.Bytes), ws.Kept, taskview.Ago(now, ws.At))
	}
	fmt.Fprintf(w, "recorded:       %s by agent %s\n", taskview.Ago(now, h.UpdatedAt), taskview.Visible(h.AgentID))
	if len(h.RecentErrors) > 0 {
		fmt.Fprintln(w, "recent errors:")
		for _, p := range h.RecentErrors {
			fmt.Fprintf(w, "  %-8s %-20s %s\n", taskview.Ago(now, p.At), p.Signal, taskview.Visible(p.Detail))
		}
	}
}

// RunningTasks are the ids of the tasks the data directory's task files
// show running.
func RunningTasks(dataDir string) []string {
	tasks, _ := datadir.LoadTasks(dataDir)
	var ids []string
	for _, t := range tasks {
		if t.Phase.Running() {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// TasksLine says in a line which tasks of the data directory run.
func TasksLine(dataDir string) string {
	if _, err := os.Stat(datadir.Layout{Dir: dataDir}.Tasks()); errors.Is(err, iofs.ErrNotExist) {
		return "none yet (the agent has not run here)"
	}
	tasks, err := datadir.LoadTasks(dataDir)
	if tasks == nil && err != nil {
		return "unreadable: " + strings.Join(strings.Fields(err.Error()), " ")
	}
	var ids []string
	for _, t := range tasks {
		if t.Phase.Running() {
			ids = append(ids, taskview.Visible(t.ID))
		}
	}
	if len(ids) == 0 {
		return fmt.Sprintf("none running (%d in the data directory)", len(tasks))
	}
	return fmt.Sprintf("%d running: %s", len(ids), strings.Join(ids, ", "))
}

// NextRun says, a line per task, what the agent does with the tasks a
// stop left waiting for its next run: re-attach to an attempt that goes
// on, continue a session, or run an attempt again from the start.
func NextRun(dataDir string) []string {
	tasks, _ := datadir.LoadTasks(dataDir)
	var lines []string
	spool := datadir.Layout{Dir: dataDir}.Spool()
	for _, t := range tasks {
		c := t.Current()
		if !t.Phase.Running() || c == nil {
			continue
		}
		if c.Status == state.AttemptRunning && keeper.Alive(filepath.Join(spool, c.AttemptID)) {
			// Its keeper runs it on and waits for the agent's next start
			// (--reattach-grace).
			lines = append(lines, fmt.Sprintf("task %s will be re-attached when the agent starts again: attempt %d goes on meanwhile", taskview.Visible(t.ID), c.Number))
			continue
		}
		if c.Status != state.AttemptPending {
			continue
		}
		if c.Continues > 0 {
			lines = append(lines, fmt.Sprintf("task %s will continue attempt %d's session (attempt %d) when the agent starts again", taskview.Visible(t.ID), c.Continues, c.Number))
		} else {
			lines = append(lines, fmt.Sprintf("task %s will run attempt %d from the start when the agent starts again", taskview.Visible(t.ID), c.Number))
		}
	}
	return lines
}

// ErrStillRuns is the error of WaitStopped when the agent outlives its
// timeout.
var ErrStillRuns = errors.New("still runs")

// WaitStopped waits for the agent pid on dataDir, asked to stop, to exit,
// saying on w each tick what it still does, then what its next start
// takes up. Past timeout it fails with ErrStillRuns; it ends with ctx.
func WaitStopped(ctx context.Context, w io.Writer, dataDir string, pid int, timeout, tick time.Duration) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if _, err := datadir.Running(dataDir); errors.Is(err, datadir.ErrNotRunning) {
			fmt.Fprintf(w, "agent pid %d stopped\n", pid)
			for _, line := range NextRun(dataDir) {
				fmt.Fprintln(w, line)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent pid %d %w after %s", pid, ErrStillRuns, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if ids := RunningTasks(dataDir); len(ids) > 0 {
			fmt.Fprintf(w, "waiting: %d task(s) still running: %s\n", len(ids), taskview.Visible(fmt.Sprint(ids)))
		} else {
			fmt.Fprintln(w, "waiting: delivering pending records")
		}
	}
}

// StopOptions say how agent stop stops the agent on a data directory.
type StopOptions struct {
	DataDir string
	// Now stops it at once (SIGQUIT) rather than have it drain (SIGTERM).
	Now bool
	// NoWait returns once it is signalled.
	NoWait bool
	// Timeout and Tick are WaitStopped's.
	Timeout, Tick time.Duration
	// Bin is this binary as invoked, for the command that stops an agent
	// that outlived Timeout at once.
	Bin string
}

// Stop signals the agent holding o.DataDir's lock (datadir.Stop), warns
// on errOut of a pid file that names another process, says on out what
// it asked, and, unless o.NoWait, waits for the agent to exit
// (WaitStopped).
func Stop(ctx context.Context, out, errOut io.Writer, o StopOptions) error {
	h, err := datadir.Stop(o.DataDir, o.Now)
	if h.PIDFile != 0 {
		fmt.Fprintf(errOut, "agent: warning: %s names pid %d, which does not hold the data directory's lock: not signalled (something rewrote the file)\n",
			datadir.Layout{Dir: o.DataDir}.PIDFile(), h.PIDFile)
	}
	if err != nil {
		return err
	}
	how := "drain"
	if o.Now {
		how = "stop at once"
	}
	fmt.Fprintf(out, "asked agent pid %d to %s\n", h.PID, how)
	if o.NoWait {
		return nil
	}
	err = WaitStopped(ctx, out, o.DataDir, h.PID, o.Timeout, o.Tick)
	if errors.Is(err, ErrStillRuns) {
		return fmt.Errorf("%w; %s stop --now --data-dir %s stops it at once", err, o.Bin, shellword.Quote(o.DataDir))
	}
	return err
}
