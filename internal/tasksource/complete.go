package tasksource

import (
	"strings"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Candidate is a task a shell may complete an id to, with a line that
// says it (its phase and title, shown inert).
type Candidate struct{ ID, Desc string }

// Candidates are the tasks of dataDir whose id starts with prefix and that
// want accepts (nil: every task), for the completion of a command's task
// id. They come from the data directory alone: completion runs at every
// Tab, and must not wait on a network or show a token to one. A directory
// that cannot be read has none.
func Candidates(dataDir, prefix string, want func(*state.Task) bool) []Candidate {
	tasks, _ := datadir.LoadTasks(dataDir)
	var out []Candidate
	for _, t := range tasks {
		if strings.HasPrefix(t.ID, prefix) && (want == nil || want(t)) {
			out = append(out, Candidate{t.ID, taskview.Visible(string(t.Phase) + " " + state.Ellipsize(t.Title, 50))})
		}
	}
	return out
}

// The tasks each command applies to, for its completion.
var (
	// Unended: cancel.
	Unended = func(t *state.Task) bool { return !t.Phase.Terminal() }
	// Recoverable: retry.
	Recoverable = func(t *state.Task) bool { return t.Phase == state.PhaseRecoverableFailed }
	// AwaitingReply: reply.
	AwaitingReply = func(t *state.Task) bool { return t.Phase == state.PhaseAwaitingReply }
	// Continuable: continue.
	Continuable = func(t *state.Task) bool { return taskview.Continuable(t) || t.Phase == state.PhaseParked }
	// ParkedAtBudget: budget.
	ParkedAtBudget = func(t *state.Task) bool {
		return t.Phase == state.PhaseParked && t.Parked != nil && t.Parked.Reason == state.ParkBudget
	}
	// Pushable: push, a completed task on a repository.
	Pushable = func(t *state.Task) bool { return t.Phase == state.PhaseCompleted && t.Repo != "" }
)
