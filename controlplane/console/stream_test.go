package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/console"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// The tasks stream says the order of the cards, newest first, and says
// it again when it changes: a new task goes on top, and one that comes
// to need a person goes above every other.
func TestStreamOrdersTheCards(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	first := submit(t, cp, "first")
	second := submit(t, cp, "second")
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	s := b.openStream("/events?view=tasks")
	order := func(want ...string) {
		t.Helper()
		for i, id := range want {
			want[i] = "task-" + id
		}
		s.waitFor(fmt.Sprintf("the order %v", want), func(e sse) bool {
			var m struct {
				Into string
				IDs  []string
			}
			return e.event == "order" && json.Unmarshal([]byte(e.data), &m) == nil && m.Into == "tasks" && slices.Equal(m.IDs, want)
		})
	}
	order(second, first)
	third := submit(t, cp, "third")
	order(third, second, first)
	a := newAgent(t, cp, "agent-1")
	if got := a.claim(); got != first {
		t.Fatalf("claimed %s, want the oldest, %s", got, first)
	}
	a.start(first)
	a.ask(first, state.ApprovalRequest{ID: "call-1", Kind: state.ApprovalCommand, Command: "make test"})
	order(first, third, second)
}

// The tasks stream sends a task's card again when its phase changes (the
// agent works through the API), and only then.
func TestStreamSendsWhatChanged(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	id := submit(t, cp, "watch me")
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	s := b.openStream("/events?view=tasks")
	s.waitFor("the inbox count", func(e sse) bool { got, _ := replaceOf(e); return got == "inbox-count" })
	s.waitFor("the queued card", func(e sse) bool {
		got, html := replaceOf(e)
		return e.event == "replace" && got == "task-"+id && strings.Contains(html, `data-phase="queued"`)
	})

	a := newAgent(t, cp, "agent-1")
	a.claim()
	e := s.waitFor("the claimed card", func(e sse) bool {
		got, html := replaceOf(e)
		return got == "task-"+id && strings.Contains(html, `data-phase="claimed"`)
	})
	if _, html := replaceOf(e); !strings.Contains(html, `<span class="agent">on agent-1</span>`) {
		t.Errorf("the claimed card does not name its agent: %s", html)
	}
	a.start(id)
	s.waitFor("the running card", func(e sse) bool {
		got, html := replaceOf(e)
		return got == "task-"+id && strings.Contains(html, `data-phase="turn_started"`) && strings.Contains(html, "attempt 1/3")
	})

	// The task's own stream: its card, its events and its log lines, the
	// lines once.
	ts := b.openStream("/events?view=task&id=" + id + "&after=0")
	a.send(id, state.EventLog, state.LogEvent{Stream: state.LogStdout, Lines: []string{"first <line>"}})
	ts.waitFor("the card", func(e sse) bool { got, _ := replaceOf(e); return got == "task-"+id })
	log := ts.waitFor("the log line", func(e sse) bool { return e.event == "log" && strings.Contains(e.data, "first \\u003cline\\u003e") })
	if log.id == "" {
		t.Error("a log event carries no id: a reconnect would send its lines again")
	}
	a.send(id, state.EventLog, state.LogEvent{Stream: state.LogStdout, Lines: []string{"second"}})
	next := ts.waitFor("the next log line", func(e sse) bool { return e.event == "log" })
	if strings.Contains(next.data, "first") || !strings.Contains(next.data, "second") {
		t.Errorf("the next log event: %s, want only the new line", next.data)
	}
	a.ask(id, state.ApprovalRequest{ID: "call-1", Kind: state.ApprovalCommand, Command: "make test"})
	ts.waitFor("the question", func(e sse) bool {
		got, html := replaceOf(e)
		return got == "question-slot" && strings.Contains(html, `<code class="command">make test</code>`)
	})
	s.waitFor("the inbox count of 1", func(e sse) bool {
		got, html := replaceOf(e)
		return got == "inbox-count" && strings.Contains(html, `data-count="1"`)
	})

	// A reconnect with Last-Event-ID goes on after the last event sent.
	req, _ := http.NewRequest(http.MethodGet, cp.URL+"/events?view=task&id="+id, nil)
	req.Header.Set("Last-Event-ID", next.id)
	rs := b.openStreamRequest(req)
	a.send(id, state.EventLog, state.LogEvent{Stream: state.LogStdout, Lines: []string{"third"}})
	third := rs.waitFor("a log event", func(e sse) bool { return e.event == "log" })
	if strings.Contains(third.data, "second") || !strings.Contains(third.data, "third") {
		t.Errorf("after a reconnect: %s, want only the line after Last-Event-ID", third.data)
	}
}

