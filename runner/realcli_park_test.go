package runner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// limitPrompt runs a command, then meets the account's usage limit on
// the model turn after it.
const limitPrompt = "Rotate the key, then report.\nmock: shell after=usage_limit"

// The real CLIs meet a usage limit that resets in a few seconds, after a
// tool ran: the task parks until the reset, then continues the same
// session once: the mock sees one follow-up turn, carrying the earlier
// conversation. Also when the agent stops while the task is parked and
// takes it up again (Recover, then Run, from what it had recorded).
func TestRealCLIsParkAtAUsageLimitAndContinueOnce(t *testing.T) {
	clis := []struct {
		name string
		exe  func(*testing.T, *mockmodel.Server) runner.Executor
	}{
		{"codex", func(t *testing.T, m *mockmodel.Server) runner.Executor {
			return runnertest.CodexExec(t, m, codex.Config{})
		}},
		{"claude", func(t *testing.T, m *mockmodel.Server) runner.Executor {
			// Claude Code waits out a 429's retry-after itself; one
			// longer than a second is a usage limit to park for here.
			return runnertest.ClaudeExec(t, m, claude.Config{LimitWait: time.Second})
		}},
	}
	for _, c := range clis {
		for _, restart := range []bool{false, true} {
			name := c.name
			if restart {
				name += "/restarted while parked"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				runnertest.LimitCLIs(t)
				mock := runnertest.StartMock(t)
				mock.UsageLimitReset = 4 * time.Second
				f := runnertest.NewCLIFixture(t, c.exe(t, mock), limitPrompt, []string{"gpt-5.5"})
				ctx, stop := context.WithCancelCause(context.Background())
				defer stop(nil)
				var park *state.Park
				asked := 0 // model requests when the task parked
				f.Rec.OnReport = func(r runner.Report) {
					if p, ok := r.Payload.(state.PhaseEvent); ok && p.Phase == state.PhaseParked {
						park, asked = p.Parked, len(mock.Requests())
						if restart {
							stop(runner.ErrShutdown)
						}
					}
				}
				if err := f.Runner.Run(ctx, f.Task); err != nil {
					t.Fatal(err)
				}
				if park == nil {
					t.Fatalf("the task did not park: %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
				}
				if restart {
					if f.Task.Phase != state.PhaseParked {
						t.Fatalf("stopped while parked, the task is %s", f.Task.Phase)
					}
					saved, err := json.Marshal(f.Task)
					must(t, err)
					f.Task = new(state.Task)
					must(t, json.Unmarshal(saved, f.Task))
					if !f.Runner.Recover(f.Task) {
						t.Fatal("Recover would not take the parked task up")
					}
					f.Run(t, context.Background())
				}
				if !f.Task.Phase.Terminal() || f.Task.Check() != nil {
					t.Fatalf("the task is %s", f.Task.Phase)
				}
				if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 {
					t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
				}
				a1, a2 := f.Task.Attempts[0], f.Task.Attempts[1]
				if a1.Error == nil || a1.Error.Code != state.CodeUsageLimit || a1.Retry.Decision != state.DecisionContinued {
					t.Fatalf("attempt 1: %s", runnertest.AttemptsText(f.Task))
				}
				resets := mock.LimitResets()
				if park.ResumesAt.Before(resets.Add(-time.Second)) || a2.StartedAt.Before(resets.Add(-time.Second)) {
					// Codex says the reset to the second.
					t.Errorf("parked until %s, attempt 2 started %s; the limit reset at %s", park.ResumesAt, a2.StartedAt, resets)
				}
				if a2.Continues != 1 || a2.SessionID != a1.SessionID {
					t.Errorf("attempt 2 continues %d, session %q; attempt 1's %q", a2.Continues, a2.SessionID, a1.SessionID)
				}
				reqs := mock.Requests()[asked:]
				if len(reqs) != 1 {
					t.Fatalf("%d model requests after the park, want the one follow-up turn", len(reqs))
				}
				turn := reqs[0]
				for _, w := range []struct {
					role mockmodel.Role
					text string
				}{{mockmodel.RoleUser, "Rotate the key, then report."}, {mockmodel.RoleUser, "The usage limit has reset."}} {
					if !turn.Said(w.role, w.text) {
						t.Errorf("the follow-up turn does not carry %s %q: %v", w.role, w.text, turn.Conversation)
					}
				}
				if turn.Scenario != mockmodel.ScenarioText || f.Task.Result == nil || f.Task.Result.Summary != mockmodel.HelloText {
					t.Errorf("the follow-up was answered %s; result %+v", turn.Scenario, f.Task.Result)
				}
			})
		}
	}
}
