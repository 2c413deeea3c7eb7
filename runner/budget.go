package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/edgeagent/agent/state"
)

// Budget bounds what all of a task's attempts may spend together: the
// tokens their CLIs report, and their wall time (each attempt's, from its
// start to its end). Zero is no bound. An attempt that passes it is
// stopped, as a cancel stops it, and ends budget_exceeded, never retried.
type Budget struct {
	MaxTokens int64
	MaxTime   time.Duration
}

// BudgetOf is the budget task runs under: each bound the task sets, else
// def's.
func BudgetOf(task *state.Task, def Budget) Budget {
	b := def
	if task.MaxTokens > 0 {
		b.MaxTokens = task.MaxTokens
	}
	if task.MaxTime > 0 {
		b.MaxTime = task.MaxTime.D()
	}
	return b
}

// errBudget is the cause an attempt over its task's budget is stopped
// with.
var errBudget = errors.New("budget exceeded")

// spentBefore is what the attempts before a spent together.
func spentBefore(task *state.Task, a *state.Attempt) state.TaskUsage {
	before := state.Task{Attempts: task.Attempts[:a.Number-1]}
	return before.Usage(a.StartedAt)
}

// left says why nothing is left of the budget for another attempt,
// after the attempts before spent what they did; "" while some is.
func (b Budget) left(spent state.TaskUsage) string {
	switch {
	case b.MaxTokens > 0 && spent.TotalTokens >= b.MaxTokens:
		return fmt.Sprintf("the earlier attempts used %s tokens of the budget of %s", state.Tokens(spent.TotalTokens), state.Tokens(b.MaxTokens))
	case b.MaxTime > 0 && spent.WallTime.D() >= b.MaxTime:
		return fmt.Sprintf("the earlier attempts ran %s of the budget of %s", state.Compact(spent.WallTime.D()), b.MaxTime)
	}
	return ""
}

// overTokens says how the attempts passed the token budget, with this
// one's tokens; "" while they have not.
func (b Budget) overTokens(spent state.TaskUsage, this state.Usage) string {
	total := spent.TotalTokens + this.TotalTokens
	if b.MaxTokens <= 0 || total <= b.MaxTokens {
		return ""
	}
	if spent.TotalTokens == 0 {
		return fmt.Sprintf("%s tokens used, over the budget of %s", state.Tokens(total), state.Tokens(b.MaxTokens))
	}
	return fmt.Sprintf("%s tokens used (%s by this attempt), over the budget of %s", state.Tokens(total), state.Tokens(this.TotalTokens), state.Tokens(b.MaxTokens))
}

// timeLeft is what is left of the wall-time budget after spent, and
// whether there is a bound at all.
func (b Budget) timeLeft(spent state.TaskUsage) (time.Duration, bool) {
	if b.MaxTime <= 0 {
		return 0, false
	}
	return max(b.MaxTime-spent.WallTime.D(), 0), true
}

// overTime says how the attempts ran out the wall-time budget.
func (b Budget) overTime(spent state.TaskUsage) string {
	if spent.WallTime == 0 {
		return fmt.Sprintf("ran out the time budget of %s", b.MaxTime)
	}
	return fmt.Sprintf("ran out the time budget of %s (the earlier attempts ran %s)", b.MaxTime, state.Compact(spent.WallTime.D()))
}
