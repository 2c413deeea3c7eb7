package agent

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// supervised is a task being run, as the other loops see it.
type supervised struct {
	cancel context.CancelCauseFunc
	// ordered is the order that stops the task, once one came (a cancel
	// or a stop): claims list it as running no more.
	ordered      *api.CancelOrder
	phase        state.Phase
	attempt      int
	lastProgress time.Time
	lastActivity time.Time
	liveness     string
	leaseID      string
	// wake ends the task's wait while it is parked: a person continued
	// it early, or raised its budget.
	wake chan runner.WakeOrder
}

// runningTasks is the set of tasks the agent runs, and whether it is
// stopping: what the claimer, the heartbeat, the sink, delivery and
// retention all look at. One lock guards it, so that a task cannot start
// while retention checks and removes it, nor once a stop has begun.
type runningTasks struct {
	mu       sync.Mutex
	tasks    map[string]*supervised
	stopping bool
	// parkedKeepSlots: a parked task keeps its slot (the agent's
	// park_keeps_slot); otherwise it gives it up while it waits.
	parkedKeepSlots bool
	// changed is closed, and replaced, when a task ends or changes
	// phase: what a parked task waiting for a slot waits on.
	changed chan struct{}
}

func newRunningTasks(parkedKeepSlots bool) *runningTasks {
	return &runningTasks{tasks: map[string]*supervised{}, changed: make(chan struct{}), parkedKeepSlots: parkedKeepSlots}
}

// signal wakes those waiting for a change. Under the lock.
func (r *runningTasks) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// holding is how many tasks hold a slot: those that run, and those
// parked when parked tasks keep theirs. Under the lock.
func (r *runningTasks) holding() int {
	n := 0
	for _, s := range r.tasks {
		if r.parkedKeepSlots || s.phase != state.PhaseParked {
			n++
		}
	}
	return n
}

// unpark waits until parked task id may take a slot again under limit
// (at once when parked tasks keep theirs), and counts it as holding one
// from then; an error when ctx ends first.
func (r *runningTasks) unpark(ctx context.Context, id string, limit func() int) error {
	for {
		r.mu.Lock()
		s := r.tasks[id]
		if s == nil || s.phase != state.PhaseParked || r.parkedKeepSlots || r.holding() < limit() {
			if s != nil && s.phase == state.PhaseParked {
				// Holding a slot from now: no claim, nor another parked
				// task, takes it meanwhile.
				s.phase = state.PhaseExecutorStarting
			}
			r.mu.Unlock()
			return nil
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-changed:
		}
	}
}

// wake ends parked task id's wait with o, if it is parked; false when it
// is not.
func (r *runningTasks) wake(id string, o runner.WakeOrder) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.tasks[id]
	if s == nil || s.phase != state.PhaseParked || s.wake == nil {
		return false
	}
	select {
	case s.wake <- o:
	default: // one waits already; the control plane says it again until the task resumes
	}
	return true
}

// start records task id as running, unless the agent is stopping (false).
// onStart runs under the lock when it does (the agent counts the task in
// its wait group there, so that a stop never waits for fewer).
func (r *runningTasks) start(id string, s *supervised, onStart func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return false
	}
	r.tasks[id] = s
	onStart()
	return true
}

// end forgets task id.
func (r *runningTasks) end(id string) {
	r.mu.Lock()
	delete(r.tasks, id)
	r.signal()
	r.mu.Unlock()
}

// stop marks the agent stopping: no task starts any more.
func (r *runningTasks) stop() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
}

// get returns task id's supervision, nil when it does not run.
func (r *runningTasks) get(id string) *supervised {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks[id]
}

// unlessRunning runs fn, with no task starting meanwhile, unless task id
// runs (then it reports false). Retention removes a task so: it cannot
// start between the check and the removal.
func (r *runningTasks) unlessRunning(id string, fn func() (bool, error)) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tasks[id] != nil {
		return false, nil
	}
	return fn()
}

// has reports whether task id runs.
func (r *runningTasks) has(id string) bool { return r.get(id) != nil }

// observe takes a report of task id (a reportObserver): the loops see
// its phase, attempt and last progress.
func (r *runningTasks) observe(id string, rep runner.Report) {
	r.update(id, rep.Task.Phase, rep.Attempt, rep.Task.LastProgressAt)
}

// update changes what the other loops see of task id, if it runs.
func (r *runningTasks) update(id string, phase state.Phase, attempt int, lastProgress time.Time) {
	r.mu.Lock()
	if s := r.tasks[id]; s != nil {
		moved := s.phase != phase
		s.phase, s.attempt, s.lastProgress = phase, attempt, lastProgress
		if moved {
			r.signal()
		}
	}
	r.mu.Unlock()
}

// activity notes that task id's processes were seen at work in silence
// at at (liveness), or that they no longer are ("").
func (r *runningTasks) activity(id string, at time.Time, liveness string) {
	r.mu.Lock()
	if s := r.tasks[id]; s != nil {
		s.lastActivity, s.liveness = at, liveness
	}
	r.mu.Unlock()
}

// count is how many tasks run.
func (r *runningTasks) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tasks)
}

// room is how many more tasks may start under limit, and whether the
// agent is stopping. A parked task holds no slot, unless parked tasks
// keep theirs.
func (r *runningTasks) room(limit int) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return limit - r.holding(), r.stopping
}

// order records that task id was ordered to stop with o, and returns its
// supervision (nil when it does not run) and whether the order is news
// (the first order stands).
func (r *runningTasks) order(id string, o api.CancelOrder) (s *supervised, news bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s = r.tasks[id]
	if s == nil || s.ordered != nil {
		return s, false
	}
	s.ordered = &o
	return s, true
}

// unordered are the running tasks no order stopped yet, sorted: those a
// claim asks the control plane to say when to stop.
func (r *runningTasks) unordered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.tasks))
	for id, s := range r.tasks {
		if s.ordered == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// orderOf is the order that stopped task id, if one did.
func (r *runningTasks) orderOf(id string) *api.CancelOrder {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.tasks[id]; s != nil {
		return s.ordered
	}
	return nil
}

// ids are the running tasks' ids, sorted.
func (r *runningTasks) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.tasks))
	for id := range r.tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// report is what a heartbeat says of them: each task, and the agent's
// state (draining once it stops).
func (r *runningTasks) report() ([]api.RunningTask, api.AgentState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []api.RunningTask{}
	for id, s := range r.tasks {
		out = append(out, api.RunningTask{TaskID: id, Attempt: s.attempt, Phase: s.phase, LastProgressAt: s.lastProgress,
			LastActivityAt: s.lastActivity, Liveness: s.liveness})
	}
	if r.stopping {
		return out, api.AgentDraining // claims nothing, finishes what it runs
	}
	return out, api.AgentRunning
}
