package taskaction

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/state"
)

// TestMain checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Against a control plane on loopback: a cancel of a queued task ends it
// at once, and says the phase it ended in; a retry of a task that did not
// end recoverable_failed is refused by the control plane, its words
// returned.
func TestActionsAgainstAControlPlane(t *testing.T) {
	cp := servertest.Start(t, servertest.Options{})
	ctx := context.Background()
	v, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "count the files"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Cancel.Call(cp.Operator, ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if line := Cancel.Line(got); line != v.ID+": cancelled" {
		t.Errorf("a cancel of a queued task said %q, want %q", line, v.ID+": cancelled")
	}
	if _, err := Retry.Call(cp.Operator, ctx, v.ID); err == nil {
		t.Error("a retry of a cancelled task was not refused")
	}
	if _, err := Continue.Call(cp.Operator, ctx, "t-nosuchtask"); err == nil {
		t.Error("a continue of an unknown task was not refused")
	}
}

// The line of a task that goes on says what the action did.
func TestLines(t *testing.T) {
	t.Parallel()
	running := api.ViewOf(&state.Task{ID: "t-1", Phase: state.PhaseTurnStarted, Attempts: []state.Attempt{{Number: 1}}})
	if got, want := Cancel.Line(running), "t-1: cancel requested (attempt 1); its agent stops it now"; got != want {
		t.Errorf("cancel: %q, want %q", got, want)
	}
	queued := api.ViewOf(&state.Task{ID: "t-1", Phase: state.PhaseQueued, Attempts: []state.Attempt{{Number: 1}}})
	if got, want := Retry.Line(queued), "t-1: queued again for attempt 2; the next agent to claim it runs it"; got != want {
		t.Errorf("retry: %q, want %q", got, want)
	}
	queued.Attempts[0].SessionID, queued.Attempts[0].SessionPath = "s-1", "/sessions/s-1"
	queued.PersonRetry = &state.PersonRetry{Continue: true, Agent: "vm-7"}
	if got, want := Continue.Line(queued), "t-1: queued again for attempt 2, continuing attempt 1's session on agent vm-7"; got != want {
		t.Errorf("continue: %q, want %q", got, want)
	}
	parked := api.ViewOf(&state.Task{ID: "t-1", Phase: state.PhaseParked})
	if got, want := Continue.Line(parked), "t-1: parked: its agent resumes it at its next heartbeat"; got != want {
		t.Errorf("continue of a parked task: %q, want %q", got, want)
	}
	// What a task's id holds is shown inert.
	odd := api.ViewOf(&state.Task{ID: "t-\x1b[2J", Phase: state.PhaseFailed})
	if got := Cancel.Line(odd); strings.Contains(got, "\x1b") {
		t.Errorf("an escape reached the line: %q", got)
	}
}

// A budget raise below zero or of nothing is refused before anything is
// asked; a good one says the budget it raised to.
func TestBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tokens int64
		time   time.Duration
		want   string
	}{
		{-1, 0, "--add-tokens and --add-time cannot be below zero"},
		{0, -time.Second, "--add-tokens and --add-time cannot be below zero"},
		{0, 0, "say how much to add: --add-tokens N, --add-time D or both"},
	} {
		if _, err := Budget(tc.tokens, tc.time); err == nil || err.Error() != tc.want {
			t.Errorf("Budget(%d, %s) = %v, want %q", tc.tokens, tc.time, err, tc.want)
		}
	}
	a, err := Budget(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := api.ViewOf(&state.Task{ID: "t-1", Phase: state.PhaseParked, MaxTokens: 3000})
	if got := a.Line(v); !strings.HasPrefix(got, "t-1: budget raised to ") || !strings.HasSuffix(got, "; its agent continues it at its next heartbeat") {
		t.Errorf("budget: %q", got)
	}
}

// A reply says the request it answered and what the answer lets through,
// without the inbox's note of what happens if nobody answers.
func TestReplied(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	req := &state.ApprovalRequest{ID: "r-1", Kind: state.ApprovalCommand, Command: "rm -rf build", Cwd: "/work", Asked: now.Add(-time.Minute), Deadline: now.Add(time.Hour)}
	v := api.ViewOf(&state.Task{ID: "t-1", Phase: state.PhaseAwaitingReply, AwaitingReply: req, Reply: &state.Reply{RequestID: "r-1"}})
	var b strings.Builder
	Replied(&b, v, api.DecisionDecline, now)
	out := b.String()
	if !strings.HasPrefix(out, "t-1: declined request r-1; the agent takes the answer at its next heartbeat\n") || !strings.Contains(out, "rm -rf build") {
		t.Errorf("a decline said:\n%s", out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if !strings.HasPrefix(l, "  ") || strings.HasPrefix(strings.TrimSpace(l), "declined:") {
			t.Errorf("line %q: want an indented line of the request, not its deadline note", l)
		}
	}
	// An answer to another request than the one awaited says only that.
	v.Reply.RequestID = "r-0"
	b.Reset()
	Replied(&b, v, api.DecisionAccept, now)
	if b.String() != "t-1: accepted request r-0; the agent takes the answer at its next heartbeat\n" {
		t.Errorf("an answer to an older request said:\n%s", b.String())
	}
}
