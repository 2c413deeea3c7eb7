package taskview

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/state"
)

// TestMain checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sgr matches the colour and bold sequences a view writes.
var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// testHint makes commands as a hint from a known control plane would:
// no placeholders to explain.
type testHint struct{ placeholders string }

func (testHint) Tasks(verb, id, args string) string {
	return strings.TrimSpace("agent tasks "+verb+" "+id+" "+args) + " --control-plane http://cp"
}

func (h testHint) Placeholders() string { return h.placeholders }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// colourTasks are a completed, a failed, a recoverable_failed and a
// running task, with an attempt each.
func colourTasks(t *testing.T) []*state.Task {
	t.Helper()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	mk := func(id string, end state.Phase, status state.AttemptStatus, retry *state.RetryDecision) *state.Task {
		task := state.NewTask(id, "p", now)
		task.Title = "task " + id
		must(t, task.Transition(state.PhaseClaimed, "", now))
		_, err := task.StartFirstAttempt(id+"-a1", []string{"model-a"}, now)
		must(t, err)
		must(t, task.Transition(state.PhaseTurnStarted, "", now))
		if status.Final() {
			out := state.Outcome{Status: status, Retry: retry}
			if status != state.AttemptCompleted {
				out.Error = &state.Error{Code: state.CodeNetwork, Message: "reset"}
			}
			must(t, task.FinalizeAttempt(id+"-a1", out, now.Add(time.Second)))
			must(t, task.Transition(end, "", now.Add(time.Second)))
		}
		return task
	}
	blocked := &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateSideEffect, Decision: state.DecisionStopped}
	permanent := &state.RetryDecision{Decision: state.DecisionStopped}
	return []*state.Task{
		mk("t-done", state.PhaseCompleted, state.AttemptCompleted, nil),
		mk("t-failed", state.PhaseFailed, state.AttemptFailed, permanent),
		mk("t-blocked", state.PhaseRecoverableFailed, state.AttemptFailed, blocked),
		mk("t-running", "", state.AttemptRunning, nil),
	}
}
