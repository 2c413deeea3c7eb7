package state

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

// Task is one unit of work from the control plane, with its attempts.
type Task struct {
	ID          string `json:"id"`
	Title       string `json:"title,omitempty"`
	Prompt      string `json:"prompt"`
	Prefer      Prefer `json:"prefer,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	// Repo names the repository the task works on, one the agent serves
	// (its [[repo]] tables): the task then runs in a git worktree of its
	// own, on a branch of its own, made from Base (a ref of the
	// repository; its HEAD when empty).
	Repo string `json:"repo,omitempty"`
	Base string `json:"base,omitempty"`
	// NoCommit: the agent leaves what each attempt changed in the
	// task's clone as it is, uncommitted, rather than commit it on the
	// task's branch (submit --no-commit).
	NoCommit bool `json:"no_commit,omitempty"`
	// Routing by capability: Requires are what the agent that runs the
	// task must advertise (see Requirement); Unroutable, set by the
	// control plane while the task is queued and no online agent has
	// them all, says which one is missing ("no agent with
	// executor=codex"). It never ends the task by itself.
	Requires   []Requirement `json:"requires,omitempty"`
	Unroutable string        `json:"unroutable,omitempty"`
	// Subtasks: Labels are what the control plane's delegation rules
	// match on. Parent is the task that submitted this one as its
	// subtask, Depth how deep it nests (a task a person submitted is 0),
	// and Children the subtasks it submitted, in order.
	Labels   map[string]string `json:"labels,omitempty"`
	Parent   string            `json:"parent,omitempty"`
	Depth    int               `json:"depth,omitempty"`
	Children []string          `json:"children,omitempty"`
	// Delegation is what the task may delegate to, as the control
	// plane's rules said when it was submitted or last claimed; nil from
	// a control plane that does not say.
	Delegation *Delegation `json:"delegation,omitempty"`
	// OnSideEffect, when set, is the task's own on_side_effect (submit
	// --on-side-effect): what follows a failed attempt that had done
	// something, when its session could be continued. Empty: the agent's.
	OnSideEffect OnSideEffect `json:"on_side_effect,omitempty"`
	// Budgets: MaxTokens bounds the tokens all the task's attempts may
	// use together, and MaxTime their wall time together; zero is no
	// bound. An attempt that passes either ends budget_exceeded.
	MaxTokens int64    `json:"max_tokens,omitempty"`
	MaxTime   Duration `json:"max_time,omitempty"`
	// EgressAllow, when set, narrows where the task's attempts may
	// connect to these of the agent's allowed hosts (HOST[:PORT] each);
	// its executor's model API stays reachable. It never widens the
	// agent's list.
	EgressAllow []string `json:"egress_allow,omitzero"`
	// A tree of subtasks shares its root's budgets (docs/subtasks.md):
	// Root is the task at the top of a subtask's tree, and TreeDeadline
	// when the tree's wall time runs out (zero: its root has no time
	// budget). BudgetStop, set by the control plane, says why it stopped
	// the task as its tree passed its root's budget: its agent ends it
	// budget_exceeded.
	Root         string    `json:"root,omitempty"`
	TreeDeadline time.Time `json:"tree_deadline,omitzero"`
	BudgetStop   string    `json:"budget_stop,omitempty"`

	Phase       Phase  `json:"phase"`
	PhaseReason string `json:"phase_reason,omitempty"`
	// PhaseBefore is the phase the task left for a terminal one, so the
	// progress card can show which step failed.
	PhaseBefore Phase `json:"phase_before,omitempty"`
	// PhasesSeen are the running phases the task has been in since it
	// last left the queue, in the order first reached, so the progress
	// card never shows a step as done that did not happen (a task that
	// never waited for a reply). Nil in files written before it was kept.
	PhasesSeen []Phase `json:"phases_seen,omitempty"`
	// Parked, while the task is in phase parked, says why it waits and
	// until when; nil in every other phase.
	Parked *Park `json:"parked,omitempty"`

	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	LastProgressAt time.Time `json:"last_progress_at,omitzero"`
	// LastActivityAt is when its attempt's processes were last seen at
	// work (CPU time or I/O growing) while it reported nothing, and
	// Liveness, while that is so, says it: LivenessSilent. The stall
	// limit counts from the later of it and LastProgressAt. Cleared by the
	// next event.
	LastActivityAt time.Time `json:"last_activity_at,omitzero"`
	Liveness       string    `json:"liveness,omitempty"`
	Progress       Progress  `json:"progress,omitzero"`
	Result         *Result   `json:"result,omitempty"`

	// Projections of the current attempt; see project.
	LastErrorCode    ErrorCode `json:"last_error_code,omitempty"`
	Recoverable      bool      `json:"recoverable"`
	NextRetryAt      time.Time `json:"next_retry_at,omitzero"`
	CurrentAttemptID string    `json:"current_attempt_id,omitempty"`

	Attempts []Attempt `json:"attempts"`

	// Lease is the claim an agent holds on the task, if any.
	Lease *Lease `json:"lease,omitempty"`
	// CancelRequested: someone asked to cancel the task while it ran (a
	// person, or its parent task); the agent that holds it is told at once
	// on the claim it holds open, else in its next heartbeat answer.
	// CancelReason says who ("cancelled by a person"), CancelAt when. A
	// task that ended otherwise with it set had ended on its agent before
	// the cancel reached it: the ending stands (see CancelNote).
	CancelRequested bool      `json:"cancel_requested,omitempty"`
	CancelReason    string    `json:"cancel_reason,omitempty"`
	CancelAt        time.Time `json:"cancel_at,omitzero"`
	// PersonRetry is set when a person asked for a new attempt of the
	// task after it ended recoverable_failed (agent tasks retry).
	PersonRetry *PersonRetry `json:"person_retry,omitempty"`

	// AwaitingReply is the question a person is asked while the task is
	// in phase awaiting_reply; Reply is the answer, once given, until the
	// task moves on. Both are cleared when it leaves the phase.
	AwaitingReply *ApprovalRequest `json:"awaiting_reply,omitempty"`
	Reply         *Reply           `json:"reply,omitempty"`
	// ApprovalExpired is the last question nobody answered in time: the
	// agent declined it on its own when its approval timeout passed.
	ApprovalExpired *ApprovalRequest `json:"approval_expired,omitempty"`
	// Denied counts the tool calls the task's attempts were refused
	// (each attempt's Denied says which): a projection, as
	// LastErrorCode is.
	Denied int `json:"denied,omitempty"`

	// Diff is the control plane's: where it keeps the task's last diff
	// (its diff event, by seq) and what it comes to; zero before an
	// attempt in a workspace has ended.
	Diff DiffRef `json:"diff,omitzero"`
	// Output is the control plane's account of the log output agents
	// forwarded for the task, one entry per attempt: what it stored and
	// what it cut past its cap.
	Output []AttemptOutput `json:"output,omitempty"`
}

// AttemptOutput is the control plane's account of the log output
// forwarded for one attempt. Its log events are stored while they fit in
// the control plane's cap; the one that would pass it is stored with as
// many of its lines as fit and a mark (its sequence number is CutAt), and
// the lines after it are counted, not stored.
type AttemptOutput struct {
	Attempt int `json:"attempt"`
	// StoredBytes is the size of the attempt's stored log events, the
	// mark's included, as they lie in the events file.
	StoredBytes int64 `json:"stored_bytes"`
	// CutAt is the sequence number of the stored event that marks the
	// cut; zero while nothing is cut.
	CutAt int `json:"cut_at,omitempty"`
	// CutLines and CutBytes count the lines cut and the bytes of their
	// text.
	CutLines int64 `json:"cut_lines,omitempty"`
	CutBytes int64 `json:"cut_bytes,omitempty"`
}

// Prefer is what a task asks of the agent that runs it. Empty is
// PreferAny.
type Prefer string

// The preferences.
const (
	// PreferAny: any agent that is not unavailable.
	PreferAny Prefer = "any"
	// PreferGUI: the task needs the executor's app server; it goes to an
	// available agent when one is online, a degraded one otherwise.
	PreferGUI Prefer = "gui"
)

// Answer is a person's answer to an approval request.
type Answer string

// The answers.
const (
	AnswerAccept  Answer = "accept"
	AnswerDecline Answer = "decline"
)

// Reply is a person's answer to an approval request.
type Reply struct {
	RequestID string    `json:"request_id"`
	Decision  Answer    `json:"decision"`
	At        time.Time `json:"at"`
}

// Lease is a time-limited claim of a task by one agent. Heartbeats and
// accepted events renew it.
type Lease struct {
	ID        string    `json:"id"`
	AgentID   string    `json:"agent_id"`
	ExpiresAt time.Time `json:"expires_at"`
	// ClaimID is the agent's id for the claim that granted the lease: the
	// same claim asked again gets the same grant.
	ClaimID   string    `json:"claim_id,omitempty"`
	GrantedAt time.Time `json:"granted_at,omitzero"`
	// Lapsed: the lease ran out while its agent was silent, after the
	// executor had started. It stays bound to its agent and id: that agent,
	// with that id, takes it back; nobody else can. (Older files, which
	// dropped a lapsed lease, load without it.)
	Lapsed bool `json:"lapsed,omitempty"`
}

// ParkReason says why a task parked.
type ParkReason string

// The reasons a task parks.
const (
	// ParkUsageLimit: its model's usage limit was reached; it continues
	// its session when the limit resets (ResumesAt).
	ParkUsageLimit ParkReason = "usage_limit"
	// ParkBudget: it reached its token or time budget; it waits for a
	// person to raise the budget (agent tasks budget), then continues its
	// session.
	ParkBudget ParkReason = "budget"
)

// OnBudget is what follows an attempt that reached its task's budget.
type OnBudget string

// The choices; empty is OnBudgetPark.
const (
	// OnBudgetPark: the task parks (reason budget) and a person is told;
	// raising the budget continues it.
	OnBudgetPark OnBudget = "park"
	// OnBudgetFail: the task ends failed, budget_exceeded, as it did
	// before budgets asked.
	OnBudgetFail OnBudget = "fail"
)

// Park is why a parked task waits and until when.
type Park struct {
	Reason ParkReason `json:"reason"`
	// ResumesAt is when the limit resets: the task continues its session
	// then (its pending attempt's NotBefore adds a little jitter). Zero
	// when a person's word is what it waits for.
	ResumesAt time.Time `json:"resumes_at,omitzero"`
	// Since is when it parked.
	Since time.Time `json:"since"`
	// ContinueAsked is when a person asked to continue it now (agent
	// tasks continue, or agent tasks budget): its agent hears so and
	// resumes it early.
	ContinueAsked time.Time `json:"continue_asked,omitzero"`
	// MaxTokens and MaxTime, for a budget park, are the budget it reached
	// (the task's own, or its agent's default): what a person's raise adds
	// to. Zero: no bound of that kind.
	MaxTokens int64    `json:"max_tokens,omitempty"`
	MaxTime   Duration `json:"max_time,omitempty"`
}

// Known reports whether r is one of the reasons above.
func (r ParkReason) Known() bool { return r == ParkUsageLimit || r == ParkBudget }

// Progress is the latest progress an executor reported.
type Progress struct {
	Message string `json:"message,omitempty"`
	Percent int    `json:"percent,omitempty"`
	Step    string `json:"step,omitempty"`
}

// Result is what a completed task produced.
type Result struct {
	Summary string `json:"summary,omitempty"`
	Data    any    `json:"data,omitempty"`
	// Changes is what the task did to its repository, when it ran in a
	// workspace.
	Changes *Changes `json:"changes,omitempty"`
	// Usage is what all the task's attempts spent together.
	Usage *TaskUsage `json:"usage,omitempty"`
}

// Changes is what a task did in its workspace: its branch, the commits on
// it since the base, and the difference from the base.
type Changes struct {
	Repo string `json:"repo"`
	// Branch is the task's own branch; Base the ref it was made from and
	// BaseCommit the commit that ref named then.
	Branch     string `json:"branch"`
	Base       string `json:"base,omitempty"`
	BaseCommit string `json:"base_commit"`
	Head       string `json:"head"`
	// Commits are the commits on the branch since the base, oldest first
	// (at most MaxChangesCommits, then CommitsCut says how many more).
	Commits    []Commit `json:"commits"`
	CommitsCut int      `json:"commits_cut,omitempty"`
	// Uncommitted: the worktree has changes no commit holds.
	Uncommitted bool `json:"uncommitted,omitempty"`
	// Files, Insertions and Deletions are the diff stat of the worktree
	// against the base commit, committed or not.
	Files      int `json:"files"`
	Insertions int `json:"insertions"`
	Deletions  int `json:"deletions"`
	// Path is the worktree, on the agent's machine.
	Path string `json:"path,omitempty"`
	// Pushed is where the agent pushed the task's branch, when its
	// repository's config asks for a push; PullRequest the address of
	// the pull (merge) request it opened for it. PushError says why the
	// push or the request failed (agent tasks push tries again); the
	// task stays completed.
	Pushed      *Push  `json:"pushed,omitempty"`
	PullRequest string `json:"pull_request,omitempty"`
	PushError   string `json:"push_error,omitempty"`
}

// Push is a push of a task's branch: to which remote, which commit, when.
type Push struct {
	Remote string    `json:"remote"`
	Branch string    `json:"branch"`
	Commit string    `json:"commit"`
	At     time.Time `json:"at"`
}

// DiffRef is where the control plane keeps a task's last diff: the seq of
// its diff event among the task's events, the attempt that reported it,
// its stat, and the patch's size (Cut: the agent cut it to MaxDiffBytes).
type DiffRef struct {
	Seq        int   `json:"seq"`
	Attempt    int   `json:"attempt"`
	Files      int   `json:"files"`
	Insertions int   `json:"insertions"`
	Deletions  int   `json:"deletions"`
	Bytes      int64 `json:"bytes"`
	Cut        bool  `json:"cut,omitempty"`
}

// Commit is one commit of a task's branch.
type Commit struct {
	SHA     string `json:"sha"`
	Subject string `json:"subject"`
}

// MaxChangesCommits bounds the commits a result lists.
const MaxChangesCommits = 50

// AttemptStatus is where an attempt stands.
type AttemptStatus string

// The statuses of an attempt. Completed, failed and cancelled are final.
const (
	AttemptPending   AttemptStatus = "pending" // opened, waiting for its start (a retry's backoff)
	AttemptRunning   AttemptStatus = "running"
	AttemptCompleted AttemptStatus = "completed"
	AttemptFailed    AttemptStatus = "failed"
	AttemptCancelled AttemptStatus = "cancelled"
)

// Final reports whether s is a final status.
func (s AttemptStatus) Final() bool {
	return s == AttemptCompleted || s == AttemptFailed || s == AttemptCancelled
}

// Attempt is one run of the executor for a task.
type Attempt struct {
	AttemptID string `json:"attempt_id"`
	Number    int    `json:"number"`
	// MaxAttempts is the limit the attempt ran under: the highest number
	// the task's attempts could reach when it was opened (its
	// max_attempts or the agent's, plus the attempts the agent's own
	// stops cut short, which do not count; at least Number, as a
	// person's retry goes past the limit). Zero in records from before
	// it was kept.
	MaxAttempts int    `json:"max_attempts,omitempty"`
	SessionID   string `json:"session_id,omitempty"`
	// SessionPath is where the CLI keeps the session, when the executor
	// said (a Codex rollout file, a Claude transcript): a session that
	// has one can be continued.
	SessionPath string `json:"session_path,omitempty"`
	// Continues is the number of the earlier attempt whose session this
	// one resumes (a continue), zero for an attempt that starts afresh.
	Continues int           `json:"continues,omitempty"`
	Model     string        `json:"model,omitempty"`
	Variant   string        `json:"variant,omitempty"`
	Status    AttemptStatus `json:"status"`
	Error     *Error        `json:"error,omitempty"`

	// NotBefore is when a retry may start (the end of its backoff).
	NotBefore   time.Time `json:"not_before,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	CompletedAt time.Time `json:"completed_at,omitzero"`
	ExitCode    *int      `json:"exit_code,omitempty"`
	// TimeoutUsed names the limits that applied, e.g. "first_event 1m0s,
	// attempt 30m0s", and which one fired, if any.
	TimeoutUsed string `json:"timeout_used,omitempty"`

	// Facts the safety gate decides on.
	Facts Facts `json:"facts"`
	// Retry is the decision taken when the attempt ended.
	Retry *RetryDecision `json:"retry,omitempty"`
	// RetriedByPerson: a person started this attempt (agent tasks retry),
	// overriding the stop that ended the one before.
	RetriedByPerson bool `json:"retried_by_person,omitempty"`
	// KeptRef, for an attempt that started afresh in a workspace (a
	// replay), names the ref of the repository that keeps what the
	// attempt before it left (refs/agent/kept/TASK_ID/attempt-N);
	// empty when that attempt left nothing.
	KeptRef string `json:"kept_ref,omitempty"`
	// Checkout, on the attempt that made the task's workspace (or the
	// first to report it), says that the person's checkout held changes
	// no commit holds then, which the task does not see (CheckoutText).
	Checkout *Checkout `json:"checkout,omitempty"`
	// Usage is the tokens the attempt used so far, as its executor's CLI
	// reported them; zero when it reported none.
	Usage Usage `json:"usage,omitzero"`
	// Denied are the tool calls the attempt was refused (see Task.Deny).
	Denied Denied `json:"denied,omitzero"`
	// Egress is what the attempt's network confinement refused, when its
	// network was confined.
	Egress *Egress `json:"egress,omitempty"`
}

