package agent

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// retentionInterval is how often the agent prunes, after once at start.
const retentionInterval = time.Hour

// trashPrefix names what a prune has taken away and not yet removed: a
// task's logs and work directory are renamed to it at once (so that
// nothing can find them half removed), then removed. A crash between the
// two leaves them to the next prune. No task id starts with a dot.
const trashPrefix = ".pruning-"

// retention prunes what the agent no longer needs, under state.Retention's
// rules: finished tasks, with their logs and work directories, after
// Config.Retention or past Config.RetentionMaxBytes; and the outbox's dead
// records once dead for Config.Retention. It runs at start, then every
// retentionInterval.
type retention struct {
	layout   datadir.Layout
	workRoot string // a task's work directory is workRoot/TASK_ID
	store    *state.Store
	outbox   *outbox.Outbox
	rules    state.Retention
	now      func() time.Time
	log      *slog.Logger

	// running are the tasks the agent runs: one is left alone, and none
	// starts while a task is checked and taken away. held reports a task
	// whose reports or state wait in memory, which is left alone too.
	running *runningTasks
	held    func(taskID string) bool

	// workspaces, if set, removes the work directories that are git
	// clones, and only when that loses no work; usage, if set, is told
	// what the workspaces take after every prune.
	workspaces *workspace.Manager
	usage      *atomic.Pointer[datadir.WorkspaceUsage]
}

// retention returns the agent's pruner.
func (a *Agent) retention() *retention {
	return &retention{layout: a.layout, workRoot: a.workDir(), store: a.store, outbox: a.outbox,
		rules: state.Retention{MaxAge: a.cfg.Retention, MaxBytes: a.cfg.RetentionMaxBytes}, now: time.Now, log: a.log,
		running: a.running, held: a.held.holds, workspaces: a.workspaces, usage: &a.usage}
}

// holds reports whether reports or the state of task id wait in memory.
func (h *holdback) holds(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[id] > 0 || h.tasks[id] != nil
}

