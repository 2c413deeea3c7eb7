package runner

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/internal/utc"
	"github.com/edgeagent/agent/state"
)

// Causes the daemon cancels a task's context with (context.WithCancelCause),
// with *Cancel and *BudgetStop. Any other cause is taken as a shutdown.
var (
	ErrCancelled = errors.New("cancelled by the user")
	ErrShutdown  = errors.New("agent shutting down")
)

// Cancel is a cancel that says who ended the task and why (Reason), and
// the phase it ends in: cancelled when Phase is empty or cancelled, or
// the terminal phase the control plane already has the task in (its
// watchdog timed it out), so that the agent's view agrees with the
// control plane's. It is an ErrCancelled.
type Cancel struct {
	Phase  state.Phase
	Reason string
}

func (c *Cancel) Error() string { return c.Reason }

// Is makes a Cancel an ErrCancelled.
func (c *Cancel) Is(target error) bool { return target == ErrCancelled }

// BudgetStop is the cause the daemon cancels a task's context with when
// the control plane stops the task as over a budget the agent does not
// see: its tree of subtasks passed its root's (docs/subtasks.md). The
// attempt is stopped as a cancel stops it, and ends budget_exceeded,
// Reason its message, never retried.
type BudgetStop struct{ Reason string }

func (b *BudgetStop) Error() string { return "budget exceeded: " + b.Reason }

// budgetStopOf is the budget stop that cancelled ctx, nil when none did.
func budgetStopOf(ctx context.Context) *BudgetStop {
	var b *BudgetStop
	if errors.As(context.Cause(ctx), &b) {
		return b
	}
	return nil
}

// Causes of an attempt's own timeouts.
var (
	errFirstEventTimeout = errors.New("first event timeout")
	errAttemptTimeout    = errors.New("attempt timeout")
)

// Report is one thing the runner tells the sink: a phase, progress, log,
// attempt or completion event of a task.
type Report struct {
	Attempt int
	At      time.Time
	// Payload is the event: a state.PhaseEvent, state.ProgressEvent,
	// state.LogEvent, state.Attempt or state.CompleteEvent.
	Payload state.Payload
	// Task is the task after the change. It is valid only during the call:
	// the runner goes on changing it afterwards.
	Task *state.Task
	// Key, when set, is the idempotency key the report goes out under:
	// the reports of an attempt that outlives the agent (see Spool),
	// which a later life of the agent may send again.
	Key string
	// Restored: the report is sent again by a later life of the agent,
	// from its commit (see Spool); it was made before.
	Restored bool
}

// Kind is the kind of event the report carries.
func (r Report) Kind() state.EventKind { return r.Payload.EventKind() }

// Sink receives reports, in order, from the runner's goroutine.
type Sink interface {
	Report(r Report)
}

// Runner runs tasks through their attempts. Executor and Sink are
// required; other zero fields take defaults.
type Runner struct {
	Executor Executor
	Sink     Sink
	Health   *health.Tracker // optional
	Policy   Policy
	Timeouts Timeouts
	// Models is the fallback chain: attempt N uses the N-th, the last
	// repeating.
	Models []string
	Logger *slog.Logger
	// LogFlush is how long log lines may wait to be batched. Default 250 ms.
	LogFlush time.Duration
	Now      func() time.Time
	// NewID makes attempt ids. Default: random.
	NewID func() string
	// Owner names whose attempts these are (the agent's id) in the mark
	// every attempt process carries; see proc.MarkEnv and proc.SweepOwner.
	Owner string
	// WorkRoot, if set, gives each task a work directory of its own,
	// WorkRoot/TASK_ID, kept after the task for inspection.
	WorkRoot string
	// Replies, if set, carries approval requests to a person and brings
	// the answers back (the approval policy ask).
	Replies Replies
	// ApprovalTimeout bounds the wait for a person's answer; then the
	// request is declined, the model told so, and the task records it
	// (Task.ApprovalExpired, a denied call). Zero is
	// DefaultApprovalTimeout; negative waits for ever. The time spent
	// waiting does not count against the attempt's limit.
	ApprovalTimeout time.Duration
	// Isolation, if set, confines every attempt (see Isolation).
	Isolation *Isolation
	// Egress, if set, confines where every attempt connects (see Egress).
	Egress *Egress
	// TaskUser, if set, is who every attempt runs as (a root agent's
	// --task-user); its directories become the user's.
	TaskUser *TaskUser
	// Workspaces, if set, gives each task that names a repository a
	// workspace of its own, its work directory.
	Workspaces Workspaces
	// Deliver, if set, is called with what a task that completed changed
	// in its workspace, before the completion is reported: it pushes the
	// task's branch and opens its pull request as the repository's
	// config asks, and says so in ch's push fields.
	Deliver func(ctx context.Context, task *state.Task, ch *state.Changes)
	// Subtasks: Env are NAME=VALUE variables every attempt's executor gets
	// (AttemptSpec.TaskEnv): the task token, the control plane's address,
	// the agent binary for `agent subtask`. Never logged.
	Env []string
	// Withhold names variables of the agent's environment no attempt's
	// executor gets (AttemptSpec.Withhold).
	Withhold []string
	// Budget is the budget of a task that sets none of its own (each
	// bound a task sets wins; see BudgetOf). Zero: none.
	Budget Budget
	// Starts, if set, bounds how many attempts start at once, across
	// every runner that shares it (see Starts).
	Starts *Starts
	// Unpark, if set, is called when a parked task's wait ends, before
	// it resumes: the agent waits there for a slot (a parked task gives
	// its slot up, unless told to keep it). It returns an error only when
	// ctx ends first.
	Unpark func(ctx context.Context) error
	// Wake, if set, ends a parked task's wait at once when it receives: a
	// person continued the task early, or raised its budget (the order
	// says its new bounds).
	Wake <-chan WakeOrder
	// Liveness is how often an attempt's processes are looked at (their
	// CPU time and I/O: proc.MarkActivity) to tell one at work in silence
	// from a hung one. Zero is DefaultLiveness; negative never looks.
	Liveness time.Duration
	// OnActivity, if set, is told, from the runner's goroutine, each time
	// the task's liveness changes or its processes are seen at work in
	// silence: the agent's heartbeat says it to the control plane.
	OnActivity func(at time.Time, liveness string)
	// OnBudget is what follows an attempt that reached its task's budget:
	// park (the default: a person raises it and the session continues)
	// or fail (budget_exceeded, for good).
	OnBudget state.OnBudget
	// SpoolDir, if set, has the attempts of an executor that can
	// (Reattacher) outlive the agent, for ReattachGrace once it has gone:
	// each spooled in SpoolDir/ATTEMPT_ID (see Spool).
	SpoolDir      string
	ReattachGrace time.Duration
	// Attached, if set, is the keeper of the task's current attempt that
	// a previous life of the agent left running: Run takes the attempt up
	// from the last commit it holds, rather than anything else.
	Attached *proc.Process

	journal *journal // the running attempt's, when it is spooled
}

// WakeOrder ends a parked task's wait: a person continued it, or raised
// its budget to MaxTokens and MaxTime (zero: that bound unchanged).
type WakeOrder struct {
	MaxTokens int64
	MaxTime   time.Duration
}

// DefaultLiveness is how often an attempt's processes are looked at by
// default.
const DefaultLiveness = 10 * time.Second

// MaxParkWait bounds how long a task parks: a limit said to reset later
// is waited for this long.
const MaxParkWait = 8 * 24 * time.Hour