// NumberText is the attempt's number against its limit, as every view
// shows it: "2/3", or "2" when the limit is not known.
func (a *Attempt) NumberText() string {
	if a.MaxAttempts > 0 {
		return fmt.Sprintf("%d/%d", a.Number, a.MaxAttempts)
	}
	return fmt.Sprint(a.Number)
}

// Egress is what an attempt's proxy refused: how many connections, and
// the latest distinct destinations (host:port), newest last.
type Egress struct {
	Denied int      `json:"denied"`
	Last   []string `json:"last,omitempty"`
}

// Error is a classified failure.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message,omitempty"`
}

func (e *Error) Error() string {
	switch {
	case e.Message == "":
		return string(e.Code)
	case e.Code == "":
		return e.Message
	}
	return string(e.Code) + ": " + e.Message
}

// Facts are what an attempt did that matters for a retry: once it produced
// visible output, used a tool or had a side effect, running it again could
// repeat work, so the safety gate stops automatic retries.
type Facts struct {
	FirstEventAt time.Time `json:"first_event_at,omitzero"`
	Output       bool      `json:"output,omitempty"`
	ToolInput    bool      `json:"tool_input,omitempty"`
	ToolCall     bool      `json:"tool_call,omitempty"`
	SideEffect   bool      `json:"side_effect,omitempty"`
}

