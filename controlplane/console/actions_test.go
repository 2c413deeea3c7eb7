package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/state"
)

// fail ends task id's first attempt failed after a side effect, with a
// session the executor can resume: the gate stops it recoverable_failed.
func (a *fakeAgent) fail(id string) {
	a.t.Helper()
	now := time.Now()
	a.send(id, state.EventAttempt, state.Attempt{AttemptID: id + "-a1", Number: 1, MaxAttempts: 3, Status: state.AttemptFailed, Model: "gpt-test",
		SessionID: "sess-0001", SessionPath: "/sessions/0001.jsonl", StartedAt: now.Add(-time.Minute), CompletedAt: now,
		Error: &state.Error{Code: state.CodeNetwork, Message: "connection reset"}, Facts: state.Facts{SideEffect: true, FirstEventAt: now},
		Retry: &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateSideEffect, Decision: state.DecisionStopped}})
	a.send(id, state.EventPhase, state.PhaseEvent{Phase: state.PhaseRecoverableFailed, Reason: "network after a side effect"})
}

// A person's actions through the console change the task as the API
// would, and a refused one shows the API's message and status.
func TestTaskActions(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	csrf := b.csrf()
	act := func(id, action string) (*http.Response, string) {
		return b.post("/tasks/"+id+"/"+action, url.Values{"csrf": {csrf}}, nil)
	}

	queued := submit(t, cp, "queued")
	_, body := b.get("/tasks/" + queued)
	if !strings.Contains(body, `<form id="cancel"`) || strings.Contains(body, `<form id="retry"`) || strings.Contains(body, `<form id="continue"`) {
		t.Errorf("a queued task's page: want form#cancel alone\n%s", body)
	}
	resp, body := act(queued, "retry")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, `id="action-error"`) || !strings.Contains(body, "only a recoverable_failed task can be retried") {
		t.Errorf("retry a queued task: %s, want 409 with the API's message in p#action-error\n%s", resp.Status, body)
	}
	resp, _ = act(queued, "cancel")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks/"+queued || phaseOf(t, cp, queued) != state.PhaseCancelled {
		t.Errorf("cancel a queued task: %s to %q, task %s", resp.Status, resp.Header.Get("Location"), phaseOf(t, cp, queued))
	}
	if resp, _ := act("t-nope", "cancel"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("cancel a task there is none of: %s, want 404", resp.Status)
	}
	if resp, _ := act(queued, "explode"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an action there is none of: %s, want 404", resp.Status)
	}

	a := newAgent(t, cp, "agent-1")
	running := submit(t, cp, "running")
	a.claim()
	a.start(running)
	if resp, _ := act(running, "cancel"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel a running task: %s", resp.Status)
	}
	v, _ := cp.Operator.Task(t.Context(), running)
	if !v.CancelRequested {
		t.Error("cancel a running task: not requested")
	}
	_, body = b.get("/tasks/" + running)
	if !strings.Contains(body, "cancel requested") || strings.Contains(body, `<form id="cancel"`) {
		t.Error("a running task whose cancel was asked: the page still offers cancel, or does not say so")
	}

	stopped, again := submit(t, cp, "stopped"), submit(t, cp, "again")
	for _, id := range []string{stopped, again} {
		if got := a.claim(); got != id {
			t.Fatalf("claimed %s, want %s", got, id)
		}
		a.start(id)
		a.fail(id)
	}
	_, body = b.get("/tasks/" + stopped)
	for _, want := range []string{`<form id="retry"`, `<form id="continue"`, `<li class="attempt" data-status="failed"`, `<span class="number">attempt 1/3</span>`,
		`<span class="error-class">network</span>`, `<span class="gate">stopped · gate side_effect</span>`, `<span class="model">gpt-test</span>`,
		`<span class="outcome">failed: network: connection reset</span>`, `<section id="result" data-phase="recoverable_failed">`} {
		if !strings.Contains(body, want) {
			t.Errorf("a recoverable_failed task's page lacks %s", want)
		}
	}
	if resp, _ := act(stopped, "continue"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("continue: %s", resp.Status)
	}
	v, _ = cp.Operator.Task(t.Context(), stopped)
	if v.Phase != state.PhaseQueued || v.PersonRetry == nil || !v.PersonRetry.Continue {
		t.Errorf("after continue: %s %+v, want queued for a continue", v.Phase, v.PersonRetry)
	}

	if resp, _ := act(again, "retry"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("retry: %s", resp.Status)
	}
	v, _ = cp.Operator.Task(t.Context(), again)
	if v.Phase != state.PhaseQueued || v.PersonRetry == nil || v.PersonRetry.Continue {
		t.Errorf("after retry: %s %+v, want queued for a replay", v.Phase, v.PersonRetry)
	}
}