// Workspaces gives a task that names a repository a workspace of its own
// (see package workspace).
type Workspaces interface {
	// Prepare makes the task's workspace from base, or finds it made, and
	// returns its directory, what a confined attempt must also write
	// (nothing of the repository: see workspace.Workspace.Writable) and
	// what the person's checkout held then that the task does not see.
	Prepare(ctx context.Context, taskID, repo, base string) (Prepared, error)
	// Reset takes the workspace back to its base, for a replay, having
	// kept what the attempt numbered attempt left on a ref of the
	// repository of its own, which it returns ("" when it left nothing).
	Reset(ctx context.Context, taskID string, attempt int) (kept string, err error)
	// Commit commits what an attempt left in the workspace on the task's
	// branch, with message, and returns the commit ("" when there was
	// nothing to commit, or the task has no workspace). The runner calls
	// it at the end of each attempt, when nothing of the attempt runs
	// any more, unless the task says not to (state.Task.NoCommit).
	Commit(ctx context.Context, taskID, message string) (string, error)
	// BringBack brings what the task's branch holds back to its
	// repository; the runner calls it at the end of each attempt, after
	// Commit. A task with no workspace (it was not made) has nothing to
	// bring back: no error.
	BringBack(ctx context.Context, taskID string) error
	// Diff is the diff of the task's work against its base, which the
	// runner reports at the end of each attempt; nil for a task with no
	// workspace.
	Diff(ctx context.Context, taskID string) (*state.DiffEvent, error)
	// Changes says what the task changed in its workspace.
	Changes(ctx context.Context, taskID string) (*state.Changes, error)
}

// Prepared is a task's workspace as Workspaces.Prepare makes or finds it.
type Prepared struct {
	// Dir is its directory, the attempt's work directory; Writable what
	// a confined attempt must also write.
	Dir      string
	Writable []string
	// Checkout, when the person's checkout of the repository held
	// changes no commit holds as the workspace was made (or could not be
	// read), says so; nil when it was clean.
	Checkout *state.Checkout
}

// changesTimeout bounds the report of what a task changed, and
// workspaceTimeout the making of its workspace.
const (
	changesTimeout   = 30 * time.Second
	workspaceTimeout = 10 * time.Minute
)

// SessionDirName is the directory of the work root that holds each task's
// session directory (AttemptSpec.SessionDir).
const SessionDirName = ".sessions"

// Replies asks a person: Await returns the answer to a request the runner
// reported (a phase awaiting_reply carrying it), or an error when ctx ends
// first.
type Replies interface {
	Await(ctx context.Context, taskID string, req state.ApprovalRequest) (Approval, error)
}

// DefaultApprovalTimeout is how long a person has to answer an approval
// request by default.
const DefaultApprovalTimeout = time.Hour

// approvalTimeout is the configured approval timeout; 0 for none.
func (r *Runner) approvalTimeout() time.Duration {
	switch {
	case r.ApprovalTimeout == 0:
		return DefaultApprovalTimeout
	case r.ApprovalTimeout < 0:
		return 0
	}
	return r.ApprovalTimeout
}

// DefaultKillGrace is how long each step of stopping an attempt waits (an
// interrupt, SIGTERM, SIGKILL) unless an executor's Grace says otherwise.
const DefaultKillGrace = 5 * time.Second

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return utc.Now()
}

func (r *Runner) newID() string {
	if r.NewID != nil {
		return r.NewID()
	}
	b := make([]byte, 6)
	rand.Read(b)
	return "att-" + hex.EncodeToString(b)
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Run runs task to a terminal phase. The task must be claimed with no
// attempt yet, claimed again after a person's retry, or hold a pending
// retry (as reconciliation after a crash leaves it). Cancel ctx with ErrCancelled to cancel the task, or with
// ErrShutdown when the agent stops; Run then stops the executor and ends
// the task. It returns an error only when the task is not in a state it can
// run.
func (r *Runner) Run(ctx context.Context, task *state.Task) error {
	var (
		a        *state.Attempt
		attached *runnerState
	)
	if p := r.Attached; p != nil {
		var (
			done bool
			err  error
		)
		if a, attached, done, err = r.restore(task); done {
			return nil
		}
		if err != nil {
			r.logger().Error("the attempt left running cannot be taken up: it is ended, and the task taken up as after a crash", "err", err)
			r.Attached, r.journal = nil, nil
			p.Leave()
			_ = os.RemoveAll(p.SpoolDir())
			if !r.Recover(task) {
				return nil
			}
		}
	}
	switch c := task.Current(); {
	case a != nil:
	case c == nil:
		var err error
		if a, err = task.StartFirstAttempt(r.newID(), r.Models, r.now()); err != nil {
			return err
		}
		a.MaxAttempts = r.limitOf(task, a)
		r.reportPhase(task)
		r.reportAttempt(task, a)
	case c.Status == state.AttemptPending:
		a = c
	case task.PersonRetryDue():
		// A person retried the task after it ended recoverable_failed:
		// their decision overrides the one that stopped it.
		var err error
		if a, err = task.StartPersonRetry(r.newID(), r.Models, r.now()); err != nil {
			return err
		}
		a.MaxAttempts = r.limitOf(task, a)
		r.reportPhase(task)
		r.reportAttempt(task, a)
	default:
		return fmt.Errorf("task %s: attempt %d is %s, not one the runner can take up", task.ID, c.Number, c.Status)
	}
	for {
		if a.Status == state.AttemptPending {
			if !r.waitParked(ctx, task, a) {
				if !errors.Is(context.Cause(ctx), ErrCancelled) && budgetStopOf(ctx) == nil {
					// The agent is stopping: the attempt waits, recorded,
					// for its next run (see Recover).
					return nil
				}
				r.stop(ctx, task, a, Exit{}, nil)
				return nil
			}
			if err := task.BeginAttempt(a.AttemptID, r.now()); err != nil {
				return err
			}
			r.reportAttempt(task, a)
		}
		res := r.execute(ctx, task, a, attached)
		attached = nil
		if res.exit.Detached {
			// The attempt goes on without this life of the agent.
			r.leave()
			return nil
		}
		r.settle(task, a, &res)
		if res.ok() {
			r.complete(task, a, res)
			r.endJournal(task)
			return nil
		}
		next := r.stop(ctx, task, a, res.exit, &res)
		r.endJournal(task)
		if next == nil {
			return nil
		}
		a = next
	}
}

// waitParked waits for pending attempt a's start (its NotBefore), or
// until ctx is done (false). A parked task's wait also ends when a person
// wakes it (Wake); it then waits for a slot (Unpark) and moves on to
// executor_starting, saying that it resumed.
func (r *Runner) waitParked(ctx context.Context, task *state.Task, a *state.Attempt) bool {
	parked := task.Phase == state.PhaseParked
	if !parked {
		return r.wait(ctx, a.NotBefore, nil)
	}
	how := "the limit reset"
	if task.Parked != nil && task.Parked.Reason == state.ParkBudget {
		// Nothing but a person's raise ends this wait.
		if !r.waitBudget(ctx, task, a) {
			return false
		}
		how = "a person raised its budget to " + state.BudgetText(BudgetOf(task, r.Budget).MaxTokens, BudgetOf(task, r.Budget).MaxTime)
	} else if !r.waitOrWake(ctx, a.NotBefore) {
		if ctx.Err() != nil {
			return false
		}
		how = "a person continued it early"
	}
	if r.Unpark != nil {
		if err := r.Unpark(ctx); err != nil {
			return false
		}
	}
	if err := task.Transition(state.PhaseExecutorStarting, fmt.Sprintf("resumed: %s; attempt %s continues", how, a.NumberText()), r.now()); err != nil {
		r.logger().Error("resume a parked task", "task", task.ID, "err", err)
		return false
	}
	r.reportPhase(task)
	return true
}

// waitOrWake waits until t (true), a person's wake, or the end of ctx.
func (r *Runner) waitOrWake(ctx context.Context, t time.Time) bool {
	wake := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-r.Wake:
			close(wake)
		case <-stop:
		}
	}()
	return r.wait(ctx, t, wake)
}

// waitBudget waits for a person to raise the budget of task, parked at
// it, so that attempt a has some left: each raise is applied to the task
// (its own bounds, which win over the agent's default); false when ctx
// ends first.
func (r *Runner) waitBudget(ctx context.Context, task *state.Task, a *state.Attempt) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case o := <-r.Wake:
			if o.MaxTokens > 0 {
				task.MaxTokens = o.MaxTokens
			}
			if o.MaxTime > 0 {
				task.MaxTime = state.Duration(o.MaxTime)
			}
			b := BudgetOf(task, r.Budget)
			if why := b.left(spentBefore(task, a)); why != "" {
				r.note(task, "the budget raised to "+state.BudgetText(b.MaxTokens, b.MaxTime)+" is still spent: "+why+"; the task stays parked")
				continue
			}
			return true
		}
	}
}

