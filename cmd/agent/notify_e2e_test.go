package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/notify"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// webhookReceiver is a generic webhook's receiver, as a person would
// write one: it verifies each delivery's signature and keeps what it got.
type webhookReceiver struct {
	secret []byte
	mu     sync.Mutex
	byID   map[string][]byte // the body of each id
	count  map[string]int    // deliveries of each id
	bad    []string          // what failed verification, a line each
}

func (rv *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	fail := func(format string, args ...any) {
		rv.bad = append(rv.bad, fmt.Sprintf(format, args...))
		http.Error(w, "refused", http.StatusBadRequest)
	}
	if err != nil {
		fail("reading the body: %v", err)
		return
	}
	if err := notify.Verify(rv.secret, body, r.Header.Get(notify.HeaderTimestamp), r.Header.Get(notify.HeaderSignature), time.Now(), notify.DefaultTolerance); err != nil {
		fail("%s: %v", body, err)
		return
	}
	var n api.Notification
	if err := json.Unmarshal(body, &n); err != nil {
		fail("%s: not JSON: %v", body, err)
		return
	}
	if n.ID == "" || r.Header.Get(notify.HeaderID) != n.ID || r.Header.Get(notify.HeaderEvent) != string(n.Event) || r.Header.Get("Content-Type") != "application/json" {
		fail("%s: headers %v", body, r.Header)
		return
	}
	if prev, ok := rv.byID[n.ID]; ok && string(prev) != string(body) {
		fail("id %s came twice with two bodies:\n%s\n%s", n.ID, prev, body)
	}
	rv.byID[n.ID] = body
	rv.count[n.ID]++
}

// notes are the notifications received, by task and event, each with its
// ids (more than one would be a duplicate with an id of its own).
func (rv *webhookReceiver) notes() map[string]map[string]bool {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := map[string]map[string]bool{}
	for id, body := range rv.byID {
		var n api.Notification
		json.Unmarshal(body, &n)
		key := string(n.Event)
		if n.Task != nil {
			key = n.Task.ID + " " + key
		}
		if out[key] == nil {
			out[key] = map[string]bool{}
		}
		out[key][id] = true
	}
	return out
}

// A receiver that is down while tasks end, and for a minute, with the
// control plane killed and started again in between, still gets every
// notification once it is back: each signature verifies, none is lost,
// and a duplicate carries the same id.
func TestNotificationsSurviveADownReceiverAndACrash(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of a receiver down: not in -short")
	}
	t.Parallel()
	dir := t.TempDir()
	cpDir, agentDir := filepath.Join(dir, "cp"), filepath.Join(dir, "agent")
	addr, receiverAddr := freeAddr(t), freeAddr(t) // nothing listens at receiverAddr yet
	down := time.Now()
	flags := []string{"--notify-webhook", "http://" + receiverAddr + "/agent", "--public-url", "https://cp.example.com"}
	c := startCP(t, addr, cpDir, flags...)
	startAgentProc(t, c, agentDir)

	want := map[string]api.NotifyEvent{}
	for i := range 3 {
		want[submit(t, c, fmt.Sprintf("task %d\n@progress 2", i))] = api.NotifyCompleted
	}
	want[submit(t, c, "a task that fails\n@fail auth 9")] = api.NotifyFailed
	for id, ev := range want {
		v := c.waitPhase(t, id, "ended", state.Phase.Terminal)
		if (ev == api.NotifyCompleted) != (v.Phase == state.PhaseCompleted) {
			t.Fatalf("task %s ended %s", id, v.Phase)
		}
	}
	testkit.WaitFor(t, "the control plane to fail a delivery", func() bool {
		return strings.Contains(c.output(), "notification not delivered; will retry")
	})

	// Killed, as by a power cut; started again on the same directory.
	c.kill()
	metricsAddr := freeAddr(t)
	c = startCP(t, addr, cpDir, append(flags, "--metrics-addr", metricsAddr)...)
	if out := c.output(); !strings.Contains(out, "notifications: 1 targets (webhook-1)") {
		t.Errorf("the start does not say its targets:\n%s", out)
	}

	secret, err := os.ReadFile(filepath.Join(cpDir, "notify-secret"))
	if err != nil {
		t.Fatal(err)
	}
	rv := &webhookReceiver{secret: []byte(strings.TrimSpace(string(secret))), byID: map[string][]byte{}, count: map[string]int{}}
	// The receiver stays down a minute: the scenario, not a wait for
	// something to happen.
	time.Sleep(time.Until(down.Add(time.Minute)))
	ln, err := net.Listen("tcp", receiverAddr)
	if err != nil {
		t.Fatalf("the receiver's address was taken meanwhile: %v", err)
	}
	srv := &http.Server{Handler: rv, ReadHeaderTimeout: 10 * time.Second}
	up := time.Now()
	go srv.Serve(ln)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()

	// The backoff after a minute of failures is at most 80 s (40 s
	// doubled, jittered down to half): everything arrives within it.
	testkit.WaitFor(t, "every notification", func() bool {
		got := rv.notes()
		for id, ev := range want {
			if len(got[id+" "+string(ev)]) == 0 {
				return false
			}
		}
		return true
	})
	// The tries are counted: every delivery since the start.
	delivered := 0.0
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for line := range strings.Lines(string(text)) {
		if strings.HasPrefix(line, "agent_controlplane_notifications_total{") && strings.Contains(line, `target="webhook-1"`) && strings.Contains(line, `result="delivered"`) {
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &delivered)
		}
	}
	if delivered < float64(len(want)) {
		t.Errorf("agent_controlplane_notifications_total says %v delivered, want at least %d:\n%s", delivered, len(want), text)
	}
	for key, ids := range rv.notes() {
		if len(ids) != 1 {
			t.Errorf("%s came with %d ids: a duplicate that is not one", key, len(ids))
		}
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	deliveries := 0
	for _, n := range rv.count {
		deliveries += n
	}
	t.Logf("%d notifications received in %d deliveries, %s after the receiver came up", len(rv.byID), deliveries, time.Since(up).Round(time.Second))
	for _, b := range rv.bad {
		t.Errorf("refused: %s", b)
	}
	for id, body := range rv.byID {
		var n api.Notification
		json.Unmarshal(body, &n)
		if n.Task != nil && n.Link != "https://cp.example.com/tasks/"+n.Task.ID {
			t.Errorf("notification %s links to %q", id, n.Link)
		}
	}
	if out := c.output(); strings.Contains(out, string(rv.secret)) {
		t.Error("the control plane's log holds the notify secret")
	}
}