// The inbox lists the approvals waiting, oldest first; an answer from it
// reaches the agent, and the answered one leaves it.
func TestInboxAnswers(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	a := newAgent(t, cp, "agent-1")
	first, second := submit(t, cp, "first"), submit(t, cp, "second")
	for _, id := range []string{first, second} {
		a.claim()
		a.start(id)
	}
	a.ask(first, state.ApprovalRequest{ID: "call-1", Kind: state.ApprovalCommand, Command: "rm -rf build", Cwd: "/work/repo", Reason: "clean"})
	a.ask(second, state.ApprovalRequest{ID: "call-2", Kind: state.ApprovalFileChange, Paths: []string{"a.go", "b.go"}, Cwd: "/work/repo"})

	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	if resp, _ := b.get("/"); resp.Header.Get("Location") != "/inbox" {
		t.Errorf("home with approvals waiting: to %q, want /inbox", resp.Header.Get("Location"))
	}
	_, body := b.get("/inbox")
	i1, i2 := strings.Index(body, `id="approval-`+first+`"`), strings.Index(body, `id="approval-`+second+`"`)
	if i1 < 0 || i2 < 0 || i1 > i2 {
		t.Fatalf("the inbox: want both approvals, oldest first\n%s", body)
	}
	for _, want := range []string{`<code class="command">rm -rf build</code>`, `<dd class="cwd">/work/repo</dd>`, `<dd class="reason">clean</dd>`,
		`<ul class="paths"><li><code>a.go</code></li><li><code>b.go</code></li></ul>`, `<a class="task" href="/tasks/` + first + `">first</a>`,
		`<dd class="agent">agent-1</dd>`, `<form class="accept"`, `<button type="submit" class="decline">`, `data-count="2"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the inbox lacks %s", want)
		}
	}
	_, page := b.get("/tasks/" + first)
	if !strings.Contains(page, `<section id="question">`) || !strings.Contains(page, `id="approval-`+first+`"`) {
		t.Error("the task's page does not show its question")
	}

	csrf := b.csrf()
	resp, body := b.post("/tasks/"+first+"/reply", url.Values{"csrf": {csrf}, "request_id": {"call-0"}, "decision": {"accept"}, "back": {"/inbox"}}, nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "not call-0") {
		t.Errorf("an answer to another request: %s, want 409 with the API's message", resp.Status)
	}
	resp, _ = b.post("/tasks/"+first+"/reply", url.Values{"csrf": {csrf}, "request_id": {"call-1"}, "decision": {"accept"}, "back": {"/inbox"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/inbox" {
		t.Fatalf("accept: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	hb, err := a.c.Heartbeat(t.Context(), api.HeartbeatRequest{AgentID: "agent-1", Running: []api.RunningTask{
		{TaskID: first, Attempt: 1, Phase: state.PhaseAwaitingReply}, {TaskID: second, Attempt: 1, Phase: state.PhaseAwaitingReply}}})
	if err != nil || len(hb.Replies) != 1 || hb.Replies[0].TaskID != first || hb.Replies[0].Decision != api.DecisionAccept {
		t.Errorf("the agent's heartbeat answer: %v %+v, want the accept of %s", err, hb.Replies, first)
	}
	_, body = b.get("/inbox")
	if strings.Contains(body, "approval-"+first) || !strings.Contains(body, "approval-"+second) {
		t.Error("the answered approval is still in the inbox, or the other left it")
	}
	resp, _ = b.post("/tasks/"+second+"/reply", url.Values{"csrf": {csrf}, "request_id": {"call-2"}, "decision": {"decline"}, "back": {"https://evil.example/"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("decline with a foreign back: %s to %q, want 303 to /", resp.Status, resp.Header.Get("Location"))
	}
	_, body = b.get("/inbox")
	if !strings.Contains(body, `id="inbox-empty"`) || !strings.Contains(body, `data-count="0"`) {
		t.Error("an empty inbox has no p#inbox-empty, or the count is not 0")
	}
}

// A task's page shows its result, events and log; the agents page shows
// each agent.
func TestTaskAndAgentsPages(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	a := newAgent(t, cp, "agent-1")
	id := submit(t, cp, "finish me")
	a.claim()
	a.start(id)
	a.send(id, state.EventLog, state.LogEvent{Stream: state.LogStdout, Lines: []string{"compiling", "testing"}})

	if _, err := cp.Operator.LabelAgent(t.Context(), "agent-1", api.LabelsRequest{Set: map[string]string{"tier": "secure"}}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	_, body := b.get("/agents")
	for _, want := range []string{`<article class="agent" id="agent-agent-1" data-online="true"`, `<span class="state">running</span>`,
		`<span class="grade" data-grade="available">available</span>`, `<span class="capacity">0 of 2</span>`,
		`<dd class="labels" title="granted by a person: these route tasks"><span class="label">tier=secure</span> </dd>`,
		`<dd class="labels self-described" title="what the agent says of itself: routes nothing"><span class="label">site=lab</span> </dd>`,
		`<dd class="version">v-test</dd>`, `<dd class="isolation">landlock</dd>`, `class="heartbeat" data-since=`,
		`<dd class="executor">Codex (codex)</dd>`, `<dd class="models"><span class="model">gpt-5</span> <span class="model">gpt-5-mini</span> </dd>`,
		`<dd class="platform">linux/arm64</dd>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the agents page lacks %s", want)
		}
	}

	now := time.Now()
	done := state.Attempt{AttemptID: id + "-a1", Number: 1, Status: state.AttemptCompleted, Model: "gpt-test", StartedAt: now.Add(-time.Minute), CompletedAt: now,
		Usage: state.Usage{InputTokens: 1200, OutputTokens: 34, TotalTokens: 1234}}
	a.send(id, state.EventAttempt, done)
	a.send(id, state.EventPhase, state.PhaseEvent{Phase: state.PhaseCompleted})
	a.send(id, state.EventComplete, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "all green", Attempts: []state.Attempt{done},
		Changes: &state.Changes{Repo: "r", Branch: "agent/" + id, Base: "main", BaseCommit: "0123456789",
			Commits: []state.Commit{{SHA: "abc", Subject: "fix it"}}, Files: 2, Insertions: 10, Deletions: 3}})
	_, body = b.get("/tasks/" + id)
	for _, want := range []string{`data-outcome="completed"`, `<section id="result" data-phase="completed">`, `<p class="summary">all green</p>`,
		`<li class="branch">branch agent/` + id + ` from main (0123456)</li>`, `<li class="diffstat">&#43;10 -3 in 2 files</li>`,
		"<pre id=\"log\">compiling\ntesting\n</pre>", `<ol id="events" data-container>`, `<span class="kind">phase</span>`,
		`<span class="text">stdout: 2 lines</span>`, `<span class="tokens">1.2k tokens</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("a completed task's page lacks %s", want)
		}
	}
	if strings.Contains(body, `<form id="cancel"`) || strings.Contains(body, `<form id="retry"`) || strings.Contains(body, `<form id="continue"`) {
		t.Error("a completed task's page offers an action")
	}
	if resp, body := b.get("/tasks/t-nope"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `no task &#34;t-nope&#34;`) {
		t.Errorf("a task there is none of: %s\n%s", resp.Status, body)
	}
}