// RetryDecision records how a failed attempt was judged, so that one can
// answer: was it technically retryable, did the gate allow it, was a retry
// attempted, after what delay.
type RetryDecision struct {
	TechnicallyRetryable bool `json:"technically_retryable"`
	// Gate is GateAllowed, or why an automatic retry is blocked
	// (GateSideEffect, GateMaxAttempts, …).
	Gate GateReason `json:"gate"`
	// Decision is DecisionRetried, DecisionContinued or DecisionStopped.
	Decision Decision `json:"decision"`
	// Asked: the session could have been continued, but on_side_effect
	// is ask, so the gate stopped for a person (Decision stopped, Gate
	// what the attempt had done).
	Asked bool     `json:"asked,omitempty"`
	Delay Duration `json:"delay,omitempty"`
}

// Errors of the attempt helpers.
var (
	// ErrStaleEvent: the event belongs to an attempt that is not current, or
	// has been finalized. It must not be applied.
	ErrStaleEvent = errors.New("stale event")
	// ErrUnknownSession: no attempt has this session id.
	ErrUnknownSession = errors.New("unknown session")
	// ErrNotCurrent: the attempt is not the task's current one.
	ErrNotCurrent = errors.New("attempt is not current")
	// ErrFinalized: the attempt has ended and cannot change.
	ErrFinalized = errors.New("attempt is finalized")
)

