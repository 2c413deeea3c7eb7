package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/state"
)

// An attempt that outlives the agent.
//
// Where the runner has a spool (Runner.SpoolDir) and its executor can
// (Reattacher), an attempt runs under a keeper that owns the executor's
// standard streams and spools its output (proc.Spool): the agent can stop,
// crash or be upgraded while the attempt goes on, and its next life takes
// the attempt up where it was (Runner.Attached), the same executor
// process, no continue, no replay.
//
// What makes that exact is the commit. The runner holds every report of
// such an attempt (Report.Key set) until the executor says where it is: a
// checkpoint (EventCheckpoint), its state at a point where everything it
// read before is reported. The runner then leaves with the keeper, in one
// write, the checkpoint, the task as it stands, its own state and the
// reports held; and only then hands the reports to the sink. An agent
// killed at any moment leaves a keeper whose last commit holds everything
// reported since the one before: the next life sends those reports again
// (the same keys: the control plane drops what it had) and has the
// executor go on from the checkpoint, re-reading what came after it, of
// which nothing had been reported.

// ErrDetach is the cause the daemon cancels a task's context with when it
// stops and its attempts outlive it: an attempt that can (AttemptSpec.
// Spool) is left running, committed, for the agent's next life; any
// other stops as at ErrShutdown.
var ErrDetach = errors.New("agent stopping; the attempt goes on")

// EventCheckpoint is an executor's checkpoint (Event.State): see Spool.
const EventCheckpoint EventType = "checkpoint"

// Reattacher is an executor whose attempts can outlive the agent: given
// AttemptSpec.Spool, it starts its process with Spool.Proc, binds it
// (Spool.Started), and emits a checkpoint when Spool.Wanted asks, before
// it asks a person (Ask), and when it detaches (ctx cancelled with
// ErrDetach: it then emits its last checkpoint, stops reading and returns
// Exit.Detached, the process left running). Given AttemptSpec.Reattach,
// it starts nothing and takes the attempt up from the checkpoint.
//
// A checkpoint's state holds where the executor had read the process's
// output to and what it needs to read on from there (its protocol's
// state); after it, the executor emits only what it reads after that
// point. It is a JSON object whose fields stdout and stderr are those
// offsets in the spool: once it is committed, the keeper drops what is
// before them from the spool files. The runner asks for one whenever it
// holds reports, and at its log flushes while the spool grows, so that
// the spool keeps on disk what is not committed, not the whole output. What it writes to the process's stdin it writes with ids that
// name what caused the write (proc.Process.Input), so that a write
// re-made after a re-attach is dropped.
type Reattacher interface {
	Executor
	// Reattaches reports whether the executor, as configured, keeps its
	// attempts past the agent.
	Reattaches() bool
}

// CanReattach reports whether e keeps its attempts past the agent.
func CanReattach(e Executor) bool {
	r, ok := e.(Reattacher)
	return ok && r.Reattaches()
}

// Spool is an attempt's spool, as the executor sees it.
type Spool struct {
	// Dir is the attempt's spool directory; Reattach how long the attempt
	// goes on once the agent has gone.
	Dir      string
	Reattach time.Duration

	want chan struct{}
	mu   sync.Mutex
	p    *proc.Process
}

func newSpool(dir string, grace time.Duration) *Spool {
	return &Spool{Dir: dir, Reattach: grace, want: make(chan struct{}, 1)}
}

// Proc is the spool for proc.Spec.
func (s *Spool) Proc() *proc.Spool { return &proc.Spool{Dir: s.Dir, Reattach: s.Reattach} }

// Started tells the runner the attempt's process, once started (or
// attached to).
func (s *Spool) Started(p *proc.Process) {
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
}

// Wanted delivers a value when the runner wants a checkpoint.
func (s *Spool) Wanted() <-chan struct{} { return s.want }

// ask asks the executor for a checkpoint.
func (s *Spool) ask() {
	select {
	case s.want <- struct{}{}:
	default:
	}
}

func (s *Spool) process() *proc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Reattach is an attempt a previous life of the agent left running, taken
// up again.
type Reattach struct {
	// Process is the attempt's process, attached to.
	Process *proc.Process
	// State is the executor's last checkpoint; nil when none was
	// committed: the executor takes the attempt up from its start, nothing
	// it said having been reported.
	State json.RawMessage
}

// commitBlob is what a commit leaves with the keeper.
type commitBlob struct {
	V int `json:"v"`
	// Executor is the executor's checkpoint.
	Executor json.RawMessage `json:"executor,omitempty"`
	// Task is the task as the reports below leave it.
	Task json.RawMessage `json:"task"`
	// Runner is the runner's state of the attempt.
	Runner runnerState `json:"runner"`
	// Reports are those made since the commit before; Keys how many
	// reports of the attempt were keyed, these included.
	Reports []committedReport `json:"reports,omitempty"`
	Keys    int               `json:"keys"`
	// Ended: the attempt's end is recorded (its reports above); the
	// agent that finds it only sends them and releases the keeper.
	Ended bool `json:"ended,omitempty"`
}