// An approval shows what it approves: a file change its files and its
// diff, added and removed lines told apart; a tool its input; a
// subtask's question names its parent; each says when the agent
// declines it. A task's page keeps the calls its attempts were refused
// and the question nobody answered in time.
func TestInboxShowsWhatItApproves(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	a := newAgent(t, cp, "agent-1")
	change := submit(t, cp, "Edit the readme")
	parent := submit(t, cp, "Plan")
	kid, err := cp.Operator.CreateSubtask(t.Context(), parent, api.CreateTaskRequest{Title: "Fetch the page", Prompt: "fetch"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a.start(a.claim())
	}
	now := time.Now()
	a.ask(change, state.ApprovalRequest{ID: "call-1", Kind: state.ApprovalFileChange, Tool: "apply_patch", Paths: []string{"/w/README.md"},
		Diff: "--- /w/README.md\n+++ /w/README.md\n@@ -1 +1 @@\n-old <b>line</b>\n+new line\n", Asked: now, Deadline: now.Add(2 * time.Hour)})
	a.ask(kid.ID, state.ApprovalRequest{ID: "toolu_1", Kind: state.ApprovalTool, Tool: "WebFetch", Input: `{"url":"https://example.com/"}`, Asked: now})

	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	_, body := b.get("/inbox")
	for _, want := range []string{
		`<span class="question-kind">change files</span>`, `<li><code>/w/README.md</code></li>`,
		// html/template writes + as &#43;.
		`<span class="diff-stat">1 file changed, &#43;1 −1</span>`, `<span class="del">-old &lt;b&gt;line&lt;/b&gt;</span>`, `<span class="add">&#43;new line</span>`,
		`<span class="hunk">@@ -1 &#43;1 @@</span>`, `<dd class="deadline">in 1h59m if nobody answers</dd>`,
		`<span class="question-kind">use WebFetch</span>`, `<code class="input">{&#34;url&#34;:&#34;https://example.com/&#34;}</code>`,
		`<dd class="parent"><a href="/tasks/` + parent + `">` + parent + `</a></dd>`,
		`<dd class="deadline">never: the agent waits for an answer</dd>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the inbox lacks %s", want)
		}
	}
	if strings.Contains(body, "<b>line</b>") {
		t.Error("the diff's text was not escaped")
	}

	// The question expires: the agent declined it, and the attempt
	// records the denied call.
	a.send(change, state.EventAttempt, state.Attempt{AttemptID: change + "-a1", Number: 1, Status: state.AttemptRunning, StartedAt: now, Model: "gpt-test",
		Denied: state.Denied{Count: 1, Calls: []state.DeniedCall{{Tool: "apply_patch", Input: "change /w/README.md", Why: "no answer within 1h0m0s"}}}})
	expired := state.ApprovalRequest{ID: "call-1", Kind: state.ApprovalFileChange, Paths: []string{"/w/README.md"}}
	a.send(change, state.EventPhase, state.PhaseEvent{Phase: state.PhaseTurnStarted, Expired: &expired})
	_, page := b.get("/tasks/" + change)
	for _, want := range []string{`<p id="expired">Nobody answered in time, so the agent declined call-1: change /w/README.md</p>`,
		`<span class="denied-count">1 tool call denied</span>`, `<li>apply_patch change /w/README.md (no answer within 1h0m0s)</li>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the task's page lacks %s", want)
		}
	}
	if strings.Contains(page, `<section id="question">`) {
		t.Error("the task's page still shows the expired question as waiting")
	}
}