// NewTask returns a queued task.
func NewTask(id, prompt string, now time.Time) *Task {
	return &Task{ID: id, Prompt: prompt, Phase: PhaseQueued, CreatedAt: now, UpdatedAt: now, Attempts: []Attempt{}}
}

// Transition moves the task to phase to, if the rules allow it (see
// checkTransition). A terminal phase finalizes the current attempt when it
// is still open: cancelled as cancelled, completed as completed, any other
// as failed with the phase's code (CodeTimedOut, …) and the reason as its
// message.
func (t *Task) Transition(to Phase, reason string, now time.Time) error {
	if err := checkTransition(t.Phase, to); err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	if t.Phase == to {
		return nil
	}
	if to.Terminal() {
		if c := t.Current(); c != nil && !c.Status.Final() {
			// The terminal phase names the failure when nothing else did
			// (the control plane's watchdog timing a task out, say).
			c.finalize(EndedBy(to, reason), now)
		}
		t.PhaseBefore = t.Phase
	}
	if t.Phase == PhaseAwaitingReply {
		t.AwaitingReply, t.Reply = nil, nil
	}
	if t.Phase == PhaseParked {
		t.Parked = nil
	}
	t.see(to)
	t.Phase, t.PhaseReason, t.UpdatedAt = to, reason, now
	if to.Running() && t.LastProgressAt.IsZero() {
		t.LastProgressAt = now
	}
	t.project()
	return nil
}