// The inbox stream adds an approval when a task asks, and removes it
// when it is answered.
func TestInboxStream(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	id := submit(t, cp, "ask me")
	a := newAgent(t, cp, "agent-1")
	a.claim()
	a.start(id)
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	s := b.openStream("/events?view=inbox")
	s.waitFor("the empty inbox", func(e sse) bool { got, _ := replaceOf(e); return got == "inbox-empty" })
	a.ask(id, state.ApprovalRequest{ID: "call-1", Kind: state.ApprovalCommand, Command: "go test ./..."})
	e := s.waitFor("the approval", func(e sse) bool { got, _ := replaceOf(e); return got == "approval-"+id })
	if !strings.Contains(e.data, `\"into\":\"inbox\"`) && !strings.Contains(e.data, `"into":"inbox"`) {
		t.Errorf("the approval goes into no container: %s", e.data)
	}
	s.waitFor("the empty note's removal", func(e sse) bool { return e.event == "remove" && strings.Contains(e.data, "inbox-empty") })
	if _, err := cp.Operator.Reply(t.Context(), id, "call-1", "accept"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("the approval's removal", func(e sse) bool { return e.event == "remove" && strings.Contains(e.data, "approval-"+id) })
}

// A stream ends when its request does: the cap counts it no more. Past
// the cap, a stream is refused.
func TestStreamEndsWithItsRequest(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	c := console.New(console.Options{Backend: cp.Server.ConsoleBackend(), MaxStreams: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(c)
	defer hs.Close()
	b := newBrowser(t, hs.URL)
	b.signIn(operatorToken)
	first := b.openStream("/events?view=agents")
	first.waitFor("the inbox count", func(e sse) bool { return e.event == "replace" })
	if resp, body := b.get("/events?view=agents"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a second stream past a cap of 1: %s, want 503\n%s", resp.Status, body)
	}
	first.close()
	testkit.WaitFor(t, "the first stream to end", func() bool {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/events?view=agents", nil)
		resp, err := (&http.Client{Jar: b.c.Jar}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// A stream ends when the server shuts down (StopWaits), and when its
// session is signed out.
func TestStreamEndsAtShutdownAndSignOut(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	s := b.openStream("/events?view=tasks")
	s.waitFor("the inbox count", func(e sse) bool { return e.event == "replace" })
	other := newBrowser(t, cp.URL)
	other.signIn(operatorToken)
	o := other.openStream("/events?view=inbox")
	o.waitFor("the inbox count", func(e sse) bool { return e.event == "replace" })
	if resp, _ := other.post("/signout", urlValues("csrf", other.csrf()), nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %s", resp.Status)
	}
	o.waitEnd()
	cp.Server.StopWaits()
	s.waitEnd()
}

// waitEnd reads the stream until it ends.
func (s *stream) waitEnd() {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case _, open := <-s.events:
			if !open {
				return
			}
		case <-deadline:
			s.t.Fatal("the stream did not end")
		}
	}
}

// A stream of a task there is none of, or of an unknown view, is refused
// with the error's status: the browser does not retry it.
func TestStreamRefusesWhatIsNotThere(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	for _, c := range []struct {
		path string
		want int
	}{
		{"/events?view=task&id=t-nope", http.StatusNotFound},
		{"/events?view=task", http.StatusBadRequest},
		{"/events?view=tasks&after=t-nope", http.StatusBadRequest},
		{"/events?view=tasks&phase=bogus", http.StatusBadRequest},
		{"/events?view=everything", http.StatusBadRequest},
	} {
		if resp, body := b.get(c.path); resp.StatusCode != c.want {
			t.Errorf("GET %s: %s, want %d\n%s", c.path, resp.Status, c.want, body)
		}
	}
}