// wait sleeps until t, or until ctx is done or wake is closed (false).
func (r *Runner) wait(ctx context.Context, t time.Time, wake <-chan struct{}) bool {
	d := t.Sub(r.now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return false
	case <-timer.C:
		return true
	}
}

// result is what one attempt's run came to.
type result struct {
	exit     Exit
	timeout  timeoutKind // the agent's own limit that fired, if one did
	cause    error       // the task context's cause, when it was cancelled
	lastErr  *Event
	result   *Event
	timeouts string // the limits that applied, for the attempt record
	// budget is the task's budget, spent what the attempts before this
	// one spent, and over how this one passed it, if it did.
	budget Budget
	spent  state.TaskUsage
	over   string
}

func (res *result) ok() bool {
	if res.exit.StartErr != nil || res.timeout != timeoutNone || res.cause != nil || res.exit.StdioClosed || res.exit.ProtocolErr != nil || res.over != "" {
		return false
	}
	switch res.exit.Turn {
	case TurnCompleted:
		return true
	case TurnFailed:
		return false
	}
	return res.exit.ExitCode == 0 && res.exit.Signal == ""
}

// execute runs attempt a through the executor, applying its events.
func (r *Runner) execute(ctx context.Context, task *state.Task, a *state.Attempt, attached *runnerState) result {
	// An attempt taken up again (Attached) starts nothing: its executor
	// goes on from its last checkpoint.
	reattached := r.Attached
	r.Attached = nil
	firstEvent, limit := r.Timeouts.For(a.Number)
	res := result{timeouts: fmt.Sprintf("first_event=%s attempt=%s", firstEvent, limit), budget: BudgetOf(task, r.Budget), spent: spentBefore(task, a)}
	// A start first (--max-starts): the attempt's limits, and its
	// duration, count from when it has one.
	waited := false
	started, err := r.Starts.wait(ctx, func(f StartFigures) {
		waited = true
		r.note(task, fmt.Sprintf("attempt %s waits to start: %d attempts are starting (--max-starts %d), %d in the queue", a.NumberText(), f.Starting, f.Max, f.Queued))
	})
	if err != nil {
		res.exit, res.cause = Exit{ExitCode: -1}, context.Cause(ctx)
		return res
	}
	defer started()
	if waited {
		a.StartedAt = r.now()
		r.reportAttempt(task, a)
	}
	// The wall-time budget caps the attempt's limit: what is left of it
	// ends the attempt budget_exceeded, not timed out.
	limitCause := errAttemptTimeout
	if left, ok := res.budget.timeLeft(res.spent); ok {
		res.timeouts += " budget_left=" + left.Round(time.Millisecond).String()
		if left < limit {
			limit, limitCause = left, errBudget
		}
	}
	if reattached != nil && !a.StartedAt.IsZero() {
		// Its limit counts from its start, in the agent's last life.
		limit = max(limit-r.now().Sub(a.StartedAt), 0)
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	firstTimer := time.AfterFunc(firstEvent, func() { cancel(errFirstEventTimeout) })
	if reattached != nil && !a.Facts.FirstEventAt.IsZero() {
		firstTimer.Stop()
	}
	defer firstTimer.Stop()
	limitTimer := time.AfterFunc(limit, func() { cancel(limitCause) })
	defer limitTimer.Stop()
	// The time a person takes to answer does not count against the
	// attempt's limit: it stops while a question waits.
	limitAt, limitLeft, waiting := time.Now().Add(limit), time.Duration(0), 0

	asks, loopDone := make(chan askNote), make(chan struct{})
	defer close(loopDone)
	spec := AttemptSpec{AttemptID: a.AttemptID, Task: TaskInput{ID: task.ID, Title: task.Title, Prompt: task.Prompt,
		Attempt: a.Number, AttemptID: a.AttemptID, Model: a.Model},
		Mark: proc.NewMark(r.Owner, a.AttemptID), FirstEventLimit: firstEvent, TaskEnv: r.Env, Withhold: r.Withhold,
		ApprovalTimeout: r.approvalTimeout()}
	if reattached != nil {
		spec.Mark = reattached.Mark()
		if attached != nil {
			res.result, res.lastErr, res.over = attached.Result, attached.LastErr, attached.Over
		}
	}
	// refuse ends the attempt before its executor starts, with an error
	// of code c.
	refuse := func(c state.ErrorCode, err error) result {
		res.lastErr = &Event{Type: EventError, Code: c, Message: err.Error()}
		res.exit = Exit{ExitCode: -1, Turn: TurnFailed}
		if ctx.Err() != nil {
			res.cause = context.Cause(ctx) // stopped meanwhile: a stop, not this failure
		}
		return res
	}
	if why := res.budget.left(res.spent); why != "" && reattached == nil {
		return refuse(state.CodeBudgetExceeded, errors.New(why))
	}
	if a.Continues > 0 && reattached == nil {
		resume, err := r.resumeOf(task, a)
		if err != nil {
			return refuse(state.CodeSessionLost, err)
		}
		spec.Resume = resume
	}
	var writable []string
	switch {
	case task.Repo != "":
		dir, w, err := r.workspace(ctx, task, a, reattached == nil)
		if err != nil {
			return refuse(state.CodeWorkspace, err)
		}
		spec.WorkDir, writable = dir, w
	case r.WorkRoot != "":
		spec.WorkDir = filepath.Join(r.WorkRoot, task.ID)
		if err := os.MkdirAll(spec.WorkDir, 0o700); err != nil {
			res.exit = Exit{StartErr: fmt.Errorf("work directory: %w", err), ExitCode: -1}
			return res
		}
	}
	if r.WorkRoot != "" {
		// Absolute: the executor runs in its work directory, so a path
		// relative to the agent's (agent run --data-dir ./agent-data) would
		// lead nowhere, and its session, nothing to continue, be lost.
		dir, err := filepath.Abs(filepath.Join(r.WorkRoot, SessionDirName, task.ID))
		if err == nil {
			spec.SessionDir = dir
			err = os.MkdirAll(dir, 0o700)
		}
		if err != nil {
			res.exit = Exit{StartErr: fmt.Errorf("session directory: %w", err), ExitCode: -1}
			return res
		}
	}
	if r.Isolation != nil {
		tmp, err := attemptTempDir(r.WorkRoot, a.AttemptID)
		if err != nil {
			res.exit = Exit{StartErr: err, ExitCode: -1}
			return res
		}
		// Every process of the attempt is gone when Run returns (its
		// keeper saw to it): nothing writes here any more. But for an
		// attempt that goes on without this life of the agent.
		defer func() {
			if !res.exit.Detached {
				os.RemoveAll(tmp)
			}
		}()
		serve, err := attemptServeDir(r.WorkRoot, a.AttemptID, r.TaskUser)
		if err != nil {
			res.exit = Exit{StartErr: err, ExitCode: -1}
			return res
		}
		defer func() {
			if !res.exit.Detached {
				os.RemoveAll(serve)
			}
		}()
		spec.TempDir, spec.ServeDir = tmp, serve
		r.Isolation.confine(&spec, r.WorkRoot, spec.WorkDir, tmp, spec.SessionDir)
		spec.Confine.Write = append(spec.Confine.Write, writable...)
	}
	if r.Egress != nil {
		spec.Egress = r.Egress.policyFor(task)
	}
	if r.TaskUser != nil {
		if err := r.TaskUser.own(spec.WorkDir, spec.TempDir, spec.SessionDir); err != nil {
			res.exit = Exit{StartErr: err, ExitCode: -1}
			return res
		}
		spec.TaskUser = r.TaskUser
	}
	switch {
	case reattached != nil:
		spec.Spool, spec.Reattach = r.journal.spool, &Reattach{Process: reattached, State: r.journal.last}
	case r.SpoolDir != "" && r.ReattachGrace > 0 && CanReattach(r.Executor):
		dir := filepath.Join(r.SpoolDir, a.AttemptID)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			res.exit = Exit{StartErr: fmt.Errorf("spool directory: %w", err), ExitCode: -1}
			return res
		}
		// From here on every report waits for a commit.
		spec.Spool = newSpool(dir, r.ReattachGrace)
		r.journal = newJournal(spec.Spool, task.ID, a.AttemptID)
		spec.Spool.ask() // the first, as soon as the executor runs
	}
	spec.Ask = r.asker(task.ID, asks, loopDone, r.journal)
	events := make(chan Event)
	done := make(chan Exit, 1)
	go func() { done <- r.Executor.Run(actx, spec, func(ev Event) { events <- ev }) }()

	flushEvery := r.LogFlush
	if flushEvery <= 0 {
		flushEvery = 250 * time.Millisecond
	}
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	// A spooled attempt's output is committed as it grows, so that its
	// keeper drops it from the spool and reads on (see Reattacher).
	var spoolTick <-chan time.Time
	if r.journal != nil {
		t := time.NewTicker(spoolCommitEvery)
		defer t.Stop()
		spoolTick = t.C
	}
	logs := &logBatch{r: r, task: task}
	live := r.liveness(task, spec.ProcessMark())
	defer live.stop()
	for {
		select {
		case <-live.tick:
			live.look(r.now())
		case ev := <-events:
			live.heard(r.now())
			if ev.Type == EventCheckpoint {
				if r.journal != nil {
					logs.flush()
					r.commit(task, ev.State, runnerState{Result: res.result, LastErr: res.lastErr, Over: res.over}, false)
				}
				continue
			}
			if countsAsFirstEvent(ev) {
				firstTimer.Stop()
				started() // the executor is at work: the next may start
			}
			r.apply(task, a, ev, logs, &res)
			if res.over != "" && actx.Err() == nil {
				// Stopped as a cancel stops it: the executor's own
				// interrupt, then the kill grace.
				r.logger().Info("stopping an attempt over its task's budget", "attempt", a.Number, "over", res.over)
				cancel(errBudget)
			}
		case n := <-asks:
			if n.answer == nil {
				firstTimer.Stop() // a question is the executor at work, whoever answers it
				started()
				if waiting++; waiting == 1 && limitTimer.Stop() {
					limitLeft = time.Until(limitAt)
				}
				n.done <- r.asked(task, n.req, logs)
				continue
			}
			r.answered(task, a, n.req, *n.answer, logs)
			if waiting--; waiting == 0 && limitLeft > 0 {
				limitAt = time.Now().Add(limitLeft)
				limitTimer.Reset(limitLeft)
				limitLeft = 0
			}
			n.done <- n.req
		case <-tick.C:
			logs.flush()
		case <-spoolTick:
			r.journal.growing()
		case res.exit = <-done:
			if res.exit.Detached {
				return res // its last checkpoint is committed
			}
			if d := deniedRecord(res.exit.Egress); d != nil && d.Denied > 0 {
				logs.add(state.LogAgent, "egress: "+deniedText(d))
			}
			logs.flush()
			switch cause := context.Cause(actx); {
			case errors.Is(cause, errFirstEventTimeout):
				res.timeout = timeoutFirstEvent
			case errors.Is(cause, errAttemptTimeout):
				res.timeout = timeoutAttempt
			case errors.Is(cause, errBudget):
				if res.over == "" {
					res.over = res.budget.overTime(res.spent)
				}
			case ctx.Err() != nil:
				res.cause = context.Cause(ctx)
			}
			return res
		}
	}
}