// Park moves the running task to phase parked, with why and until when,
// reason the phase's reason. Its agent holds it meanwhile, a pending
// attempt waiting to continue its session.
func (t *Task) Park(p Park, reason string, now time.Time) error {
	if !t.Phase.Running() {
		return fmt.Errorf("task %s: %w: only a running task parks, not a %s one", t.ID, ErrTransition, t.Phase)
	}
	if err := t.Transition(PhaseParked, reason, now); err != nil {
		return err
	}
	t.Parked = &p
	return nil
}

// see records that the task reached phase p: a running phase is added to
// PhasesSeen once; back in the queue, the record starts again.
func (t *Task) see(p Phase) {
	switch {
	case p == PhaseQueued:
		t.PhasesSeen = nil
	case p.Running() && !slices.Contains(t.PhasesSeen, p):
		t.PhasesSeen = append(t.PhasesSeen, p)
	}
}

// clearProgress forgets the progress an attempt reported when the next
// one opens: a notice ("retries 1/1 … 429") belongs to its attempt.
func (t *Task) clearProgress() { t.Progress = Progress{} }

// Clone returns a deep copy of t that shares nothing it may change later.
// (Result.Data is shared: it is replaced, never changed in place.)
func (t *Task) Clone() *Task {
	c := *t
	c.Attempts = make([]Attempt, len(t.Attempts))
	for i, a := range t.Attempts {
		if a.Error != nil {
			e := *a.Error
			a.Error = &e
		}
		if a.Retry != nil {
			r := *a.Retry
			a.Retry = &r
		}
		if a.ExitCode != nil {
			x := *a.ExitCode
			a.ExitCode = &x
		}
		a.Denied.Calls = slices.Clone(a.Denied.Calls)
		c.Attempts[i] = a
	}
	if t.Lease != nil {
		l := *t.Lease
		c.Lease = &l
	}
	c.AwaitingReply = t.AwaitingReply.clone()
	c.ApprovalExpired = t.ApprovalExpired.clone()
	if t.Reply != nil {
		r := *t.Reply
		c.Reply = &r
	}
	if t.Parked != nil {
		p := *t.Parked
		c.Parked = &p
	}
	c.Output = slices.Clone(t.Output)
	c.PhasesSeen = slices.Clone(t.PhasesSeen)
	c.Requires = slices.Clone(t.Requires)
	c.Children = slices.Clone(t.Children)
	c.Labels = maps.Clone(t.Labels)
	c.Delegation = t.Delegation.Clone()
	if t.Result != nil {
		r := *t.Result
		if r.Changes != nil {
			ch := *r.Changes
			ch.Commits = slices.Clone(ch.Commits)
			if ch.Pushed != nil {
				p := *ch.Pushed
				ch.Pushed = &p
			}
			r.Changes = &ch
		}
		c.Result = &r
	}
	if t.PersonRetry != nil {
		r := *t.PersonRetry
		c.PersonRetry = &r
	}
	return &c
}

// Current returns the current attempt (the last one), or nil.
func (t *Task) Current() *Attempt {
	if len(t.Attempts) == 0 {
		return nil
	}
	return &t.Attempts[len(t.Attempts)-1]
}

