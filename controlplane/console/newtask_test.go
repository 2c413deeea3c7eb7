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

// The new-task form submits a task as POST /v1/tasks would, with its
// repository chosen among those the fleet serves; a refusal shows the
// form again, as typed, with the control plane's reason; it takes a
// session and its CSRF token like every change.
func TestNewTaskForm(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	a := newAgent(t, cp, "agent-1")
	if _, err := a.c.Heartbeat(t.Context(), api.HeartbeatRequest{AgentID: a.id, Version: "v-test", Capacity: api.Capacity{Max: 2},
		Repos: []string{"site", "app"}, Health: api.Health{Grade: "available"}}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, cp.URL)
	if resp, _ := b.get("/tasks/new"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?next=%2Ftasks%2Fnew") {
		t.Fatalf("the form without a session: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	b.signIn(operatorToken)
	_, body := b.get("/tasks")
	if !strings.Contains(body, `href="/tasks/new"`) {
		t.Error("the tasks page does not link to the new-task form")
	}
	resp, body := b.get("/tasks/new")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<option value="app">app</option><option value="site">site</option>`) {
		t.Fatalf("the form: %s, want the served repositories in order\n%s", resp.Status, body)
	}
	csrf := csrfField.FindStringSubmatch(body)[1]

	form := url.Values{"csrf": {csrf}, "prompt": {"Fix the footer\r\nand the header"}, "title": {"Footer"}, "repo": {"site"}, "base": {"release/2.1"},
		"requires": {"executor=codex\r\n\r\nlabel=tier=web\r\n"}, "max_tokens": {"200000"}, "max_time": {"30m"}, "no_commit": {"1"}}
	resp, body = b.post("/tasks/new", form, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/tasks/t-") {
		t.Fatalf("submit: %s to %q\n%s", resp.Status, loc, body)
	}
	v, err := cp.Operator.Task(t.Context(), strings.TrimPrefix(loc, "/tasks/"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Prompt != "Fix the footer\nand the header" || v.Title != "Footer" || v.Repo != "site" || v.Base != "release/2.1" ||
		state.RequirementsText(v.Requires) != "executor=codex, label=tier=web" || v.MaxTokens != 200000 || v.MaxTime.D() != 30*time.Minute || v.Phase != state.PhaseQueued ||
		!v.NoCommit {
		t.Errorf("the task submitted: %+v", v.Task())
	}

	for _, tc := range []struct {
		name   string
		set    url.Values
		status int
		want   string
	}{
		{"no prompt", url.Values{"prompt": {"  "}}, http.StatusBadRequest, "prompt is required"},
		{"a repository no agent serves", url.Values{"repo": {"nosuch"}}, http.StatusUnprocessableEntity, "nosuch"},
		{"a bad requirement", url.Values{"requires": {"colour=blue"}}, http.StatusBadRequest, "colour"},
		{"a bad budget", url.Values{"max_tokens": {"lots"}}, http.StatusBadRequest, `max tokens &#34;lots&#34;: want a whole number`},
		{"a bad time", url.Values{"max_time": {"soon"}}, http.StatusBadRequest, `max time &#34;soon&#34;: want a duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := url.Values{"csrf": {csrf}, "prompt": {"Keep me as typed"}, "title": {"Kept"}}
			for k, v := range tc.set {
				f[k] = v
			}
			resp, body := b.post("/tasks/new", f, nil)
			if resp.StatusCode != tc.status || !strings.Contains(body, `id="newtask-error"`) || !strings.Contains(body, tc.want) {
				t.Errorf("%s, want %d with %q in p#newtask-error\n%s", resp.Status, tc.status, tc.want, body)
			}
			if !strings.Contains(body, `value="Kept"`) {
				t.Error("the form lost what was typed")
			}
		})
	}
	count := func() int {
		all, err := cp.Operator.Tasks(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	n := count()
	if resp, _ := b.post("/tasks/new", url.Values{"prompt": {"no csrf"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a POST without the CSRF token: %s", resp.Status)
	}
	if resp, _ := b.post("/tasks/new", url.Values{"csrf": {csrf}, "prompt": {"cross-site"}}, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site POST: %s", resp.Status)
	}
	if got := count(); got != n {
		t.Errorf("refused POSTs submitted %d tasks", got-n)
	}
}