// liveness tells an attempt at work in silence from a hung one: at each
// tick it reads the CPU time and I/O of the attempt's processes; grown,
// with no event for a tick or more, the task is LivenessSilent and its
// LastActivityAt moves on (the stall limit counts from it); an event, or
// a look that finds them idle, ends that.
type liveness struct {
	r       *Runner
	task    *state.Task
	mark    string
	every   time.Duration
	tick    <-chan time.Time // nil when it never looks
	timer   *time.Ticker
	last    proc.Activity
	heardAt time.Time // the last event
}

func (r *Runner) liveness(task *state.Task, mark string) *liveness {
	l := &liveness{r: r, task: task, mark: mark, every: cmp.Or(r.Liveness, DefaultLiveness), heardAt: r.now()}
	if l.every > 0 {
		l.timer = time.NewTicker(l.every)
		l.tick = l.timer.C
		l.last = proc.MarkActivity(mark)
	}
	return l
}

func (l *liveness) stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
	l.set(l.r.now(), "") // the attempt is over: nothing of it runs
}

// heard notes an event: the attempt is not silent.
func (l *liveness) heard(now time.Time) {
	l.heardAt = now
	l.set(now, "")
}

// look reads the attempt's processes' activity.
func (l *liveness) look(now time.Time) {
	a := proc.MarkActivity(l.mark)
	busy := a.Busier(l.last)
	l.last = a
	switch {
	case busy && now.Sub(l.heardAt) >= l.every:
		l.task.LastActivityAt = now
		if l.task.Liveness == state.LivenessSilent && l.r.OnActivity != nil {
			l.r.OnActivity(now, state.LivenessSilent) // LastActivityAt moved on
		}
		l.set(now, state.LivenessSilent)
	case !busy:
		l.set(now, "")
	}
}

// set changes the task's liveness, telling OnActivity when it changes.
func (l *liveness) set(_ time.Time, what string) {
	if l.task.Liveness == what {
		return
	}
	l.task.Liveness = what
	if what == state.LivenessSilent {
		l.r.logger().Info("the attempt works in silence: its processes use CPU or I/O, no event", "task", l.task.ID)
	}
	if l.r.OnActivity != nil {
		l.r.OnActivity(l.task.LastActivityAt, what)
	}
}

// countsAsFirstEvent reports whether an event shows the model answering,
// which is what the first-event limit waits for: not the session, a phase
// change, raw output lines, or a notice (a CLI's own retry, a status).
func countsAsFirstEvent(ev Event) bool {
	switch ev.Type {
	case EventSession, EventPhase, EventLines:
		return false
	}
	return !ev.Notice
}

// askNote is a question on its way between an executor's Ask and the
// attempt's loop: a question asked (answer nil), or its answer. The loop
// sends the request back on done once it has applied it.
type askNote struct {
	req    state.ApprovalRequest
	answer *answer
	done   chan state.ApprovalRequest
}

// answer is how a question was answered: by a person, or declined when
// nobody answered within the approval timeout (expired).
type answer struct {
	approval Approval
	expired  bool
}

// asker returns the function executors call to ask a person about task,
// or nil when nobody can be asked. The attempt's loop (asks) moves the
// task to awaiting_reply with the question, and back when it is
// answered; loopDone ends a question the loop can no longer take.
func (r *Runner) asker(taskID string, asks chan<- askNote, loopDone <-chan struct{}, j *journal) func(context.Context, state.ApprovalRequest) Approval {
	if r.Replies == nil {
		return nil
	}
	// tell hands the loop a note and waits until it has applied it.
	tell := func(ctx context.Context, n askNote) (state.ApprovalRequest, bool) {
		n.done = make(chan state.ApprovalRequest, 1)
		select {
		case asks <- n:
		case <-ctx.Done():
			return n.req, false
		case <-loopDone:
			return n.req, false
		}
		return <-n.done, true
	}
	return func(ctx context.Context, req state.ApprovalRequest) Approval {
		if j != nil {
			// Asked again by an executor taken up from before it had
			// the answer: it is the one given.
			if a, ok := j.answer(req.ID); ok {
				return a
			}
		}
		req, ok := tell(ctx, askNote{req: req})
		if !ok {
			return ApprovalDecline
		}
		wait, cancel := ctx, context.CancelFunc(func() {})
		if timeout := r.approvalTimeout(); timeout > 0 {
			wait, cancel = context.WithDeadline(ctx, req.Deadline)
		}
		a, err := r.Replies.Await(wait, taskID, req)
		cancel()
		ans := answer{approval: a}
		if err != nil {
			if ctx.Err() != nil {
				return ApprovalDecline // the attempt is ending: nobody is told of it
			}
			ans = answer{approval: ApprovalDecline, expired: true}
			r.logger().Info("approval request declined: no answer in time", "task", taskID, "request", req.ID, "timeout", r.approvalTimeout())
		}
		tell(ctx, askNote{req: req, answer: &ans})
		return ans.approval
	}
}

