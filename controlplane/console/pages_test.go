package console_test

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/state"
)

// A POST without the session's CSRF token, with a wrong one, from another
// site or another origin, or without a session, is 403 and changes
// nothing.
func TestForgedPostsAreRefused(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	id := submit(t, cp, "keep me queued")
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	csrf := b.csrf()
	other := newBrowser(t, cp.URL)
	other.signIn(otherOperator)
	for _, c := range []struct {
		name    string
		b       *browser
		form    url.Values
		headers map[string]string
	}{
		{"no csrf", b, url.Values{}, nil},
		{"a wrong csrf", b, url.Values{"csrf": {"AAAA" + csrf[4:]}}, nil},
		{"another session's csrf", other, url.Values{"csrf": {csrf}}, nil},
		{"Sec-Fetch-Site cross-site", b, url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"Sec-Fetch-Site same-site", b, url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"}},
		{"a foreign Origin", b, url.Values{"csrf": {csrf}}, map[string]string{"Origin": "https://evil.example"}},
		{"Origin null", b, url.Values{"csrf": {csrf}}, map[string]string{"Origin": "null"}},
		{"no session", newBrowser(t, cp.URL), url.Values{"csrf": {csrf}}, nil},
	} {
		resp, body := c.b.post("/tasks/"+id+"/cancel", c.form, c.headers)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `id="forbidden"`) || !strings.Contains(body, "forbidden: cross-site request refused") {
			t.Errorf("%s: %s, want 403 with p#forbidden\n%s", c.name, resp.Status, body)
		}
		if p := phaseOf(t, cp, id); p != state.PhaseQueued {
			t.Fatalf("%s: the task is %s, want it queued still", c.name, p)
		}
	}
	// Without Origin and Sec-Fetch-Site (an older browser), the token alone
	// vouches for the form.
	resp, _ := b.post("/tasks/"+id+"/cancel", url.Values{"csrf": {csrf}}, map[string]string{"Origin": "", "Sec-Fetch-Site": ""})
	if resp.StatusCode != http.StatusSeeOther || phaseOf(t, cp, id) != state.PhaseCancelled {
		t.Errorf("a same-origin cancel with the token: %s, task %s", resp.Status, phaseOf(t, cp, id))
	}
	// The sign-in checks where it came from too.
	resp, _ = newBrowser(t, cp.URL).post("/signin", url.Values{"token": {operatorToken}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != http.StatusForbidden || sessionCookie(resp) != nil {
		t.Errorf("a cross-site sign-in: %s, want 403 and no cookie", resp.Status)
	}
}

// The tasks page lists cards, newest first, those that need a person on
// top of the first page (a question, then a stop to decide on) and not
// again below; it filters them, searches titles and pages. A finished
// task's card shows its result, not its last progress.
func TestTasksPage(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	var ids []string
	for i := range 55 {
		ids = append(ids, submit(t, cp, fmt.Sprintf("task number %d", i)))
	}
	fix := submit(t, cp, "Fix the LOGIN flake")
	a := newAgent(t, cp, "agent-1")
	asking := a.claim() // the oldest: ids[0]
	a.start(asking)
	a.ask(asking, state.ApprovalRequest{ID: "call-1", Kind: state.ApprovalCommand, Command: "make deploy"})
	stopped := a.claim()
	a.start(stopped)
	a.fail(stopped)
	done := a.claim()
	a.start(done)
	a.send(done, state.EventProgress, state.Progress{Message: "writing a reply"})
	now := time.Now()
	end := state.Attempt{AttemptID: done + "-a1", Number: 1, Status: state.AttemptCompleted, StartedAt: now.Add(-time.Minute), CompletedAt: now}
	a.send(done, state.EventAttempt, end)
	a.send(done, state.EventPhase, state.PhaseEvent{Phase: state.PhaseCompleted})
	a.send(done, state.EventComplete, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "all green\nand more", Attempts: []state.Attempt{end}})
	running := a.claim()
	a.start(running)
	a.send(running, state.EventProgress, state.Progress{Message: "half way", Percent: 50})

	// The order expected, from the tasks as the control plane has them.
	all, err := cp.Operator.Tasks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(all, func(x, y api.TaskView) int {
		return cmp.Or(y.CreatedAt.Compare(x.CreatedAt), strings.Compare(y.ID, x.ID))
	})
	pinned := []string{asking, stopped}
	var want1, want2 []string
	for i, v := range all {
		switch {
		case slices.Contains(pinned, v.ID):
		case i < 50:
			want1 = append(want1, v.ID)
		default:
			want2 = append(want2, v.ID)
		}
	}
	want1 = append(pinned, want1...)

	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	resp, body := b.get("/tasks")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tasks: %s", resp.Status)
	}
	if got := cardIDs(body); !slices.Equal(got, want1) {
		t.Errorf("the first page's cards:\n%v\nwant:\n%v", got, want1)
	}
	for _, want := range []string{
		`<form id="filter"`, `<select name="phase"`, `<input name="agent"`, `<input name="repo"`, `<input name="q"`,
		`<article class="card" id="task-` + asking + `" data-phase="awaiting_reply" data-outcome="waiting">`,
		`<span class="progress-text">waiting for a person: run make deploy</span>`,
		`<article class="card" id="task-` + stopped + `" data-phase="recoverable_failed" data-outcome="waiting">`,
		`<span class="result">recoverable_failed: network after a side effect</span>`,
		`<article class="card" id="task-` + fix + `" data-phase="queued" data-outcome="queued">`,
		`<span class="attempt">attempt 1/3</span>`,
		`<a class="title" href="/tasks/` + ids[54] + `">task number 54</a>`,
		`id="next-page" href="/tasks?after=` + all[49].ID + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the tasks page lacks %s", want)
		}
	}
	_, body = b.get("/tasks?after=" + all[49].ID)
	if got := cardIDs(body); !slices.Equal(got, want2) || strings.Contains(body, "next-page") {
		t.Errorf("the second page: %v, want %v and no next page\n%s", got, want2, body)
	}
	for _, want := range []string{
		`<article class="card" id="task-` + running + `" data-phase="turn_started" data-outcome="running">`, `class="elapsed" data-started=`,
		`<span class="progress-text">50% half way</span>`,
		`<article class="card" id="task-` + done + `" data-phase="completed" data-outcome="completed">`, `<span class="result">all green</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the second page lacks %s", want)
		}
	}
	if strings.Contains(body, "writing a reply") {
		t.Error("the completed task's card shows its last progress")
	}
	_, body = b.get("/tasks?q=login")
	if !strings.Contains(body, "task-"+fix) || strings.Count(body, `<article class="card"`) != 1 {
		t.Errorf("search login: want only %s\n%s", fix, body)
	}
	_, body = b.get("/tasks?phase=turn_started&agent=agent-1")
	if !strings.Contains(body, "task-"+running) || strings.Count(body, `<article class="card"`) != 1 {
		t.Errorf("filter turn_started on agent-1: want only %s\n%s", running, body)
	}
	_, body = b.get("/tasks?phase=recoverable_failed")
	if got := cardIDs(body); !slices.Equal(got, []string{stopped}) {
		t.Errorf("filter recoverable_failed: %v, want only %s", got, stopped)
	}
	_, body = b.get("/tasks?agent=nobody")
	if !strings.Contains(body, `id="tasks-empty"`) {
		t.Error("no match: no p#tasks-empty")
	}
	resp, body = b.get("/tasks?phase=bogus")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "phase &#34;bogus&#34;: want one of") {
		t.Errorf("a bad phase: %s\n%s", resp.Status, body)
	}
	resp, _ = b.get("/")
	if resp.Header.Get("Location") != "/inbox" {
		t.Errorf("home with a question waiting: to %q, want /inbox", resp.Header.Get("Location"))
	}
}

// cardIDs are the ids of the task cards a page holds, in order.
func cardIDs(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<article class="card" id="task-([^"]+)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// What a task carries is hostile: it is escaped wherever it shows.
func TestHostileContentIsEscaped(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	const evil = `<script>alert("t")</script><img src=x onerror=alert(1)>`
	id := submit(t, cp, evil)
	a := newAgent(t, cp, "agent-1")
	a.claim()
	a.start(id)
	a.send(id, state.EventLog, state.LogEvent{Stream: state.LogStdout, Lines: []string{"</pre>" + evil}})
	a.ask(id, state.ApprovalRequest{ID: "call-1", Kind: state.ApprovalCommand, Command: "echo " + evil, Cwd: "/tmp/" + evil, Reason: evil})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	for _, path := range []string{"/tasks", "/tasks/" + id, "/inbox"} {
		_, body := b.get(path)
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || strings.Contains(body, "</pre><script") {
			t.Errorf("%s renders the task's content as markup", path)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;t&#34;)&lt;/script&gt;") {
			t.Errorf("%s does not show the escaped title", path)
		}
		if strings.Contains(body, "<script>") && !strings.Contains(body, `<script src="/static/console.js" defer></script>`) {
			t.Errorf("%s has an inline script", path)
		}
	}
}

// A task's page lists its subtasks with their phases, and a subtask's
// names its parent (subtasks, issue 27).
func TestTaskPageShowsTheTree(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	parent := submit(t, cp, "Plan the release")
	kid, err := cp.Operator.CreateSubtask(t.Context(), parent, api.CreateTaskRequest{Title: "Count the files", Prompt: "count"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	_, body := b.get("/tasks/" + parent)
	if want := `<li><a href="/tasks/` + kid.ID + `">` + kid.ID + `</a> <span class="phase">queued</span> Count the files</li>`; !strings.Contains(body, want) {
		t.Errorf("the parent's page lacks %s:\n%s", want, body)
	}
	_, body = b.get("/tasks/" + kid.ID)
	if want := `A subtask of <a href="/tasks/` + parent + `">`; !strings.Contains(body, want) {
		t.Errorf("the subtask's page lacks %s", want)
	}
}
