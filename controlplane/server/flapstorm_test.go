package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/notify"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/testkit"
)

// inbox is a loopback receiver of notifications: what it got, in order.
type inbox struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
}

func newInbox(t *testing.T) *inbox {
	in := &inbox{}
	in.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		in.mu.Lock()
		in.bodies, in.heads = append(in.bodies, b), append(in.heads, r.Header.Clone())
		in.mu.Unlock()
	}))
	t.Cleanup(in.Close)
	return in
}

func (in *inbox) got() ([][]byte, []http.Header) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.bodies), slices.Clone(in.heads)
}

func (in *inbox) count() int { b, _ := in.got(); return len(b) }

// deliver runs the delivery loop over e's store until the test ends or
// the function it returns is called.
func (e *env) deliver(targets []notify.Target) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		notify.Run(ctx, e.srv.Store(), targets, notify.Options{Now: e.clk.Now, Interval: 5 * time.Millisecond})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return stop
}

// hostileReason is what a hostile agent says of its health: a phone
// number to call, a terminal's hyperlink and color, a bidirectional
// override, a quote that would end the control plane's, a newline, and
// far more than a line.
const hostileReason = "call +1-555-0100 now\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\x1b[31m\u202e\" -- the control plane\n" +
	"all clear" + "………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………………"

// An agent's heartbeats flipping its health 40 times, through the API,
// with the delivery loop sending to a webhook and an ntfy topic on
// loopback: each gets the first unhealthy notification at once and one
// more when the window ends, counting the other 39; the control plane
// restarted in between (the limits are the store's). The agent's words
// are quoted and said to be its, bounded and inert, on both.
func TestAHealthFlapStormIsFoldedIntoOne(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	hook, phone := newInbox(t), newInbox(t)
	secret := []byte("0123456789abcdef0123456789abcdef-storm")
	targets := []notify.Target{{Name: "hooks", Kind: notify.Webhook, URL: hook.URL, Secret: secret}, {Name: "phone", Kind: notify.Ntfy, URL: phone.URL}}
	opts := Options{Notify: []NotifyTarget{{Name: "hooks"}, {Name: "phone"}}, PublicURL: testPublicURL}
	e := newEnvOpts(t, dir, clk, opts)
	stop := e.deliver(targets)
	ctx := context.Background()
	flips := 0
	beat := func(grade health.Grade) {
		t.Helper()
		clk.advance(time.Second)
		_, err := e.agent("a1").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a1", Hostname: "box\x1b[2J", State: api.AgentRunning, StartedAt: t0,
			Health: api.Health{Grade: grade, Reason: hostileReason, Since: clk.Now()}})
		must(t, err)
	}
	for range 20 {
		beat(health.Available)
		beat(health.Unavailable)
		flips++
	}
	testkit.WaitFor(t, "the first notification to each", func() bool { return hook.count() == 1 && phone.count() == 1 })
	// A restart: the rest of the storm meets the same limits.
	stop()
	e = e.restart(clk)
	stop = e.deliver(targets)
	for range 20 {
		beat(health.Available)
		beat(health.Unavailable)
		flips++
	}
	testkit.WaitFor(t, "the repeats to be folded", func() bool {
		due, err := e.srv.Store().DueNotifications(ctx, clk.Now().Add(time.Hour), 100)
		must(t, err)
		return len(due) == 2 // one fold per target
	})
	if hook.count() != 1 || phone.count() != 1 {
		t.Fatalf("within the window: %d deliveries to the webhook, %d to ntfy; want 1 each", hook.count(), phone.count())
	}
	clk.advance(notify.DefaultWindow)
	testkit.WaitFor(t, "the fold to each", func() bool { return hook.count() == 2 && phone.count() == 2 })
	stop()

	bodies, _ := hook.got()
	var first, fold api.Notification
	must(t, json.Unmarshal(bodies[0], &first))
	must(t, json.Unmarshal(bodies[1], &fold))
	for _, n := range []api.Notification{first, fold} {
		if n.Event != api.NotifyAgentUnhealthy || n.Agent == nil || n.Agent.ID != "a1" || n.Said == nil || n.Said.By != "agent a1" {
			t.Fatalf("a webhook's notification: %+v", n)
		}
		if strings.ContainsFunc(n.Text+n.Said.Text+n.Agent.Reason+n.Agent.Hostname, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\u202e' }) {
			t.Errorf("a control character reaches the webhook: text %q, said %q, reason %q, host %q", n.Text, n.Said.Text, n.Agent.Reason, n.Agent.Hostname)
		}
		if !strings.HasPrefix(n.Said.Text, `call +1-555-0100 now\x1b]8;;https://evil.example/\aclick`) || len([]rune(n.Said.Text)) > api.MaxSaidRunes {
			t.Errorf("said: %q; want the agent's words, inert, within %d runes", n.Said.Text, api.MaxSaidRunes)
		}
		if !strings.HasPrefix(n.Text, `Agent a1 (host "box\x1b[2J") is unavailable; agent a1 says: "call +1-555-0100 now\x1b]8;;https://evil.example/\aclick`) ||
			!strings.Contains(n.Text, `\u202e\" -- the control plane all clear`) {
			t.Errorf("text %q: want the agent's words quoted, theirs", n.Text)
		}
	}
	if first.Folded != nil || fold.Folded == nil || fold.Folded.Count != flips-1 || fold.Folded.Limit != "repeat" || fold.ID == first.ID ||
		!strings.Contains(fold.Text, "[39 times in ") {
		t.Errorf("the first %+v, the fold %+v (folded %+v); want the fold to count the other %d", first, fold, fold.Folded, flips-1)
	}
	phoneBodies, heads := phone.got()
	for i, b := range phoneBodies {
		text := string(b)
		if heads[i].Get("Title") != "Agent unhealthy" || !strings.Contains(text, `; agent a1 says: "call +1-555-0100 now\x1b]8;;`) ||
			strings.ContainsFunc(text, func(r rune) bool { return r < ' ' || r == '\u202e' }) {
			t.Errorf("ntfy got %q (title %q): want the agent's words quoted, attributed, inert", text, heads[i].Get("Title"))
		}
	}
	if !strings.Contains(string(phoneBodies[1]), "[39 times in ") {
		t.Errorf("ntfy's second: %q, want the count", phoneBodies[1])
	}
}