// asked puts the task in awaiting_reply with req, bounded and given its
// deadline, and returns it as reported.
func (r *Runner) asked(task *state.Task, req state.ApprovalRequest, logs *logBatch) state.ApprovalRequest {
	if w := task.AwaitingReply; task.Phase == state.PhaseAwaitingReply && w != nil && w.ID == req.ID {
		// Asked already (an executor taken up again asks what it had
		// asked): it waits as it was asked, told once.
		return *w
	}
	req.Bound()
	req.Asked, req.Deadline = r.now(), time.Time{}
	if timeout := r.approvalTimeout(); timeout > 0 {
		req.Deadline = req.Asked.Add(timeout)
	}
	logs.flush() // what was said before the question is reported before it
	if err := r.setPhase(task, state.PhaseAwaitingReply, &req, nil, r.now()); err != nil {
		r.logger().Warn("approval request not reported", "task", task.ID, "request", req.ID, "err", err)
	}
	return req
}

// answered takes the task back to turn_started once req is answered:
// a decline is a denied call of attempt a, and an expired question is
// said in the phase's reason and kept on the task.
func (r *Runner) answered(task *state.Task, a *state.Attempt, req state.ApprovalRequest, ans answer, logs *logBatch) {
	now := r.now()
	why := "declined by a person"
	switch {
	case ans.expired:
		why = "no answer within " + r.approvalTimeout().String()
	case ans.approval == ApprovalAccept:
		why = "accepted by a person"
	}
	if r.journal != nil {
		r.journal.setAnswer(req.ID, ans.approval)
	}
	logs.add(state.LogExecutor, "approval "+req.ID+" "+why+": "+req.What())
	if ans.approval != ApprovalAccept {
		if err := task.Deny(a.AttemptID, state.DeniedCall{Tool: toolOf(req), Input: req.What(), Why: why, At: now}); err != nil {
			r.logger().Warn("denied call not recorded", "task", task.ID, "err", err)
		}
	}
	logs.flush()
	if task.Phase == state.PhaseAwaitingReply && task.AwaitingReply != nil && task.AwaitingReply.ID == req.ID {
		var expired *state.ApprovalRequest
		if ans.expired {
			expired = &req
		}
		if err := r.setPhase(task, state.PhaseTurnStarted, nil, expired, now); err != nil {
			r.logger().Warn("phase after an answer not reported", "task", task.ID, "err", err)
		}
	}
	if ans.approval != ApprovalAccept {
		r.reportAttempt(task, a)
	}
}

// toolOf names the tool a request is about, for a denied call.
func toolOf(req state.ApprovalRequest) string {
	switch {
	case req.Tool != "":
		return req.Tool
	case req.Kind == state.ApprovalFileChange:
		return "file change"
	}
	return "command"
}

// apply applies one executor event to the task, after resolving its
// session to its attempt.
func (r *Runner) apply(task *state.Task, a *state.Attempt, ev Event, logs *logBatch, res *result) {
	now := r.now()
	if ev.Type == EventSession {
		if err := task.BindSession(a.AttemptID, ev.SessionID); err != nil {
			r.logger().Warn("session not bound", "task", task.ID, "attempt", a.Number, "err", err)
			return
		}
		if ev.SessionPath != "" && ev.SessionPath != a.SessionPath {
			_ = task.BindSessionPath(a.AttemptID, ev.SessionPath) // current and open: BindSession said so
			// Recorded at once: a crash from here on leaves a session
			// to continue.
			logs.flush()
			r.reportAttempt(task, a)
		}
		return
	}
	if _, err := task.ResolveEvent(ev.SessionID); err != nil {
		r.logger().Warn("event ignored", "task", task.ID, "type", ev.Type, "err", err)
		return
	}
	var act state.Activity
	used := false // a usage event changed the attempt's usage
	switch ev.Type {
	case EventPhase:
		logs.flush() // what was said before the phase change is reported before it
		if err := r.setPhase(task, ev.Phase, nil, nil, now); err != nil {
			r.logger().Warn("phase from executor ignored", "task", task.ID, "phase", ev.Phase, "err", err)
		}
	case EventProgress:
		act.Progress = &state.Progress{Message: ev.Message, Percent: ev.Percent, Step: ev.Step}
	case EventOutput:
		act.Output = true
		logs.add(state.LogOutput, ev.Text)
	case EventTool:
		act.ToolInput = ev.Stage == StageInput
		act.ToolCall = ev.Stage != StageInput
		logs.add(state.LogTool, strings.TrimSpace(ev.Name+" "+string(ev.Stage)))
	case EventSideEffect:
		act.SideEffect = true
		logs.add(state.LogSideEffect, ev.Description)
	case EventLog:
		logs.add(state.LogExecutor, strings.TrimSpace(string(ev.Level)+" "+ev.Message))
	case EventUsage:
		if u := ev.Usage(); u != a.Usage {
			_ = task.SetUsage(a.AttemptID, u) // current and open: ResolveEvent said so
			if res.over == "" {
				res.over = res.budget.overTokens(res.spent, u)
			}
			used = true
		}
	case EventResult:
		res.result = &ev
	case EventError:
		res.lastErr = &ev
	case EventDenied:
		d := state.DeniedCall{Tool: ev.Name, Input: ev.Description, Why: ev.Message, At: now}
		logs.add(state.LogExecutor, strings.TrimSpace("denied: "+d.Tool+" "+Clip(d.Input, 300)+" ("+d.Why+")"))
		if err := task.Deny(a.AttemptID, d); err == nil {
			logs.flush()
			r.reportAttempt(task, a)
		}
	case EventLines:
		logs.add(ev.Stream, ev.Lines...)
	}
	before := gateOf(a.Facts)
	if err := task.Observe(a.AttemptID, act, now); err != nil {
		r.logger().Warn("event not applied", "task", task.ID, "err", err)
		return
	}
	if act.Progress != nil {
		logs.flush()
		r.report(task, *act.Progress)
	}
	if gateOf(a.Facts) != before || used {
		// What the gate decides on is recorded as it changes: after a
		// crash, the agent's next run must not replay work that had
		// begun. Usage too, as it grows: the control plane shows it.
		logs.flush()
		r.reportAttempt(task, a)
	}
}

// setPhase moves the task to a running phase an executor reported: with
// a question (req) to awaiting_reply, and back from it with the question
// that expired unanswered, if one did.
func (r *Runner) setPhase(task *state.Task, p state.Phase, req, expired *state.ApprovalRequest, now time.Time) error {
	switch p {
	case state.PhaseTurnStarted, state.PhaseAwaitingReply, state.PhaseCompleting:
	default:
		return fmt.Errorf("an executor may report turn_started, awaiting_reply or completing, not %q", p)
	}
	if task.Phase == p && req == nil {
		return nil
	}
	reason := ""
	switch {
	case req != nil && p == state.PhaseAwaitingReply:
		reason = "approval requested: " + req.What()
	case expired != nil:
		reason = fmt.Sprintf("approval %s expired: no answer within %s; declined %s", expired.ID, r.approvalTimeout(), expired.What())
	}
	if task.Phase == p && task.Phase == state.PhaseAwaitingReply {
		// A second question while one waits: it takes the place of the
		// first.
		task.PhaseReason, task.UpdatedAt = reason, now
	} else if err := task.Transition(p, reason, now); err != nil {
		return err
	}
	ev := state.PhaseEvent{Phase: task.Phase, Reason: task.PhaseReason}
	if req != nil && p == state.PhaseAwaitingReply {
		q := *req
		task.AwaitingReply, task.Reply = &q, nil
		ev.Request = req
	}
	if expired != nil {
		q := *expired
		task.ApprovalExpired, ev.Expired = &q, expired
	}
	r.report(task, ev)
	return nil
}