// Attempt returns the attempt with this id, or nil.
func (t *Task) Attempt(id string) *Attempt {
	for i := range t.Attempts {
		if t.Attempts[i].AttemptID == id {
			return &t.Attempts[i]
		}
	}
	return nil
}

// modelFor returns the model of attempt number n from a fallback chain:
// the n-th, the last one repeating; "" for an empty chain.
func modelFor(models []string, n int) string { return Nth(models, n) }

// Nth returns the value for attempt number n (from 1) of a per-attempt
// list: the n-th, the last one repeating; the zero value for an empty list.
func Nth[T any](list []T, n int) T {
	var zero T
	if len(list) == 0 || n < 1 {
		return zero
	}
	return list[min(n, len(list))-1]
}

// StartFirstAttempt opens attempt 1, running from now, with the first
// model of the chain, and moves the task to executor_starting.
func (t *Task) StartFirstAttempt(attemptID string, models []string, now time.Time) (*Attempt, error) {
	if len(t.Attempts) > 0 {
		return nil, fmt.Errorf("task %s: first attempt already started", t.ID)
	}
	if err := checkTransition(t.Phase, PhaseExecutorStarting); err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	t.Attempts = append(t.Attempts, Attempt{AttemptID: attemptID, Number: 1, Model: modelFor(models, 1), Status: AttemptRunning, StartedAt: now})
	if err := t.Transition(PhaseExecutorStarting, "", now); err != nil {
		return nil, err // cannot happen: checked above
	}
	t.project() // the transition may have been a no-op
	return t.Current(), nil
}

// current returns the attempt with this id if it is current and open.
func (t *Task) current(attemptID string) (*Attempt, error) {
	c := t.Current()
	switch {
	case c == nil || c.AttemptID != attemptID:
		if t.Attempt(attemptID) == nil {
			return nil, fmt.Errorf("task %s: no attempt %q", t.ID, attemptID)
		}
		return nil, fmt.Errorf("task %s: %w: %s", t.ID, ErrNotCurrent, attemptID)
	case c.Status.Final():
		return nil, fmt.Errorf("task %s: %w: %s", t.ID, ErrFinalized, attemptID)
	}
	return c, nil
}

// BindSession records the executor's session id on exactly the attempt
// named, which must be current and open. Binding the same session again
// changes nothing; another session is an error.
func (t *Task) BindSession(attemptID, sessionID string) error {
	if sessionID == "" {
		return fmt.Errorf("task %s: empty session id", t.ID)
	}
	a, err := t.current(attemptID)
	if err != nil {
		return err
	}
	if a.SessionID != "" && a.SessionID != sessionID {
		return fmt.Errorf("task %s: attempt %s is bound to session %s, not %s", t.ID, attemptID, a.SessionID, sessionID)
	}
	// A session goes on in the attempts that continue it, and nowhere
	// else.
	if b := t.bySession(sessionID); b != nil && b != a && !t.continues(a, b) {
		return fmt.Errorf("task %s: session %s belongs to another attempt", t.ID, sessionID)
	}
	a.SessionID = sessionID
	return nil
}

// continues reports whether attempt a continues earlier's session,
// directly or through the attempts between.
func (t *Task) continues(a, earlier *Attempt) bool {
	for a.Continues > 0 && a.Continues < a.Number {
		a = &t.Attempts[a.Continues-1]
		if a == earlier {
			return true
		}
	}
	return false
}

// bySession is the latest attempt bound to the session: a continued
// session goes on in the attempt that continues it.
func (t *Task) bySession(sessionID string) *Attempt {
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if t.Attempts[i].SessionID == sessionID {
			return &t.Attempts[i]
		}
	}
	return nil
}

// SessionFacts are the facts of attempt a and of every attempt whose
// session it goes on with: what the conversation it continues has done.
func (t *Task) SessionFacts(a *Attempt) Facts {
	f := a.Facts
	for a.Continues > 0 && a.Continues < a.Number {
		a = &t.Attempts[a.Continues-1]
		f.Output = f.Output || a.Facts.Output
		f.ToolInput = f.ToolInput || a.Facts.ToolInput
		f.ToolCall = f.ToolCall || a.Facts.ToolCall
		f.SideEffect = f.SideEffect || a.Facts.SideEffect
	}
	return f
}

// OwnSession is the attempt whose session a next attempt after a would
// continue: a's own, when its executor said where the CLI keeps it, else
// the one a continued; nil when neither. A session a did not work in
// knows nothing of what a did, so it is never another.
func (t *Task) OwnSession(a *Attempt) *Attempt {
	if a.SessionID != "" && a.SessionPath != "" {
		return a
	}
	if a.Continues > 0 && a.Continues < a.Number {
		return t.OwnSession(&t.Attempts[a.Continues-1])
	}
	return nil
}

// SessionAttempt is the latest attempt whose session can be continued
// (its executor said where the CLI keeps it), or nil.
func (t *Task) SessionAttempt() *Attempt {
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if a := &t.Attempts[i]; a.SessionID != "" && a.SessionPath != "" {
			return a
		}
	}
	return nil
}

