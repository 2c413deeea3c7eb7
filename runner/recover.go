package runner

import (
	"fmt"

	"github.com/edgeagent/agent/state"
)

// Recover takes up a task that an earlier run of the agent left in a
// running phase, as a crash leaves it. An attempt that was running is
// finalized as failed with code agent_restart; the retry policy and the
// safety gate then decide between a replay, a continue of its session
// and recoverable_failed,
// and the decision is recorded on the attempt. Every change is reported to
// the sink. Recover reports whether Run should take the task up: a task
// with a new or pending attempt, claimed without one, or claimed for a
// person's retry whose attempt had not begun.
func (r *Runner) Recover(task *state.Task) (resume bool) {
	c := task.Current()
	switch {
	case task.Phase.Terminal() || task.Phase == state.PhaseQueued:
		return false
	case c == nil || c.Status == state.AttemptPending || task.PersonRetryDue():
		return true
	case c.Status.Final():
		// The attempt ended but the task did not: the crash came between.
		r.end(task, state.PhaseRecoverableFailed, fmt.Sprintf("the agent restarted after attempt %d ended %s", c.Number, c.Status))
		return false
	}
	v := verdict{Class: classInterrupted, Code: state.CodeAgentRestart, Message: "the agent restarted during the attempt"}
	judged := *c
	judged.Facts = task.SessionFacts(c)
	judged.Number -= stoppedBefore(task, c)
	d := r.Policy.decide(v, &judged, r.firstEventRetried(task, c), r.canContinue(task, c))
	out := state.Outcome{Status: state.AttemptFailed, Error: &state.Error{Code: v.Code, Message: v.Message}, Retry: &d}
	return r.conclude(task, c, out, state.PhaseRecoverableFailed, notRetried(v, d), nil) != nil
}
