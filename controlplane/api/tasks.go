package api

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/state"
)

// CreateTaskRequest is POST /v1/tasks.
type CreateTaskRequest struct {
	Title       string `json:"title,omitempty"`
	Prompt      string `json:"prompt"`
	Prefer      Prefer `json:"prefer,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	// Repo names the repository the task works on (see CheckRepoName),
	// and Base the ref its branch is made from (see CheckBase; empty: the
	// repository's HEAD). Only an agent that serves Repo claims the task.
	Repo string `json:"repo,omitempty"`
	Base string `json:"base,omitempty"`
	// NoCommit asks the agent to leave what the task changes in its
	// clone uncommitted, rather than commit each attempt's work on its
	// branch. Only with Repo.
	NoCommit bool `json:"no_commit,omitempty"`
	// Routing by capability: only an agent that advertises every one of
	// Requires claims the task (see state.Requirement).
	Requires []state.Requirement `json:"requires,omitempty"`
	// Subtasks: Labels are the task's KEY=VALUE labels, which the
	// control plane's delegation rules match on (see CheckLabels).
	Labels map[string]string `json:"labels,omitempty"`
	// Budgets: MaxTokens bounds the tokens all the task's attempts may use
	// together, MaxTime their wall time together ("30m"); zero: the
	// agent's default, if it has one. An attempt that passes either is
	// stopped and ends budget_exceeded, never retried.
	MaxTokens int64          `json:"max_tokens,omitempty"`
	MaxTime   state.Duration `json:"max_time,omitempty"`
	// EgressAllow, when set, narrows where the task's attempts may
	// connect to these of their agent's allowed hosts (HOST, HOST:PORT or
	// *.DOMAIN; see CheckEgressAllow); never wider. A subtask's is
	// narrowed to its parent's, and is its parent's when it names none.
	EgressAllow []string `json:"egress_allow,omitzero"`
	// OnSideEffect is the task's own on_side_effect: continue (its agent
	// continues a session cut after it had done something) or ask (it
	// stops there for a person); empty: the agent's setting. A subtask of
	// a parent that asks asks too.
	OnSideEffect state.OnSideEffect `json:"on_side_effect,omitempty"`
}

// MaxEgressAllow is how many hosts a task's own allow list may name.
const MaxEgressAllow = 64

// CheckEgressAllow refuses a task's allow list that is too long or names
// something that is not a host, in one line.
func CheckEgressAllow(list []string) error {
	if len(list) > MaxEgressAllow {
		return fmt.Errorf("%d hosts, more than %d", len(list), MaxEgressAllow)
	}
	_, err := egress.ParseRules(list)
	return err
}

// Prefer is what a task asks of the agent that runs it: the task's own
// state.Prefer. Empty is PreferAny.
type Prefer = state.Prefer

// The preferences.
const (
	PreferAny = state.PreferAny
	PreferGUI = state.PreferGUI
)

// ClaimRequest is POST /v1/tasks/claim.
type ClaimRequest struct {
	AgentID     string       `json:"agent_id"`
	Max         int          `json:"max"`
	HealthGrade health.Grade `json:"health_grade"`
	// RequestID is the agent's id for this claim. Asked again (its answer
	// was lost), the same claim gets the same grant rather than a new one.
	RequestID string `json:"request_id,omitempty"`
	// Repos are the repositories the agent serves, by name: a task that
	// names a repository goes only to an agent that lists it here.
	Repos []string `json:"repos,omitempty"`
	// WaitMS, when above zero, makes the claim a long poll: with nothing
	// claimable the control plane holds it until a task becomes claimable
	// for this agent or the wait ends (at most MaxClaimWait), and answers
	// then. Zero answers at once. A control plane from before long polls
	// ignores it and answers at once.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// Routing by capability: what the agent advertises, as in its
	// heartbeats; a task's requirements are matched against these and
	// Repos, and its label requirements against the labels a person
	// granted the agent. A claim without them (an agent from before
	// routing) meets no requirement. Labels are what the agent says of
	// itself: kept as self-described, they route nothing.
	Capabilities
	Labels map[string]string `json:"labels,omitempty"`
	// Running lists the tasks the agent runs: the claim is then also the
	// channel their cancels come on. The control plane answers it, held
	// or not, as soon as one of them is to stop (CancelOrders, Stop),
	// rather than at the agent's next heartbeat; with Max 0 (no room) it
	// holds the claim for that alone. At most MaxEventsPerBatch.
	Running []string `json:"running,omitempty"`
}

// MaxClaimWait is the longest a control plane holds a claim: a longer
// wait_ms is taken as this. It is well under the agent's HTTP timeout
// (30 s), the lease (60 s) and the time after which a silent agent is
// offline (three heartbeat intervals, 30 s).
const MaxClaimWait = 20 * time.Second

// ClaimAnswerWindow is how long after a grant its answer may still reach
// the agent: an agent gives up on a request after 30 s (its HTTP
// timeout), and a few seconds more cover the clocks and a heartbeat. A
// control plane takes back a grant the agent does not run only once it
// is older than this: a slow answer still on its way would otherwise
// start a task under a lease already taken back.
const ClaimAnswerWindow = 35 * time.Second

// ClaimResponse grants tasks, each under a lease; empty when none.
type ClaimResponse struct {
	Tasks []Claimed `json:"tasks"`
	// WaitMS is the wait the control plane applied to this claim when it
	// had nothing to grant: the claim's wait_ms, capped. Absent when the
	// claim asked none, and from a control plane from before long polls:
	// an agent that finds it absent claims at its own pace, as before.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// CancelOrders and Stop are for the tasks the claim listed as
	// running (ClaimRequest.Running): those to stop now, as a heartbeat's
	// answer says them. A claim answered with orders grants nothing.
	CancelOrders []CancelOrder `json:"cancel_orders,omitempty"`
	Stop         []StopOrder   `json:"stop,omitempty"`
}

// Claimed is one task granted to an agent, and its lease. The lease is
// sent once, here: the task carries none (its lease field is absent), and
// the agent puts this one in the task it keeps.
type Claimed struct {
	Task  state.Task  `json:"task"`
	Lease state.Lease `json:"lease"`
	// Subtasks: TaskToken is the task's own credential for its
	// executor (see TaskTokenPrefix), good while the task holds this
	// lease. The agent never stores or logs it.
	TaskToken string `json:"task_token,omitempty"`
}

// ReleaseRequest is POST /v1/tasks/release: claimed tasks an agent will not
// run (a grant larger than it asked for) go back to the queue.
type ReleaseRequest struct {
	AgentID string   `json:"agent_id"`
	TaskIDs []string `json:"task_ids"`
}

// BudgetRequest is POST /v1/tasks/{id}/budget: a person raises the budget
// of a task parked at it, by AddTokens tokens and AddTime of wall time
// (each zero or more, one of them more), and its session continues.
type BudgetRequest struct {
	AddTokens int64          `json:"add_tokens,omitempty"`
	AddTime   state.Duration `json:"add_time,omitempty"`
}

// ReplyRequest is POST /v1/tasks/{id}/reply: a person's answer to the
// task's approval request.
type ReplyRequest struct {
	// RequestID names the request answered; empty is the one the task
	// awaits now.
	RequestID string   `json:"request_id"`
	Decision  Decision `json:"decision"`
}

// Decision is a person's answer to an approval request: the task's own
// state.Answer.
type Decision = state.Answer

// The decisions.
const (
	DecisionAccept  = state.AnswerAccept
	DecisionDecline = state.AnswerDecline
)

// TaskOrder is the order GET /v1/tasks lists tasks in (?order).
type TaskOrder string

// The orders.
const (
	// OrderOldest lists the oldest first, by when each was submitted,
	// then by id: the default, which scripts read.
	OrderOldest TaskOrder = "oldest"
	// OrderNewest lists the newest first: the reverse.
	OrderNewest TaskOrder = "newest"
)

// CheckOrder refuses an order that is none of the orders ("" is
// OrderOldest).
func CheckOrder(o TaskOrder) error {
	switch o {
	case "", OrderOldest, OrderNewest:
		return nil
	}
	return fmt.Errorf("order %q: want oldest or newest", state.Ellipsize(string(o), 40))
}

// NeedsPerson reports whether t waits on a person: a question to answer
// (awaiting_reply), or a stop a person decides on (recoverable_failed).
// Lists for people put these on top.
func NeedsPerson(t *state.Task) bool {
	return t.Phase == state.PhaseAwaitingReply || t.Phase == state.PhaseRecoverableFailed
}

// NeedsPersonPhases are the phases of the tasks NeedsPerson reports, the
// question first.
var NeedsPersonPhases = []state.Phase{state.PhaseAwaitingReply, state.PhaseRecoverableFailed}

// ForPeople orders tasks as lists for people show them: those that need
// a person on top (a question first, then a stop to decide on), then
// the newest first (by when each was submitted, then by id).
func ForPeople(a, b *state.Task) int {
	rank := func(t *state.Task) int {
		if i := slices.Index(NeedsPersonPhases, t.Phase); i >= 0 {
			return i
		}
		return len(NeedsPersonPhases)
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
}

// TaskFilter selects tasks in GET /v1/tasks. Empty fields select all.
type TaskFilter struct {
	Phase state.Phase // the phase
	Agent string      // the agent holding the lease
	Repo  string      // the repository
	Live  bool        // only the tasks that have not ended
	// Title selects the tasks whose title holds it, in any case.
	Title string
}

// Match reports whether t is selected.
func (f TaskFilter) Match(t *state.Task) bool {
	return (f.Phase == "" || t.Phase == f.Phase) &&
		(f.Agent == "" || t.Lease != nil && t.Lease.AgentID == f.Agent) &&
		(f.Repo == "" || t.Repo == f.Repo) &&
		(!f.Live || !t.Phase.Terminal()) &&
		(f.Title == "" || TitleHas(t.Title, f.Title))
}

// TitleHas reports whether title holds search, in any case: the title
// search of GET /v1/tasks (?title) and of the console.
func TitleHas(title, search string) bool {
	return strings.Contains(strings.ToLower(title), strings.ToLower(search))
}

// Values are f as query parameters.
func (f TaskFilter) Values() url.Values {
	v := url.Values{}
	if f.Phase != "" {
		v.Set("phase", string(f.Phase))
	}
	if f.Agent != "" {
		v.Set("agent", f.Agent)
	}
	if f.Repo != "" {
		v.Set("repo", f.Repo)
	}
	if f.Live {
		v.Set("live", "true")
	}
	if f.Title != "" {
		v.Set("title", f.Title)
	}
	return v
}
