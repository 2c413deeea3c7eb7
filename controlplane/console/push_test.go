package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/state"
)

// A task's page says where its branch was pushed and links to its pull
// request; a replay's attempt says where the work before it is kept.
func TestATasksPageShowsItsPushAndPullRequest(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	a := newAgent(t, cp, "agent-1")
	id := submit(t, cp, "footer")
	a.claim()
	a.start(id)
	now := time.Now()
	first := state.Attempt{AttemptID: id + "-a1", Number: 1, Status: state.AttemptFailed, StartedAt: now.Add(-time.Minute), CompletedAt: now.Add(-30 * time.Second),
		Error: &state.Error{Code: state.CodeNetwork}, Retry: &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateAllowed, Decision: state.DecisionRetried}}
	second := state.Attempt{AttemptID: id + "-a2", Number: 2, Status: state.AttemptCompleted, StartedAt: now.Add(-20 * time.Second), CompletedAt: now,
		KeptRef: "refs/agent/kept/" + id + "/attempt-1"}
	a.send(id, state.EventAttempt, first)
	a.send(id, state.EventAttempt, second)
	a.send(id, state.EventPhase, state.PhaseEvent{Phase: state.PhaseCompleted})
	a.send(id, state.EventComplete, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "all green", Attempts: []state.Attempt{first, second},
		Changes: &state.Changes{Repo: "r", Branch: "agent/" + id, Base: "main", BaseCommit: "0123456789", Head: "abcdef0123",
			Commits: []state.Commit{{SHA: "abcdef0123", Subject: "fix it"}}, Files: 2, Insertions: 10, Deletions: 3,
			Pushed:      &state.Push{Remote: "origin", Branch: "agent/" + id, Commit: "abcdef0123", At: now},
			PullRequest: "https://github.com/octo/app/pull/7"}})
	_, body := b.get("/tasks/" + id)
	for _, want := range []string{
		`<p class="push">pushed agent/` + id + ` to origin (abcdef0)</p>`,
		`<p id="pull-request"><a href="https://github.com/octo/app/pull/7" rel="noopener noreferrer">Pull request</a>: <span class="address">https://github.com/octo/app/pull/7</span></p>`,
		`attempt 1&#39;s work kept on refs/agent/kept/` + id + `/attempt-1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the task's page lacks %s", want)
		}
	}
}
