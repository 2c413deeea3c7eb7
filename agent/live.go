package agent

import (
	"fmt"
	"slices"
	"time"

	"github.com/edgeagent/agent/runner"
)

// Live is the part of the configuration that may change while the agent
// runs (a reloaded config file). A change applies to attempts that start
// after it and to the next claim; running attempts keep what they started
// with.
type Live struct {
	// Executor must be of the same kind (Name) as the one the agent
	// started with: its health is tracked under that name.
	Executor      runner.Executor
	Models        []string
	Policy        runner.Policy
	Timeouts      runner.Timeouts
	MaxConcurrent int
	// MaxStarts is how many attempts start at once (0: as before).
	MaxStarts int
	// ApprovalTimeout is runner.Runner.ApprovalTimeout: 0 is the
	// default, negative waits for ever.
	ApprovalTimeout time.Duration
	// Budget is the budget of a task that sets none of its own (budgets).
	Budget runner.Budget
}

// liveOf is the live part of a checked configuration.
func liveOf(c Config) *Live {
	return &Live{Executor: c.Executor, Models: slices.Clone(c.Models), Policy: c.Policy, Timeouts: c.Timeouts,
		MaxConcurrent: c.MaxConcurrent, MaxStarts: c.MaxStarts, ApprovalTimeout: c.ApprovalTimeout, Budget: c.Budget}
}

// Reconfigure replaces the live configuration. It refuses an executor of
// another kind and a concurrency below one; the running configuration then
// stays as it was.
func (a *Agent) Reconfigure(l Live) error {
	cur := a.live.Load()
	switch {
	case l.Executor == nil:
		return fmt.Errorf("%w: no executor", ErrConfig)
	case l.Executor.Name() != cur.Executor.Name():
		return fmt.Errorf("%w: the executor changes from %s to %s; that needs a restart", ErrConfig, cur.Executor.Name(), l.Executor.Name())
	case l.MaxConcurrent < 1:
		return fmt.Errorf("%w: max concurrent tasks %d: want at least 1", ErrConfig, l.MaxConcurrent)
	}
	l.Models = slices.Clone(l.Models)
	if l.MaxStarts <= 0 {
		l.MaxStarts = cur.MaxStarts
	}
	a.starts.SetMax(l.MaxStarts)
	a.live.Store(&l)
	select { // more room may mean a claim now
	case a.kickClaim <- struct{}{}:
	default:
	}
	return nil
}
