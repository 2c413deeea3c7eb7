package server

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// A question's notification carries links that answer it without a
// sign-in: opening one shows the question and changes nothing; its
// button answers it, once; the same link again, the other link after,
// an altered one, one whose question is gone and an expired one do
// nothing, each saying why; a POST from another site is refused.
func TestApprovalLinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{now: t0}
	e := newNotifyEnv(t, t.TempDir(), clk)
	ask := func(title string, deadline time.Time) (string, *api.NotifyActions) {
		t.Helper()
		e.clearNotes()
		task, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: title, Title: title})
		must(t, err)
		c := e.claim("ws-1", "available", 1)[0]
		q := &state.ApprovalRequest{ID: "call_" + title, Kind: state.ApprovalCommand, Command: "make deploy", Cwd: "/work", Deadline: deadline}
		e.send("ws-1",
			ev(title+"1", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
			ev(title+"2", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted}),
			ev(title+"3", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseAwaitingReply, Request: q}))
		n := e.oneNote(api.NotifyAwaitingReply, "all", "people")
		if n.Actions == nil || !strings.HasPrefix(n.Actions.Accept, testPublicURL+"approve/") || !strings.HasPrefix(n.Actions.Decline, testPublicURL+"approve/") ||
			n.Actions.Accept == n.Actions.Decline {
			t.Fatalf("the question's notification has no links: %+v", n.Actions)
		}
		return task.ID, n.Actions
	}
	// do opens a link on this server, as a phone's browser would.
	do := func(method, link string, header map[string]string) (int, string) {
		t.Helper()
		u := e.http.URL + "/" + strings.TrimPrefix(link, testPublicURL)
		req, _ := http.NewRequest(method, u, nil)
		if method == http.MethodPost {
			req.Header.Set("Origin", e.http.URL)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	reply := func(id string) *state.Reply {
		t.Helper()
		v, err := e.client.Task(ctx, id)
		must(t, err)
		return v.Reply
	}

	id, links := ask("deploy", t0.Add(time.Hour))
	status, body := do(http.MethodGet, links.Accept, nil)
	if status != http.StatusOK || !strings.Contains(body, "Accept this?") || !strings.Contains(body, "make deploy") || !strings.Contains(body, `id="link-answer"`) {
		t.Fatalf("opening the accept link: %d\n%s", status, body)
	}
	if r := reply(id); r != nil {
		t.Fatalf("opening the link answered: %+v", r)
	}
	if status, _ := do(http.MethodPost, links.Accept, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); status != http.StatusForbidden || reply(id) != nil {
		t.Errorf("a cross-site POST of the link: %d, reply %+v", status, reply(id))
	}
	status, body = do(http.MethodPost, links.Accept, nil)
	if r := reply(id); status != http.StatusOK || !strings.Contains(body, "Accepted") || r == nil || r.Decision != api.DecisionAccept || r.RequestID != "call_deploy" {
		t.Fatalf("the accept link's button: %d, reply %+v\n%s", status, r, body)
	}
	for _, c := range []struct {
		what, method, link, says string
		status                   int
	}{
		{"the same link again", http.MethodPost, links.Accept, "used already", http.StatusGone},
		{"the same link opened again", http.MethodGet, links.Accept, "used already", http.StatusGone},
		{"the decline link after", http.MethodPost, links.Decline, "already answered", http.StatusConflict},
		{"an altered signature", http.MethodPost, links.Decline[:len(links.Decline)-2] + "AA", "not one the control plane made", http.StatusNotFound},
		{"an altered payload", http.MethodGet, strings.Replace(links.Decline, "/approve/e", "/approve/f", 1), "not one the control plane made", http.StatusNotFound},
		{"garbage", http.MethodGet, testPublicURL + "approve/" + url.PathEscape("not a link"), "not one the control plane made", http.StatusNotFound},
	} {
		status, body := do(c.method, c.link, nil)
		if status != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d, want %d saying %q\n%s", c.what, status, c.status, c.says, body)
		}
	}
	if r := reply(id); r.Decision != api.DecisionAccept {
		t.Errorf("the answer after the other links: %+v", r)
	}

	// A link lives as long as its question: past its deadline it does
	// nothing, and says so.
	id2, links2 := ask("migrate", t0.Add(10*time.Minute))
	clk.advance(11 * time.Minute)
	if status, body := do(http.MethodPost, links2.Accept, nil); status != http.StatusGone || !strings.Contains(body, "expired") || reply(id2) != nil {
		t.Errorf("an expired link: %d, reply %+v\n%s", status, reply(id2), body)
	}
}