// BindSessionPath records where the CLI keeps the current attempt's
// session.
func (t *Task) BindSessionPath(attemptID, path string) error {
	a, err := t.current(attemptID)
	if err != nil {
		return err
	}
	a.SessionPath = path
	return nil
}

// ResolveEvent finds the attempt an executor event belongs to by its
// session id. An event of a non-current or finalized attempt is stale: the
// attempt is returned with ErrStaleEvent, for logging, and must not be
// applied.
func (t *Task) ResolveEvent(sessionID string) (*Attempt, error) {
	a := t.bySession(sessionID)
	switch {
	case a == nil || sessionID == "":
		return nil, fmt.Errorf("task %s: %w: %q", t.ID, ErrUnknownSession, sessionID)
	case a != t.Current() || a.Status.Final():
		return a, fmt.Errorf("task %s: %w: session %s is attempt %d (%s), current is %s", t.ID, ErrStaleEvent, sessionID, a.Number, a.Status, t.CurrentAttemptID)
	}
	return a, nil
}

// Activity is what an executor event showed an attempt doing.
type Activity struct {
	Output     bool
	ToolInput  bool
	ToolCall   bool
	SideEffect bool
	Progress   *Progress
}

// Observe records an event of the current, open attempt: its facts, its
// progress, and the time of its first event.
func (t *Task) Observe(attemptID string, act Activity, now time.Time) error {
	a, err := t.current(attemptID)
	if err != nil {
		return err
	}
	if a.Facts.FirstEventAt.IsZero() {
		a.Facts.FirstEventAt = now
	}
	a.Facts.Output = a.Facts.Output || act.Output
	a.Facts.ToolInput = a.Facts.ToolInput || act.ToolInput
	a.Facts.ToolCall = a.Facts.ToolCall || act.ToolCall
	a.Facts.SideEffect = a.Facts.SideEffect || act.SideEffect
	if act.Progress != nil {
		t.Progress = *act.Progress
	}
	t.LastProgressAt, t.UpdatedAt = now, now
	return nil
}

// PutAttempt applies an attempt record reported by the agent that runs the
// task, as a control plane receives it. A new attempt must be the next by
// number, after a finalized one; a known one takes the record unless it is
// finalized, and then only an identical record is accepted. The task's
// phase is left to the caller.
func (t *Task) PutAttempt(a Attempt) error {
	if a.AttemptID == "" || !a.Status.Valid() {
		return fmt.Errorf("task %s: attempt record lacks an id or a known status", t.ID)
	}
	if t.Phase.Terminal() {
		return fmt.Errorf("task %s: %w", t.ID, ErrTerminal)
	}
	if old := t.Attempt(a.AttemptID); old != nil {
		if old.Number != a.Number {
			return fmt.Errorf("task %s: attempt %s is number %d, not %d", t.ID, a.AttemptID, old.Number, a.Number)
		}
		if old.Status.Final() {
			if !reflect.DeepEqual(*old, a) {
				return fmt.Errorf("task %s: %w: %s", t.ID, ErrFinalized, a.AttemptID)
			}
			return nil
		}
		*old = a
	} else {
		if a.Number != len(t.Attempts)+1 {
			return fmt.Errorf("task %s: attempt %s is number %d, want %d", t.ID, a.AttemptID, a.Number, len(t.Attempts)+1)
		}
		if c := t.Current(); c != nil && !c.Status.Final() {
			return fmt.Errorf("task %s: attempt %d is still %s", t.ID, c.Number, c.Status)
		}
		t.Attempts = append(t.Attempts, a)
		t.clearProgress()
	}
	t.project()
	return nil
}

// Valid reports whether s is a known attempt status.
func (s AttemptStatus) Valid() bool {
	switch s {
	case AttemptPending, AttemptRunning, AttemptCompleted, AttemptFailed, AttemptCancelled:
		return true
	}
	return false
}

// Outcome is how an attempt ended.
type Outcome struct {
	Status      AttemptStatus
	Error       *Error
	ExitCode    *int
	TimeoutUsed string
	Retry       *RetryDecision
	Egress      *Egress
}

func (a *Attempt) finalize(out Outcome, now time.Time) {
	a.Status, a.Error, a.ExitCode, a.CompletedAt = out.Status, out.Error, out.ExitCode, now
	if out.Egress != nil {
		a.Egress = out.Egress
	}
	if out.TimeoutUsed != "" {
		a.TimeoutUsed = out.TimeoutUsed
	}
	a.Retry = out.Retry
	if a.StartedAt.IsZero() {
		a.StartedAt = now
	}
}

// FinalizeAttempt ends the current, open attempt with out, whose status
// must be final. The task's phase is left to the caller.
func (t *Task) FinalizeAttempt(attemptID string, out Outcome, now time.Time) error {
	if !out.Status.Final() {
		return fmt.Errorf("task %s: %q is not a final attempt status", t.ID, out.Status)
	}
	a, err := t.current(attemptID)
	if err != nil {
		return err
	}
	a.finalize(out, now)
	t.UpdatedAt = now
	t.project()
	return nil
}