// complete ends a successful attempt and the task.
func (r *Runner) complete(task *state.Task, a *state.Attempt, res result) {
	now := r.now()
	code := res.exit.ExitCode
	if err := task.FinalizeAttempt(a.AttemptID, state.Outcome{Status: state.AttemptCompleted, ExitCode: &code, TimeoutUsed: res.timeouts, Egress: deniedRecord(res.exit.Egress)}, now); err != nil {
		r.logger().Error("finalize attempt", "task", task.ID, "err", err)
	}
	r.reportAttempt(task, a)
	if res.result != nil {
		task.Result = &state.Result{Summary: res.result.Summary}
		if len(res.result.Data) > 0 {
			task.Result.Data = res.result.Data
		}
	}

	if task.Phase != state.PhaseCompleting {
		if err := task.Transition(state.PhaseCompleting, "", now); err == nil {
			r.reportPhase(task)
		}
	}
	// A run whose model was refused tool calls does not read as plain
	// success: "completed (2 tool calls denied)".
	r.end(task, state.PhaseCompleted, state.DeniedText(task.Denied))
	if r.Health != nil {
		r.Health.Observe(health.Success, "")
	}
}

// stop judges a failed (or cancelled) attempt. It either schedules the next
// attempt and returns it, or ends the task and returns nil. res is nil when
// the attempt never ran (cancelled during its backoff wait).
func (r *Runner) stop(ctx context.Context, task *state.Task, a *state.Attempt, exit Exit, res *result) *state.Attempt {
	f := failure{ExitCode: exit.ExitCode, Signal: exit.Signal, StartErr: exit.StartErr, StdioClose: exit.StdioClosed, Protocol: exit.ProtocolErr}
	if !exit.Killed {
		// What a command said as the agent stopped it is not why it failed.
		f.Stderr = exit.Stderr
	}
	timeouts := ""
	if res != nil {
		f.Timeout, timeouts, f.Budget = res.timeout, res.timeouts, res.over
		if res.lastErr != nil {
			f.Code, f.Message, f.RetryAfter = res.lastErr.Code, res.lastErr.Message, res.lastErr.ResetIn(r.now())
		}
		if res.timeout != timeoutNone {
			timeouts += " fired=" + res.timeout.String()
		}
		if res.over != "" {
			timeouts += " fired=budget"
		}
	}
	if ctx.Err() != nil && (res == nil || res.cause != nil) {
		if b := budgetStopOf(ctx); b != nil {
			f.Budget = b.Reason
			timeouts += " fired=budget"
		} else {
			f.Cancelled = errors.Is(context.Cause(ctx), ErrCancelled)
			f.Shutdown = !f.Cancelled
			if how := (*Cancel)(nil); errors.As(context.Cause(ctx), &how) {
				f.CancelReason, f.CancelPhase = how.Reason, how.Phase
			}
		}
	}
	v := classify(f)
	if r.Health != nil && v.Signal != "" {
		r.Health.Observe(v.Signal, v.Message)
	}
	// A continue is judged with what its session had done before it: a
	// replay would do that again. The agent's own stops spend no attempt
	// (see stoppedBefore), this one's included.
	judged := *a
	judged.Facts = task.SessionFacts(a)
	judged.Number -= stoppedBefore(task, a)
	if v.Code == state.CodeAgentShutdown {
		judged.Number--
	}
	// An attempt that ran out its whole limit is not continued on the
	// agent's own: the limit is there to bound the work.
	d := r.Policy.decide(v, &judged, r.firstEventRetried(task, a), r.canContinue(task, a) && v.Code != state.CodeAttemptTimeout)
	out := state.Outcome{Status: state.AttemptFailed, Error: &state.Error{Code: v.Code, Message: v.Message}, TimeoutUsed: timeouts, Retry: &d, Egress: deniedRecord(exit.Egress)}
	if res != nil && exit.StartErr == nil {
		code := exit.ExitCode
		out.ExitCode = &code
	}
	phase, reason := state.PhaseFailed, v.Error()
	if park := parkOf(v, d, r.now()); park != nil {
		return r.conclude(task, a, out, "", "", park)
	}
	if res != nil && res.over != "" && r.OnBudget != state.OnBudgetFail {
		// The task's own budget, reached: a person decides whether it
		// is worth more (a tree's, which the control plane stops, is
		// not this one's to raise).
		if next := r.parkAtBudget(task, a, v, out, res); next != nil {
			return next
		}
	}
	switch {
	case v.Class == classStop && f.CancelPhase.Terminal() && f.CancelPhase != state.PhaseCancelled:
		// The control plane ended the task (its watchdog): it ends here
		// as it ended there, attempt and reason alike.
		ended := state.EndedBy(f.CancelPhase, f.CancelReason)
		out.Status, out.Error, out.Retry = ended.Status, ended.Error, nil
		phase, reason = f.CancelPhase, f.CancelReason
	case v.Class == classStop:
		out.Status, phase = state.AttemptCancelled, state.PhaseCancelled
	case v.Class == classInterrupted:
		phase, reason = state.PhaseRecoverableFailed, notRetried(v, d)
	case v.Code == state.CodeSessionLost:
		phase, reason = state.PhaseRecoverableFailed, v.Error()+"; agent tasks retry replays the prompt from the start"
	case v.Class == classTransient && d.Gate.Blocks():
		phase, reason = state.PhaseRecoverableFailed, notRetried(v, d)
	case f.Timeout != timeoutNone:
		// Only the agent's own limits end a task timed_out: an executor's
		// "timeout" is the model's, a transient failure like another.
		phase = state.PhaseTimedOut
	}
	return r.conclude(task, a, out, phase, reason, nil)
}

// parkAtBudget parks task, whose attempt a reached its budget, for a
// person to raise it: the next attempt continues a's session (or, with
// none, replays the prompt when the gate allows), once the budget is
// raised. Nil when nothing could follow (no session, and the gate
// blocks a replay): the task then ends as before.
func (r *Runner) parkAtBudget(task *state.Task, a *state.Attempt, v verdict, out state.Outcome, res *result) *state.Attempt {
	facts := task.SessionFacts(a)
	d := state.RetryDecision{TechnicallyRetryable: true, Gate: gateOf(facts), Decision: state.DecisionRetried}
	switch {
	case r.canContinue(task, a):
		d.Decision = state.DecisionContinued
	case d.Gate != state.GateAllowed:
		return nil
	}
	out.Retry = &d
	park := &state.Park{Reason: state.ParkBudget, Since: r.now(), MaxTokens: res.budget.MaxTokens, MaxTime: state.Duration(res.budget.MaxTime)}
	return r.conclude(task, a, out, "", "", park)
}

// parkOf is the park of an attempt that stopped at a usage limit said to
// reset (v's RetryAfter) and is followed by another: nil for any other.
func parkOf(v verdict, d state.RetryDecision, now time.Time) *state.Park {
	if v.Code != state.CodeUsageLimit || v.RetryAfter <= 0 || !d.Decision.Next() {
		return nil
	}
	return &state.Park{Reason: state.ParkUsageLimit, ResumesAt: now.Add(v.RetryAfter), Since: now}
}

// conclude applies the decision recorded in out.Retry to a failed attempt:
// with a retry, it opens the next attempt, parks the task when park is
// set (else it waits in executor_starting), reports both and returns the
// new one; otherwise it finalizes the attempt, ends the task in phase
// with reason, and returns nil.
func (r *Runner) conclude(task *state.Task, a *state.Attempt, out state.Outcome, phase state.Phase, reason string, park *state.Park) *state.Attempt {
	now := r.now()
	if out.Retry != nil {
		// Why the attempt ended as it did, for --log-level debug.
		r.logger().Debug("attempt judged", "attempt", a.Number, "code", out.Error.Code,
			"technically_retryable", out.Retry.TechnicallyRetryable, "gate", out.Retry.Gate, "decision", out.Retry.Decision,
			"delay", time.Duration(out.Retry.Delay).String(), "limits", out.TimeoutUsed, "then", phaseOrRetry(out, phase))
	}
	if out.Retry != nil && out.Retry.Decision.Next() {
		next, err := task.ScheduleRetry(a.AttemptID, out, r.newID(), r.Models, now)
		if err != nil {
			r.logger().Error("schedule retry", "task", task.ID, "err", err)
			return nil
		}
		next.MaxAttempts = r.limitOf(task, next)
		if park != nil {
			if err := task.Park(*park, parkText(*park, out, next), now); err != nil {
				r.logger().Error("park", "task", task.ID, "err", err)
			}
			if park.Reason == state.ParkBudget {
				r.logger().Info("task parked at its budget: a person may raise it", "attempt", a.Number, "max_tokens", park.MaxTokens, "max_time", park.MaxTime.D())
			} else {
				r.logger().Info("task parked at a usage limit", "attempt", a.Number, "resumes_at", park.ResumesAt, "continues_at", next.NotBefore)
			}
		}
		r.reportAttempt(task, &task.Attempts[len(task.Attempts)-2])
		r.reportPhase(task)
		r.reportAttempt(task, next)
		return next
	}
	if err := task.FinalizeAttempt(a.AttemptID, out, now); err != nil {
		r.logger().Error("finalize attempt", "task", task.ID, "err", err)
	}
	r.reportAttempt(task, a)
	r.end(task, phase, reason)
	return nil
}