// runnerState is what the runner knows of a running attempt besides the
// task: what the executor said that only the attempt's end uses, and the
// answers given to its questions.
type runnerState struct {
	Result   *Event              `json:"result,omitempty"`
	LastErr  *Event              `json:"last_error,omitempty"`
	Over     string              `json:"over,omitempty"`
	Answered map[string]Approval `json:"answered,omitempty"`
}

// committedReport is a report as a commit holds it.
type committedReport struct {
	Key     string          `json:"key"`
	Attempt int             `json:"attempt"`
	At      time.Time       `json:"at"`
	Kind    state.EventKind `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

// decodePayload reads a payload of kind.
func decodePayload(kind state.EventKind, raw json.RawMessage) (state.Payload, error) {
	var (
		p   state.Payload
		err error
	)
	switch kind {
	case state.EventPhase:
		var v state.PhaseEvent
		err = json.Unmarshal(raw, &v)
		p = v
	case state.EventProgress:
		var v state.ProgressEvent
		err = json.Unmarshal(raw, &v)
		p = v
	case state.EventLog:
		var v state.LogEvent
		err = json.Unmarshal(raw, &v)
		p = v
	case state.EventAttempt:
		var v state.Attempt
		err = json.Unmarshal(raw, &v)
		p = v
	case state.EventComplete:
		var v state.CompleteEvent
		err = json.Unmarshal(raw, &v)
		p = v
	case state.EventDiff:
		var v state.DiffEvent
		err = json.Unmarshal(raw, &v)
		p = v
	case state.EventPush:
		var v state.PushEvent
		err = json.Unmarshal(raw, &v)
		p = v
	default:
		return nil, fmt.Errorf("a report of kind %q", kind)
	}
	return p, err
}

// journal holds a spooled attempt's reports until a commit.
type journal struct {
	spool     *Spool
	taskID    string
	attemptID string
	keys      int
	pending   []Report
	last      json.RawMessage // the executor's last checkpoint
	sizeAsked int64           // the spool's size when growing last asked
	mu        sync.Mutex      // answered is read by the asker
	answered  map[string]Approval
}

func newJournal(sp *Spool, taskID, attemptID string) *journal {
	return &journal{spool: sp, taskID: taskID, attemptID: attemptID, answered: map[string]Approval{}}
}

// spoolCommitEvery is how often the runner looks whether a spooled
// attempt's output has grown, and asks for a checkpoint when it has: its
// keeper holds a window of output past the last commit (2 MiB a stream),
// so a flood goes through at a window per look at most.
const spoolCommitEvery = 50 * time.Millisecond

// growing asks for a checkpoint when the spool has grown since the last
// time it asked: output the executor reads and reports nothing of (past
// the output cap, say) is committed too, and dropped from the spool.
func (j *journal) growing() {
	p := j.spool.process()
	if p == nil {
		return
	}
	if size := p.SpoolSize(); size != j.sizeAsked {
		j.sizeAsked = size
		j.spool.ask()
	}
}

// hold keeps rep, keyed, for the next commit, and asks for one.
func (j *journal) hold(rep Report) {
	j.keys++
	rep.Key = fmt.Sprintf("%s:%s:%d", j.taskID, j.attemptID, j.keys)
	j.pending = append(j.pending, rep)
	j.spool.ask()
}

// answer is the answer recorded to question id, if it was answered.
func (j *journal) answer(id string) (Approval, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	a, ok := j.answered[id]
	return a, ok
}

func (j *journal) setAnswer(id string, a Approval) {
	j.mu.Lock()
	j.answered[id] = a
	j.mu.Unlock()
}

// commit leaves the task, the runner's state and the reports held with
// the keeper, with the executor's checkpoint (nil: the last one), then
// hands the reports to the sink.
func (r *Runner) commit(task *state.Task, checkpoint json.RawMessage, rs runnerState, ended bool) {
	j := r.journal
	if checkpoint != nil {
		j.last = checkpoint
	}
	blob := commitBlob{V: 1, Executor: j.last, Runner: rs, Keys: j.keys, Ended: ended}
	j.mu.Lock()
	if len(j.answered) > 0 {
		blob.Runner.Answered = make(map[string]Approval, len(j.answered))
		for k, v := range j.answered {
			blob.Runner.Answered[k] = v
		}
	}
	j.mu.Unlock()
	var err error
	if blob.Task, err = json.Marshal(task); err == nil {
		for _, rep := range j.pending {
			var raw []byte
			if raw, err = json.Marshal(rep.Payload); err != nil {
				break
			}
			blob.Reports = append(blob.Reports, committedReport{Key: rep.Key, Attempt: rep.Attempt, At: rep.At, Kind: rep.Kind(), Payload: raw})
		}
	}
	if err == nil {
		var raw []byte
		if raw, err = json.Marshal(blob); err == nil {
			if p := j.spool.process(); p == nil {
				err = errors.New("no process")
			} else if read, ok := checkpointRead(j.last); ok {
				err = p.CommitRead(raw, read.Stdout, read.Stderr)
			} else {
				err = p.Commit(raw)
			}
		}
	}
	if err != nil {
		// The reports still go: an agent killed before the next commit
		// would send these again, which the control plane drops.
		r.logger().Warn("the attempt's commit was not left with its keeper", "task", task.ID, "err", err)
	}
	for _, rep := range j.pending {
		rep.Task = task
		r.Sink.Report(rep)
	}
	j.pending = nil
}

// checkpointRead is how far a checkpoint says its executor had read the
// spool: its stdout and stderr fields (see Reattacher); false when it
// does not say.
func checkpointRead(checkpoint json.RawMessage) (read struct{ Stdout, Stderr int64 }, ok bool) {
	var at struct {
		Stdout *int64 `json:"stdout"`
		Stderr *int64 `json:"stderr"`
	}
	if checkpoint == nil || json.Unmarshal(checkpoint, &at) != nil || at.Stdout == nil || at.Stderr == nil {
		return read, false
	}
	read.Stdout, read.Stderr = *at.Stdout, *at.Stderr
	return read, true
}

// restore takes up task's attempt from the last commit its keeper holds
// (Runner.Attached): the task as committed, the reports committed sent
// again. It returns the attempt to go on with and the runner's state of
// it; done when the task needs nothing more (its attempt had ended, and
// so had the task). An ended attempt's keeper is released; its next
// attempt, if the task has one, is the one returned.
func (r *Runner) restore(task *state.Task) (a *state.Attempt, rs *runnerState, done bool, err error) {
	p := r.Attached
	attemptID := filepath.Base(p.SpoolDir())
	var blob commitBlob
	if raw := p.LastCommit(); raw != nil {
		if err := json.Unmarshal(raw, &blob); err != nil {
			return nil, nil, false, fmt.Errorf("task %s: the commit its keeper holds: %w", task.ID, err)
		}
	}
	if blob.Task != nil {
		var t state.Task
		if err := json.Unmarshal(blob.Task, &t); err != nil || t.ID != task.ID {
			return nil, nil, false, fmt.Errorf("task %s: the commit its keeper holds is not of this task (%s): %v", task.ID, t.ID, err)
		}
		*task = t
	}
	a = task.Attempt(attemptID)
	if a == nil || !blob.Ended && (a != task.Current() || a.Status != state.AttemptRunning) {
		return nil, nil, false, fmt.Errorf("task %s: its keeper keeps attempt %s, which the task does not run", task.ID, attemptID)
	}
	sp := newSpool(p.SpoolDir(), r.ReattachGrace)
	sp.Started(p)
	r.journal = newJournal(sp, task.ID, a.AttemptID)
	r.journal.keys, r.journal.last = blob.Keys, blob.Executor
	for k, v := range blob.Runner.Answered {
		r.journal.answered[k] = v
	}
	for _, c := range blob.Reports {
		payload, err := decodePayload(c.Kind, c.Payload)
		if err != nil {
			r.logger().Error("a committed report cannot be read; not sent again", "task", task.ID, "key", c.Key, "err", err)
			continue
		}
		r.Sink.Report(Report{Attempt: c.Attempt, At: c.At, Payload: payload, Task: task, Key: c.Key, Restored: true})
	}
	if len(blob.Reports) > 0 && !blob.Ended {
		// Handed to the sink again: the keeper need not hold them any
		// more, or an agent killed again before the attempt's next commit
		// would send them once more for every kill.
		r.commit(task, nil, blob.Runner, false)
	}
	if blob.Ended {
		r.Attached = nil
		r.release()
		if task.Phase.Terminal() {
			return nil, nil, true, nil
		}
		if c := task.Current(); c != nil && c.Status == state.AttemptPending {
			return c, nil, false, nil
		}
		return nil, nil, false, fmt.Errorf("task %s: attempt %s ended, and the task neither ended nor has an attempt to run", task.ID, attemptID)
	}
	return a, &blob.Runner, false, nil
}

// endJournal records a spooled attempt's end: the last commit, then the
// keeper released and the spool removed.
func (r *Runner) endJournal(task *state.Task) {
	if r.journal == nil {
		return
	}
	r.commit(task, nil, runnerState{}, true)
	r.release()
}

// release lets the keeper go and removes the spool.
func (r *Runner) release() {
	j := r.journal
	r.journal = nil
	if p := j.spool.process(); p != nil {
		p.Release()
	}
	if err := os.RemoveAll(j.spool.Dir); err != nil {
		r.logger().Warn("spool not removed", "dir", j.spool.Dir, "err", err)
	}
}

// leave leaves a detached attempt's keeper, unreleased, to the agent's
// next life.
func (r *Runner) leave() {
	j := r.journal
	r.journal = nil
	if p := j.spool.process(); p != nil {
		p.Leave()
	}
}