// ScheduleRetry finalizes the current attempt as failed with out (whose
// Retry says retried or continued after a delay), and opens the next
// attempt, pending until now+delay, with its model from the fallback
// chain; a continue's next attempt resumes the failed attempt's own
// session (see OwnSession). The task moves to
// executor_starting.
func (t *Task) ScheduleRetry(attemptID string, out Outcome, nextID string, models []string, now time.Time) (*Attempt, error) {
	if out.Status != AttemptFailed || out.Retry == nil || !out.Retry.Decision.Next() {
		return nil, fmt.Errorf("task %s: a next attempt follows a failed attempt whose decision is %q or %q", t.ID, DecisionRetried, DecisionContinued)
	}
	continues := 0
	if out.Retry.Decision == DecisionContinued {
		c := t.Current()
		if c == nil || c.AttemptID != attemptID {
			return nil, fmt.Errorf("task %s: %w: %s", t.ID, ErrNotCurrent, attemptID)
		}
		s := t.OwnSession(c)
		if s == nil {
			return nil, fmt.Errorf("task %s: attempt %d has no session to continue", t.ID, c.Number)
		}
		continues = s.Number
	}
	if err := checkTransition(t.Phase, PhaseExecutorStarting); err != nil {
		return nil, fmt.Errorf("task %s: %w", t.ID, err)
	}
	if t.Attempt(nextID) != nil || nextID == "" {
		return nil, fmt.Errorf("task %s: attempt id %q is empty or taken", t.ID, nextID)
	}
	a, err := t.current(attemptID)
	if err != nil {
		return nil, err
	}
	a.finalize(out, now)
	n := a.Number + 1
	t.Attempts = append(t.Attempts, Attempt{AttemptID: nextID, Number: n, Model: modelFor(models, n), Status: AttemptPending,
		NotBefore: now.Add(out.Retry.Delay.D()), Continues: continues})
	t.clearProgress()
	what := "retry"
	if continues > 0 {
		what = "continue"
	}
	if err := t.Transition(PhaseExecutorStarting, fmt.Sprintf("%s %d in %s", what, n, out.Retry.Delay.D()), now); err != nil {
		return nil, err
	}
	t.project()
	return t.Current(), nil
}

// BeginAttempt marks the current, pending attempt as running from now.
func (t *Task) BeginAttempt(attemptID string, now time.Time) error {
	a, err := t.current(attemptID)
	if err != nil {
		return err
	}
	if a.Status != AttemptPending {
		return fmt.Errorf("task %s: attempt %s is %s, not pending", t.ID, attemptID, a.Status)
	}
	a.Status, a.StartedAt = AttemptRunning, now
	t.LastProgressAt, t.UpdatedAt = now, now
	t.project()
	return nil
}

// project sets the task's top-level fields from its current attempt.
func (t *Task) project() {
	t.CurrentAttemptID, t.LastErrorCode, t.NextRetryAt = "", "", time.Time{}
	t.Denied = t.deniedCount()
	if c := t.Current(); c != nil {
		t.CurrentAttemptID = c.AttemptID
		if c.Error != nil {
			t.LastErrorCode = c.Error.Code
		} else if c.Number > 1 && t.Attempts[len(t.Attempts)-2].Error != nil {
			// A retry pending or running: the error that caused it.
			t.LastErrorCode = t.Attempts[len(t.Attempts)-2].Error.Code
		}
		if c.Status == AttemptPending {
			t.NextRetryAt = c.NotBefore
		}
	}
	t.Recoverable = t.Phase == PhaseRecoverableFailed
}

// Check verifies the task's invariants and returns the first one broken.
// Loading and the property tests use it.
func (t *Task) Check() error {
	if !t.Phase.Valid() {
		return fmt.Errorf("unknown phase %q", t.Phase)
	}
	for i, a := range t.Attempts {
		if a.Number != i+1 {
			return fmt.Errorf("attempt %d is numbered %d", i+1, a.Number)
		}
		if i < len(t.Attempts)-1 && !a.Status.Final() {
			return fmt.Errorf("attempt %d is %s but not current", a.Number, a.Status)
		}
		if a.Continues < 0 || a.Continues >= a.Number {
			return fmt.Errorf("attempt %d continues attempt %d, not an earlier one", a.Number, a.Continues)
		}
	}
	if t.Phase.Terminal() {
		if c := t.Current(); c != nil && !c.Status.Final() {
			return fmt.Errorf("task is %s but attempt %d is %s", t.Phase, c.Number, c.Status)
		}
	}
	p := *t
	p.project()
	if p.CurrentAttemptID != t.CurrentAttemptID || p.LastErrorCode != t.LastErrorCode ||
		!p.NextRetryAt.Equal(t.NextRetryAt) || p.Recoverable != t.Recoverable || p.Denied != t.Denied {
		return fmt.Errorf("top-level fields do not match the current attempt")
	}
	return nil
}
