package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
)

// reattaches reports whether the agent's attempts outlive it: a grace is
// set, attempts run under keepers here, and the executor can.
func (a *Agent) reattaches() bool {
	return a.cfg.ReattachGrace > 0 && keeper.Supported() && runner.CanReattach(a.live.Load().Executor)
}

// attachKeepers attaches to the keepers a previous life of the agent left
// running, one per spool directory, by attempt id. A spool with no keeper
// left (it ended, or was killed) is removed: its attempt is taken up as
// one a crash cut.
func (a *Agent) attachKeepers() map[string]*proc.Process {
	root := a.layout.Spool()
	entries, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("the spools of attempts left running cannot be listed; they are left to end on their own", "dir", root, "err", err)
		}
		return nil
	}
	kept := map[string]*proc.Process{}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() {
			continue
		}
		p, err := proc.Attach(dir)
		if err != nil {
			a.log.Info("an attempt's spool has no keeper left; removed", "attempt", e.Name(), "reason", err)
			if err := os.RemoveAll(dir); err != nil {
				a.log.Warn("spool not removed", "dir", dir, "err", err)
			}
			continue
		}
		kept[e.Name()] = p
	}
	return kept
}

// endUnclaimed ends the kept attempts no task takes up (its task ended
// meanwhile, or its file is gone): their keepers are left and their
// spools removed, which ends them.
func (a *Agent) endUnclaimed(kept map[string]*proc.Process) {
	ids := make([]string, 0, len(kept))
	for id := range kept {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := kept[id]
		a.log.Warn("an attempt left running belongs to no running task; ended", "attempt", id, "executor_pid", p.Pid())
		p.Leave()
		if err := os.RemoveAll(p.SpoolDir()); err != nil {
			a.log.Warn("spool not removed", "dir", p.SpoolDir(), "err", err)
		}
	}
}