// parkText is the reason of a task parked after out until its next
// attempt starts.
func parkText(park state.Park, out state.Outcome, next *state.Attempt) string {
	what := "attempt " + next.NumberText() + " replays the prompt"
	if next.Continues > 0 {
		what = fmt.Sprintf("attempt %s continues attempt %d's session", next.NumberText(), next.Continues)
	}
	if park.Reason == state.ParkBudget {
		return fmt.Sprintf("%s; parked until a person raises the budget (agent tasks budget), then %s", out.Error.Error(), what)
	}
	return fmt.Sprintf("%s; parked until the limit resets at %s, then %s", out.Error.Error(), park.ResumesAt.UTC().Format(time.RFC3339), what)
}

// phaseOrRetry says what follows a judged attempt: another attempt, or
// the phase the task ends in.
func phaseOrRetry(out state.Outcome, phase state.Phase) string {
	switch out.Retry.Decision {
	case state.DecisionRetried:
		return "replay"
	case state.DecisionContinued:
		return "continue"
	}
	return string(phase)
}

// notRetried is the reason a task ends when the gate stopped what would
// follow: why, and, when it stopped for a person (on_side_effect ask),
// what they may do.
func notRetried(v verdict, d state.RetryDecision) string {
	if d.Asked {
		return fmt.Sprintf("%s; not continued on its own: %s, and on_side_effect is ask: a person decides (agent tasks continue, or agent tasks retry)", v.Error(), d.Gate)
	}
	return fmt.Sprintf("%s; not retried automatically: %s", v.Error(), d.Gate)
}

// resumeOf is the session attempt a continues, and the follow-up it
// sends, or why it cannot be continued.
func (r *Runner) resumeOf(task *state.Task, a *state.Attempt) (*Resume, error) {
	s := &task.Attempts[a.Continues-1]
	switch {
	case !CanResume(r.Executor):
		return nil, fmt.Errorf("the %s executor cannot continue attempt %d's session", r.Executor.Name(), s.Number)
	case s.SessionID == "" || s.SessionPath == "":
		return nil, fmt.Errorf("attempt %d has no session its executor said it keeps", s.Number)
	}
	if _, err := os.Stat(s.SessionPath); err != nil {
		return nil, fmt.Errorf("attempt %d's session %s is gone: %w", s.Number, s.SessionID, err)
	}
	return &Resume{SessionID: s.SessionID, Path: s.SessionPath, Prompt: FollowUp(task, a)}, nil
}

// FollowUp is what a continue tells the model in place of the task's
// prompt: that its turn was cut, why, and to go on without repeating what
// took effect.
func FollowUp(task *state.Task, a *state.Attempt) string {
	why := "it was stopped"
	if p := &task.Attempts[a.Number-2]; p.Error != nil {
		why = fmt.Sprintf("attempt %d ended: %s", p.Number, p.Error.Error())
	}
	who := ""
	switch p := &task.Attempts[a.Number-2]; {
	case a.RetriedByPerson:
		who = " A person has asked you to continue."
	case p.Error != nil && p.Error.Code == state.CodeUsageLimit:
		who = " The usage limit has reset."
	case p.Error != nil && p.Error.Code == state.CodeBudgetExceeded:
		who = " A person has raised the task's budget: spend it with care."
	}
	return fmt.Sprintf("Your previous turn on this task was cut off before it finished (%s).%s "+
		"The conversation so far is intact, and the work directory is as that turn left it. "+
		"Check what was already done (files, commits, commands that ran) before doing more, "+
		"do not repeat anything that already took effect, and finish the task.", why, who)
}

// workspace makes or finds the workspace of a task that names a
// repository, and resets it to its base for a replay (an attempt after
// the first that continues no session). It returns the directory and
// what a confined attempt must also write.
func (r *Runner) workspace(ctx context.Context, task *state.Task, a *state.Attempt, fresh bool) (string, []string, error) {
	if r.Workspaces == nil {
		return "", nil, fmt.Errorf("repository %q: this agent serves no repositories", task.Repo)
	}
	// Never cut part-way (a stop waits for it): git killed in the middle
	// of making a clone leaves it half made.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workspaceTimeout)
	defer cancel()
	ws, err := r.Workspaces.Prepare(ctx, task.ID, task.Repo, task.Base)
	if err != nil {
		return "", nil, err
	}
	dir, writable := ws.Dir, ws.Writable
	if ws.Checkout != nil && state.CheckoutOf(task) == nil {
		// Said once, on the attempt that finds it: the person may think
		// the task works on what their checkout holds.
		a.Checkout = ws.Checkout
		r.reportAttempt(task, a)
		r.note(task, state.CheckoutText(ws.Checkout))
	}
	if fresh && a.Number > 1 && a.Continues == 0 {
		left := lastRan(task, a)
		kept, err := r.Workspaces.Reset(ctx, task.ID, left)
		if err != nil {
			return "", nil, fmt.Errorf("reset the workspace for a replay: %w", err)
		}
		if kept != "" {
			a.KeptRef = kept
			r.reportAttempt(task, a)
			r.note(task, fmt.Sprintf("what attempt %d left is kept on %s in repository %s (git log %s); attempt %d starts from the base", left, kept, task.Repo, kept, a.Number))
		}
		r.logger().Info("workspace reset to its base for a replay", "attempt", a.Number, "dir", dir, "kept", kept)
	}
	return dir, writable, nil
}

// lastRan is the number of the last attempt before a that ran, whose
// work its workspace holds (a's number less one when none did).
func lastRan(task *state.Task, a *state.Attempt) int {
	for i := a.Number - 2; i >= 0; i-- {
		if !task.Attempts[i].StartedAt.IsZero() {
			return task.Attempts[i].Number
		}
	}
	return max(a.Number-1, 1)
}

// note reports a line of the agent's own to the task's log.
func (r *Runner) note(task *state.Task, line string) {
	r.report(task, state.LogEvent{Stream: state.LogAgent, Lines: []string{line}})
}

// stoppedBefore counts the attempts before a that the agent's own stop
// cut short (agent_shutdown), or the account's usage limit
// (usage_limit), or its budget when a person raised it (budget_exceeded,
// parked): they do not count against MaxAttempts, for an operator's stop
// or upgrade, a limit of the plan, or a budget a person chose to raise,
// is not the task's doing, and a task cannot stop the agent. (A crash, agent_restart, counts: a task that
// crashes the agent must not loop.)
func stoppedBefore(task *state.Task, a *state.Attempt) int {
	n := 0
	for _, p := range task.Attempts[:a.Number-1] {
		if p.Error != nil && (p.Error.Code == state.CodeAgentShutdown || p.Error.Code == state.CodeUsageLimit ||
			p.Error.Code == state.CodeBudgetExceeded && p.Retry != nil && p.Retry.Decision.Next()) {
			n++
		}
	}
	return n
}

// limitOf is the limit attempt a runs under (state.Attempt.MaxAttempts):
// the policy's attempts, plus those the agent's own stops cut short
// before it, and never below its own number (a person's retry goes past
// the limit, and its attempt is the last the gate allows).
func (r *Runner) limitOf(task *state.Task, a *state.Attempt) int {
	return max(r.Policy.withDefaults().MaxAttempts+stoppedBefore(task, a), a.Number)
}