// Run prunes now and every retentionInterval until ctx ends.
func (r *retention) Run(ctx context.Context) error {
	tick := time.NewTicker(retentionInterval)
	defer tick.Stop()
	for {
		r.prune(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// pruned says what one prune did.
type pruned struct {
	tasks      int
	taskBytes  int64
	deadPurged int
}

// prune applies the rules once.
func (r *retention) prune(ctx context.Context) pruned {
	var res pruned
	now := r.now()
	r.sweepTrash()
	tasks, err := r.store.LoadAll()
	if err != nil {
		r.log.Warn("retention: some task files could not be read; those tasks are left alone", "err", err)
	}
	pending := r.outbox.PendingByTask()
	var stored []state.Stored
	for _, t := range tasks {
		if !t.Phase.Terminal() {
			continue // never pruned, and not counted: no need to measure
		}
		stored = append(stored, state.Stored{Task: t, Bytes: r.footprint(t.ID), Undelivered: pending[t.ID] > 0})
	}
	for _, p := range state.PlanPrune(stored, now, r.rules) {
		if ctx.Err() != nil {
			break
		}
		ok, err := r.remove(ctx, p)
		switch {
		case err != nil:
			r.log.Warn("retention: task not pruned", "task", p.ID, "err", err)
		case ok:
			res.tasks++
			res.taskBytes += p.Bytes
			r.log.Debug("retention: task pruned", "task", p.ID, "why", p.Reason, "ended", p.EndedAt, "bytes", p.Bytes)
		}
	}
	if res.tasks > 0 {
		r.log.Info("retention: finished tasks pruned, with their logs and work directories", "tasks", res.tasks, "bytes", res.taskBytes,
			"retention", r.rules.MaxAge, "max_bytes", r.rules.MaxBytes)
	}
	res.deadPurged = r.purgeDead(now)
	r.measureWorkspaces(ctx)
	return res
}

// measureWorkspaces finds what the workspaces take, for agent health and
// the metrics: once a prune, never per scrape.
func (r *retention) measureWorkspaces(ctx context.Context) {
	if r.workspaces == nil || r.usage == nil {
		return
	}
	list, err := r.workspaces.List(ctx)
	if err != nil {
		r.log.Warn("retention: some workspace records could not be read", "err", err)
	}
	u := datadir.WorkspaceUsage{Count: len(list), At: r.now().UTC()} // stored: in UTC
	for _, i := range list {
		u.Bytes += i.Bytes
		if i.Kept() {
			u.Kept++
		}
	}
	r.usage.Store(&u)
}

// purgeDead purges the outbox's records dead for longer than the
// retention, then compacts, so that their bytes go and inspection does
// not show them. It returns how many it purged.
func (r *retention) purgeDead(now time.Time) int {
	res, err := r.outbox.PurgeDead(now.Add(-r.rules.WithDefaults().MaxAge))
	if err != nil {
		r.log.Warn("retention: dead outbox records not purged", "err", err)
		return 0
	}
	if res.Purged == 0 {
		return 0
	}
	r.log.Info("retention: dead outbox records purged", "records", res.Purged, "bytes", res.Bytes, "dead_left", res.Kept)
	if _, err := r.outbox.Compact(nil); err != nil {
		r.log.Warn("retention: outbox not compacted after the purge; it compacts on its own later", "err", err)
	}
	return res.Purged
}

// remove takes task p away: its logs and work directory, then its state.
// It reports false, leaving everything, when the task changed since the
// plan (it runs again, a person retried it) or is busy. A work directory
// that is a workspace goes only when that loses no work: one that holds
// work stays, said once (the task's state goes, so the next prune does
// not see it again), for a person to remove (agent workspaces rm).
func (r *retention) remove(ctx context.Context, p state.Prune) (bool, error) {
	var trash []string
	ok, err := r.running.unlessRunning(p.ID, func() (bool, error) {
		if r.held(p.ID) {
			return false, nil
		}
		t, err := r.store.Load(p.ID)
		if err != nil || !t.Phase.Terminal() || !state.EndedAt(t).Equal(p.EndedAt) {
			return false, nil
		}
		// Logs and work directory first, the state last: a crash between
		// leaves the task to the next prune, never its files orphaned.
		dirs := []string{r.layout.Logs(p.ID), filepath.Join(r.workRoot, runner.SessionDirName, p.ID)}
		if isWorkspace, err := r.removeWorkspace(ctx, p.ID); err != nil {
			return false, err
		} else if !isWorkspace {
			dirs = append(dirs, filepath.Join(r.workRoot, p.ID))
		}
		for _, dir := range dirs {
			to := filepath.Join(filepath.Dir(dir), trashPrefix+p.ID)
			if err := os.Rename(dir, to); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return false, err
			}
			trash = append(trash, to)
		}
		return true, r.store.Delete(p.ID)
	})
	for _, dir := range trash {
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return ok && err == nil, err
}

// removeWorkspace removes task id's workspace, if it has one, unless
// that would lose work; then it says so, once, and keeps it. It reports
// whether the task has a workspace.
func (r *retention) removeWorkspace(ctx context.Context, id string) (bool, error) {
	if r.workspaces == nil {
		return false, nil
	}
	if _, err := r.workspaces.Get(id); errors.Is(err, workspace.ErrNoWorkspace) {
		return false, nil
	} else if err != nil {
		return true, err
	}
	i, err := r.workspaces.Remove(ctx, id, false)
	switch {
	case errors.Is(err, workspace.ErrKept):
		r.log.Warn("workspace kept: "+i.Loses()+"; agent workspaces rm "+id+" to remove", "task", id, "dir", i.Dir, "branch", i.Branch, "repo", i.Repo)
	case err != nil:
		return true, err
	default:
		r.log.Debug("retention: workspace removed", "task", id, "dir", i.Dir, "branch", i.Branch)
	}
	return true, nil
}

// sweepTrash removes what a prune cut short by a crash had taken away.
func (r *retention) sweepTrash() {
	for _, root := range []string{filepath.Join(r.layout.Dir, "logs"), r.workRoot, filepath.Join(r.workRoot, runner.SessionDirName)} {
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), trashPrefix) {
				if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
					r.log.Warn("retention: leftover of a prune not removed", "path", filepath.Join(root, e.Name()), "err", err)
				}
			}
		}
	}
}

// taskDirs are task id's directories: its logs, its work directory and
// its session directory (runner.SessionDirName).
func (r *retention) taskDirs(id string) []string {
	return []string{r.layout.Logs(id), filepath.Join(r.workRoot, id), filepath.Join(r.workRoot, runner.SessionDirName, id)}
}

// footprint is what task id takes on disk: its state file, its logs, its
// work directory and its session directory. Links are counted as links, never followed.
func (r *retention) footprint(id string) int64 {
	var n int64
	if info, err := os.Lstat(r.store.Path(id)); err == nil {
		n += info.Size()
	}
	for _, dir := range r.taskDirs(id) {
		n += durable.TreeBytes(dir)
	}
	return n
}
