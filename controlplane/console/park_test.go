package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/state"
)

// park parks task id at a limit: its first attempt failed, the next
// pending, the task parked with p.
func (a *fakeAgent) park(id string, code state.ErrorCode, p state.Park) {
	a.t.Helper()
	now := time.Now()
	a.send(id, state.EventAttempt, state.Attempt{AttemptID: id + "-a1", Number: 1, MaxAttempts: 3, Status: state.AttemptFailed,
		SessionID: "sess-0001", SessionPath: "/sessions/0001.jsonl", StartedAt: now.Add(-time.Minute), CompletedAt: now,
		Error: &state.Error{Code: code, Message: "the limit"}, Retry: &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateAllowed, Decision: state.DecisionContinued}})
	a.send(id, state.EventPhase, state.PhaseEvent{Phase: state.PhaseParked, Reason: "parked", Parked: &p})
	a.send(id, state.EventAttempt, state.Attempt{AttemptID: id + "-a2", Number: 2, MaxAttempts: 4, Status: state.AttemptPending, Continues: 1, NotBefore: p.ResumesAt})
}

// A parked task's card says what it waits for; one parked at a usage
// limit offers Continue (now), one parked at its budget the budget form,
// which raises it; a bad figure in the form is a 400 with its reason.
func TestParkedTaskPages(t *testing.T) {
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	csrf := b.csrf()
	a := newAgent(t, cp, "agent-1")
	limited, spent := submit(t, cp, "limited"), submit(t, cp, "spent")
	for _, id := range []string{limited, spent} {
		if got := a.claim(); got != id {
			t.Fatalf("claimed %s, want %s", got, id)
		}
		a.start(id)
	}
	a.park(limited, state.CodeUsageLimit, state.Park{Reason: state.ParkUsageLimit, ResumesAt: time.Now().Add(time.Hour), Since: time.Now()})
	a.park(spent, state.CodeBudgetExceeded, state.Park{Reason: state.ParkBudget, Since: time.Now(), MaxTokens: 500})

	_, body := b.get("/tasks/" + limited)
	for _, want := range []string{`<form id="continue"`, "waiting for the limit to reset (usage_limit); resumes at ", state.ParkedStep, "resumes in "} {
		if !strings.Contains(body, want) {
			t.Errorf("a task parked at a usage limit: its page lacks %q", want)
		}
	}
	_, body = b.get("/tasks/" + spent)
	if !strings.Contains(body, `<form id="budget"`) || strings.Contains(body, `<form id="continue"`) || !strings.Contains(body, "waiting for a person to raise its budget (500 tokens reached)") {
		t.Errorf("a task parked at its budget: want the budget form alone, and what it waits for\n%s", body)
	}
	resp, body := b.post("/tasks/"+spent+"/budget", url.Values{"csrf": {csrf}, "add_tokens": {"lots"}}, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `tokens to add &#34;lots&#34;: want a whole number, 0 or more`) {
		t.Errorf("a bad figure: %s\n%s", resp.Status, body)
	}
	resp, _ = b.post("/tasks/"+spent+"/budget", url.Values{"csrf": {csrf}, "add_tokens": {"1000"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("raise the budget: %s", resp.Status)
	}
	v, _ := cp.Operator.Task(t.Context(), spent)
	if v.MaxTokens != 1500 || v.Parked == nil || v.Parked.ContinueAsked.IsZero() {
		t.Errorf("after the raise: budget %d, %+v", v.MaxTokens, v.Parked)
	}
	if resp, _ := b.post("/tasks/"+limited+"/continue", url.Values{"csrf": {csrf}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("continue a parked task: %s", resp.Status)
	}
	if v, _ := cp.Operator.Task(t.Context(), limited); v.Phase != state.PhaseParked || v.Parked.ContinueAsked.IsZero() {
		t.Errorf("after continue: %s %+v", v.Phase, v.Parked)
	}
}
