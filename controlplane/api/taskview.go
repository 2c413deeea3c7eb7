package api

import (
	"math"
	"time"

	"github.com/edgeagent/agent/internal/utc"
	"github.com/edgeagent/agent/state"
)

// TaskView is a task as GET /v1/tasks and /v1/tasks/{id} show it, and as
// every answer that shows a task carries it: the wire's own shape. Its
// JSON is a file format that agents, scripts and other control planes
// read (testdata/taskview.golden.json is the guard): the task's fields,
// each as state.Task says it, in the order state.Task has them, then
// what the view adds. ViewOf makes one from the domain's task, and Task
// gives the domain's task back.
type TaskView struct {
	ID               string                 `json:"id"`
	Title            string                 `json:"title,omitempty"`
	Prompt           string                 `json:"prompt"`
	Prefer           state.Prefer           `json:"prefer,omitempty"`
	MaxAttempts      int                    `json:"max_attempts,omitempty"`
	Repo             string                 `json:"repo,omitempty"`
	Base             string                 `json:"base,omitempty"`
	NoCommit         bool                   `json:"no_commit,omitempty"`
	Requires         []state.Requirement    `json:"requires,omitempty"`
	Unroutable       string                 `json:"unroutable,omitempty"`
	Labels           map[string]string      `json:"labels,omitempty"`
	Parent           string                 `json:"parent,omitempty"`
	Depth            int                    `json:"depth,omitempty"`
	Children         []string               `json:"children,omitempty"`
	Delegation       *state.Delegation      `json:"delegation,omitempty"`
	OnSideEffect     state.OnSideEffect     `json:"on_side_effect,omitempty"`
	MaxTokens        int64                  `json:"max_tokens,omitempty"`
	MaxTime          state.Duration         `json:"max_time,omitempty"`
	EgressAllow      []string               `json:"egress_allow,omitzero"`
	Root             string                 `json:"root,omitempty"`
	TreeDeadline     time.Time              `json:"tree_deadline,omitzero"`
	BudgetStop       string                 `json:"budget_stop,omitempty"`
	Phase            state.Phase            `json:"phase"`
	PhaseReason      string                 `json:"phase_reason,omitempty"`
	PhaseBefore      state.Phase            `json:"phase_before,omitempty"`
	PhasesSeen       []state.Phase          `json:"phases_seen,omitempty"`
	Parked           *state.Park            `json:"parked,omitempty"`
	CreatedAt        time.Time              `json:"created_at"`
	UpdatedAt        time.Time              `json:"updated_at"`
	LastProgressAt   time.Time              `json:"last_progress_at,omitzero"`
	LastActivityAt   time.Time              `json:"last_activity_at,omitzero"`
	Liveness         string                 `json:"liveness,omitempty"`
	Progress         state.Progress         `json:"progress,omitzero"`
	Result           *state.Result          `json:"result,omitempty"`
	LastErrorCode    state.ErrorCode        `json:"last_error_code,omitempty"`
	Recoverable      bool                   `json:"recoverable"`
	NextRetryAt      time.Time              `json:"next_retry_at,omitzero"`
	CurrentAttemptID string                 `json:"current_attempt_id,omitempty"`
	Attempts         []state.Attempt        `json:"attempts"`
	Lease            *state.Lease           `json:"lease,omitempty"`
	CancelRequested  bool                   `json:"cancel_requested,omitempty"`
	CancelReason     string                 `json:"cancel_reason,omitempty"`
	CancelAt         time.Time              `json:"cancel_at,omitzero"`
	PersonRetry      *state.PersonRetry     `json:"person_retry,omitempty"`
	AwaitingReply    *state.ApprovalRequest `json:"awaiting_reply,omitempty"`
	Reply            *state.Reply           `json:"reply,omitempty"`
	ApprovalExpired  *state.ApprovalRequest `json:"approval_expired,omitempty"`
	Denied           int                    `json:"denied,omitempty"`
	Diff             state.DiffRef          `json:"diff,omitzero"`
	Output           []state.AttemptOutput  `json:"output,omitempty"`

	// What the view adds to the task.

	ProgressCard []state.Step `json:"progress_card"`
	// OutputCutLines and OutputCutBytes add up what the control plane cut
	// of the task's forwarded output, every attempt's (see Task.Output).
	OutputCutLines int64 `json:"output_cut_lines"`
	OutputCutBytes int64 `json:"output_cut_bytes"`
	// Usage is what the task's attempts spent so far together (a running
	// attempt's wall time up to now).
	Usage state.TaskUsage `json:"usage"`
}