// canContinue reports whether the attempt after a could continue a's
// session: its executor resumes sessions and a has one (its own, or the
// one it continued).
func (r *Runner) canContinue(task *state.Task, a *state.Attempt) bool {
	return CanResume(r.Executor) && task.OwnSession(a) != nil
}

// Error renders a verdict as code: message.
func (v verdict) Error() string {
	return (&state.Error{Code: v.Code, Message: v.Message}).Error()
}

// firstEventRetried reports whether an attempt before a was retried after a
// first-event timeout.
func (r *Runner) firstEventRetried(task *state.Task, a *state.Attempt) bool {
	for _, p := range task.Attempts[:a.Number-1] {
		if p.Error != nil && p.Error.Code == state.CodeFirstEventTimeout && p.Retry != nil && p.Retry.Decision == state.DecisionRetried {
			return true
		}
	}
	return false
}

// end moves the task to its terminal phase and reports the completion,
// with what the task changed in its workspace, if it has one.
func (r *Runner) end(task *state.Task, phase state.Phase, reason string) {
	if err := task.Transition(phase, reason, r.now()); err != nil {
		r.logger().Error("end task", "task", task.ID, "phase", phase, "err", err)
		return
	}
	if ch := r.changes(task); ch != nil {
		if task.Result == nil {
			task.Result = &state.Result{}
		}
		task.Result.Changes = ch
		if phase == state.PhaseCompleted && r.Deliver != nil {
			r.Deliver(context.Background(), task, ch)
		}
	}
	if u := task.Usage(r.now()); len(task.Attempts) > 0 {
		if task.Result == nil {
			task.Result = &state.Result{}
		}
		task.Result.Usage = &u
	}
	r.reportPhase(task)
	ce := state.CompleteEvent{Status: task.Phase, Attempts: task.Attempts}
	if task.Result != nil {
		ce.Summary, ce.Result, ce.Changes, ce.Usage = task.Result.Summary, task.Result.Data, task.Result.Changes, task.Result.Usage
	}
	if c := task.Current(); c != nil && phase != state.PhaseCompleted {
		ce.Error = c.Error
	}
	r.report(task, ce)
}

// settle ends an attempt's work in the task's workspace, if it has one,
// when nothing of the attempt runs any more: what the attempt left is
// committed on the task's branch (unless the task says not to), the
// branch is brought back to its repository, and the diff of the work is
// reported. A failure is said in the log and the task's (the work stays
// in the workspace, which cleanup then keeps).
func (r *Runner) settle(task *state.Task, a *state.Attempt, res *result) {
	if task.Repo == "" || r.Workspaces == nil {
		return
	}
	// As long as making a workspace may take: the commits may be many.
	ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
	defer cancel()
	if !task.NoCommit {
		summary := ""
		if res.result != nil {
			summary = res.result.Summary
		}
		head, err := r.Workspaces.Commit(ctx, task.ID, CommitMessage(task, a, summary, res.ok()))
		switch {
		case err != nil:
			r.logger().Warn("the attempt's work was not committed", "attempt", a.Number, "err", err)
			r.note(task, "the attempt's work was not committed: "+err.Error())
		case head != "":
			r.logger().Info("the attempt's work committed", "attempt", a.Number, "branch", "agent/"+task.ID, "commit", head)
			r.note(task, fmt.Sprintf("committed what attempt %d left on agent/%s as %s", a.Number, task.ID, head))
		}
	}
	if err := r.Workspaces.BringBack(ctx, task.ID); err != nil {
		r.logger().Warn("the task's work was not brought back to its repository", "branch", "agent/"+task.ID, "err", err)
	}
	d, err := r.Workspaces.Diff(ctx, task.ID)
	switch {
	case err != nil:
		r.logger().Warn("the diff of the task's work is not known", "err", err)
	case d != nil:
		r.report(task, *d)
	}
}

// Commit messages: a subject of at most maxSubject characters, a
// summary of at most maxSummary bytes.
const (
	maxSubject = 72
	maxSummary = 16 << 10
)

// CommitMessage is the message of the agent's commit of what attempt a
// left: the task's title (else its prompt's first line) for subject,
// the attempt's summary (or that it did not complete), and the task and
// attempt in trailers. What the task or its model wrote is made plain:
// no terminal escape, no control character but newlines and tabs.
func CommitMessage(task *state.Task, a *state.Attempt, summary string, completed bool) string {
	subject := Subject(task)
	body := strings.TrimSpace(PlainMessage(summary))
	if len(body) > maxSummary {
		body = strings.ToValidUTF8(body[:maxSummary], "") + "…"
	}
	if !completed {
		note := fmt.Sprintf("Attempt %d ended before it completed: this is the work it left.", a.Number)
		body = strings.TrimSpace(note + "\n\n" + body)
	}
	msg := subject + "\n\n"
	if body != "" {
		msg += body + "\n\n"
	}
	return msg + fmt.Sprintf("Agent-Task: %s\nAgent-Attempt: %d\n", task.ID, a.Number)
}

// Subject is the one line that names a task's work, for the subject of
// the agent's commits and the title of its pull request: the task's
// title, else its prompt's first line, made plain, at most 72
// characters.
func Subject(task *state.Task) string {
	subject := task.Title
	if subject == "" {
		subject, _, _ = strings.Cut(strings.TrimSpace(task.Prompt), "\n")
	}
	subject = state.Ellipsize(strings.Join(strings.Fields(PlainMessage(subject)), " "), maxSubject)
	if subject == "" {
		subject = "agent: the work of task " + task.ID
	}
	return subject
}

// PlainMessage is s without terminal escapes or control characters but
// newlines and tabs, and in valid UTF-8.
func PlainMessage(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) && !unicode.Is(unicode.Bidi_Control, r) {
			return r
		}
		return -1
	}, strings.ToValidUTF8(state.PlainText(strings.ReplaceAll(s, "\r\n", "\n")), "\uFFFD"))
}

// changes is what task changed in its workspace, or nil when it has
// none (or it cannot be read: then the log says why).
func (r *Runner) changes(task *state.Task) *state.Changes {
	if task.Repo == "" || r.Workspaces == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), changesTimeout)
	defer cancel()
	ch, err := r.Workspaces.Changes(ctx, task.ID)
	if err != nil {
		r.logger().Warn("what the task changed is not known", "err", err)
		return nil
	}
	return ch
}

func (r *Runner) reportPhase(task *state.Task) {
	ev := state.PhaseEvent{Phase: task.Phase, Reason: task.PhaseReason}
	if task.Parked != nil {
		p := *task.Parked
		ev.Parked = &p
	}
	r.report(task, ev)
}

func (r *Runner) reportAttempt(task *state.Task, a *state.Attempt) {
	r.report(task, *a)
}

func (r *Runner) report(task *state.Task, payload state.Payload) {
	n := 0
	if c := task.Current(); c != nil {
		n = c.Number
	}
	rep := Report{Attempt: n, At: r.now(), Payload: payload, Task: task}
	if r.journal != nil {
		r.journal.hold(rep)
		return
	}
	r.Sink.Report(rep)
}

// logBatch gathers log lines into few reports: lines of one stream in a
// row go together, up to logBatchLines lines or logBatchBytes bytes.
type logBatch struct {
	r      *Runner
	task   *state.Task
	stream state.LogStream
	lines  []string
	size   int
}

const (
	logBatchLines = 500
	logBatchBytes = 256 << 10
)

func (b *logBatch) add(stream state.LogStream, lines ...string) {
	for _, l := range lines {
		if stream != b.stream || len(b.lines) >= logBatchLines || b.size+len(l) > logBatchBytes {
			b.flush()
			b.stream = stream
		}
		b.lines = append(b.lines, l)
		b.size += len(l)
	}
}

func (b *logBatch) flush() {
	if len(b.lines) == 0 {
		return
	}
	b.r.report(b.task, state.LogEvent{Stream: b.stream, Lines: b.lines})
	b.lines, b.size = nil, 0
}