// ViewOf is t as shown, by the control plane and by the agent's own
// commands alike: the task, its progress card, and what was cut of its
// forwarded output. It shares t's slices: copy t first if it goes on
// changing.
func ViewOf(t *state.Task) TaskView {
	v := TaskView{
		ID:               t.ID,
		Title:            t.Title,
		Prompt:           t.Prompt,
		Prefer:           t.Prefer,
		MaxAttempts:      t.MaxAttempts,
		Repo:             t.Repo,
		Base:             t.Base,
		NoCommit:         t.NoCommit,
		Requires:         t.Requires,
		Unroutable:       t.Unroutable,
		Labels:           t.Labels,
		Parent:           t.Parent,
		Depth:            t.Depth,
		Children:         t.Children,
		Delegation:       t.Delegation,
		OnSideEffect:     t.OnSideEffect,
		MaxTokens:        t.MaxTokens,
		MaxTime:          t.MaxTime,
		EgressAllow:      t.EgressAllow,
		Root:             t.Root,
		TreeDeadline:     t.TreeDeadline,
		BudgetStop:       t.BudgetStop,
		Phase:            t.Phase,
		PhaseReason:      t.PhaseReason,
		PhaseBefore:      t.PhaseBefore,
		PhasesSeen:       t.PhasesSeen,
		Parked:           t.Parked,
		CreatedAt:        t.CreatedAt,
		UpdatedAt:        t.UpdatedAt,
		LastProgressAt:   t.LastProgressAt,
		LastActivityAt:   t.LastActivityAt,
		Liveness:         t.Liveness,
		Progress:         t.Progress,
		Result:           t.Result,
		LastErrorCode:    t.LastErrorCode,
		Recoverable:      t.Recoverable,
		NextRetryAt:      t.NextRetryAt,
		CurrentAttemptID: t.CurrentAttemptID,
		Attempts:         t.Attempts,
		Lease:            t.Lease,
		CancelRequested:  t.CancelRequested,
		CancelReason:     t.CancelReason,
		CancelAt:         t.CancelAt,
		PersonRetry:      t.PersonRetry,
		AwaitingReply:    t.AwaitingReply,
		Reply:            t.Reply,
		ApprovalExpired:  t.ApprovalExpired,
		Denied:           t.Denied,
		Diff:             t.Diff,
		Output:           t.Output,
		ProgressCard:     state.ProgressCard(t),
		Usage:            t.Usage(utc.Now()),
	}
	for _, o := range t.Output {
		// Held at the most an int64 holds: an agent's counts of what it
		// withheld may be as large as it says.
		v.OutputCutLines = min(v.OutputCutLines, math.MaxInt64-max(o.CutLines, 0)) + max(o.CutLines, 0)
		v.OutputCutBytes = min(v.OutputCutBytes, math.MaxInt64-max(o.CutBytes, 0)) + max(o.CutBytes, 0)
	}
	return v
}

// Task is the domain's task that v shows, for a client that reads a
// task's phase, attempts and the rest with the domain's methods. It
// shares v's slices.
func (v *TaskView) Task() *state.Task {
	return &state.Task{
		ID:               v.ID,
		Title:            v.Title,
		Prompt:           v.Prompt,
		Prefer:           v.Prefer,
		MaxAttempts:      v.MaxAttempts,
		Repo:             v.Repo,
		Base:             v.Base,
		NoCommit:         v.NoCommit,
		Requires:         v.Requires,
		Unroutable:       v.Unroutable,
		Labels:           v.Labels,
		Parent:           v.Parent,
		Depth:            v.Depth,
		Children:         v.Children,
		Delegation:       v.Delegation,
		OnSideEffect:     v.OnSideEffect,
		MaxTokens:        v.MaxTokens,
		MaxTime:          v.MaxTime,
		EgressAllow:      v.EgressAllow,
		Root:             v.Root,
		TreeDeadline:     v.TreeDeadline,
		BudgetStop:       v.BudgetStop,
		Phase:            v.Phase,
		PhaseReason:      v.PhaseReason,
		PhaseBefore:      v.PhaseBefore,
		PhasesSeen:       v.PhasesSeen,
		Parked:           v.Parked,
		CreatedAt:        v.CreatedAt,
		UpdatedAt:        v.UpdatedAt,
		LastProgressAt:   v.LastProgressAt,
		LastActivityAt:   v.LastActivityAt,
		Liveness:         v.Liveness,
		Progress:         v.Progress,
		Result:           v.Result,
		LastErrorCode:    v.LastErrorCode,
		Recoverable:      v.Recoverable,
		NextRetryAt:      v.NextRetryAt,
		CurrentAttemptID: v.CurrentAttemptID,
		Attempts:         v.Attempts,
		Lease:            v.Lease,
		CancelRequested:  v.CancelRequested,
		CancelReason:     v.CancelReason,
		CancelAt:         v.CancelAt,
		PersonRetry:      v.PersonRetry,
		AwaitingReply:    v.AwaitingReply,
		Reply:            v.Reply,
		ApprovalExpired:  v.ApprovalExpired,
		Denied:           v.Denied,
		Diff:             v.Diff,
		Output:           v.Output,
	}
}
