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

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/notify"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/internal/testkit"
)

// flapInbox receives a webhook's and an ntfy topic's deliveries on
// loopback: the webhook's verified and kept as JSON objects, ntfy's
// bodies as text; only those of agent.unhealthy (the agent, silent after
// the storm, also goes offline: a notification of its own).
type flapInbox struct {
	secret []byte
	addr   string

	mu    sync.Mutex
	hooks []map[string]any
	phone []string
	bad   []string
}

func startFlapInbox(t *testing.T, secret []byte) *flapInbox {
	t.Helper()
	in := &flapInbox{secret: secret}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		in.mu.Lock()
		defer in.mu.Unlock()
		if err := notify.Verify(in.secret, body, r.Header.Get(notify.HeaderTimestamp), r.Header.Get(notify.HeaderSignature), time.Now(), notify.DefaultTolerance); err != nil {
			in.bad = append(in.bad, err.Error())
			http.Error(w, "refused", http.StatusUnauthorized)
			return
		}
		var n map[string]any
		if err := json.Unmarshal(body, &n); err != nil {
			in.bad = append(in.bad, string(body))
			return
		}
		if n["event"] == "agent.unhealthy" {
			in.hooks = append(in.hooks, n)
		}
	})
	mux.HandleFunc("POST /phone", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		in.mu.Lock()
		defer in.mu.Unlock()
		if r.Header.Get("Title") == "Agent unhealthy" {
			in.phone = append(in.phone, string(body))
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	in.addr = ln.Addr().String()
	return in
}

// config writes a control plane config file whose targets are the
// inbox's: a signed webhook and an ntfy topic.
func (in *flapInbox) config(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "hook-secret")
	if err := os.WriteFile(secretFile, append(in.secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "cp.toml")
	toml := fmt.Sprintf("[[notify]]\nname = \"hooks\"\ntype = \"webhook\"\nurl = \"http://%s/hook\"\nsecret-file = %q\n\n"+
		"[[notify]]\nname = \"phone\"\ntype = \"ntfy\"\nurl = \"http://%s/phone\"\n", in.addr, secretFile, in.addr)
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// standFor is how many notifications the webhook's and ntfy's
// deliveries stand for: one each, or a fold's count (ntfy's text says
// it: "[39 times in …").
func (in *flapInbox) standFor() (hooks, phone int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, n := range in.hooks {
		hooks++
		if f, ok := n["folded"].(map[string]any); ok {
			c, _ := f["count"].(float64)
			hooks += int(c) - 1
		}
	}
	for _, b := range in.phone {
		phone++
		var c int
		if i := strings.Index(b, " ["); i >= 0 {
			if _, err := fmt.Sscanf(b[i:], " [%d times", &c); err == nil {
				phone += c - 1
			}
		}
	}
	return hooks, phone
}

// flapReason is what the flapping agent says of its health.
const flapReason = "call +1-555-0100 now\x1b[31m\" -- the control plane"

// flap sends n heartbeats that make agent id unavailable, each after one
// that makes it available, through clients (one after another), and
// returns how long it took.
func flap(t *testing.T, clients []*controlplane.Client, id string, n int) time.Duration {
	t.Helper()
	start := time.Now()
	for i := range 2 * n {
		grade := health.Available
		if i%2 == 1 {
			grade = health.Unavailable
		}
		_, err := clients[i%len(clients)].Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: id, Hostname: "box", State: api.AgentRunning,
			StartedAt: start, Health: api.Health{Grade: grade, Reason: flapReason, Since: time.Now()}})
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	return time.Since(start)
}

// checkFlaps checks what the inbox got of an agent's 40 flips to
// unavailable within the time storm took: every one counted, in at
// most two notifications per target and one more per window the storm
// lasted, and the agent's words quoted as its, on both targets. A
// control plane killed (killed times) while it delivered may deliver
// what was in flight again (at least once): to the webhook under the
// same id, which counts once; to ntfy, which has no id, as one more.
func (in *flapInbox) checkFlaps(t *testing.T, agent string, storm, window time.Duration, killed int) {
	t.Helper()
	testkit.WaitFor(t, "the 40 flips to be told of on both targets", func() bool {
		h, p := in.standFor()
		return h >= 40 && p >= 40
	})
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, b := range in.bad {
		t.Errorf("the receiver refused: %s", b)
	}
	most := 2 + int(storm/window)
	ids := map[any]bool{}
	for _, n := range in.hooks {
		ids[n["id"]] = true
	}
	if len(ids) > most || len(in.phone) > most+killed {
		t.Errorf("%d notifications to the webhook (%d deliveries), %d deliveries to ntfy, for 40 flips in %s; want at most %d each (ntfy: %d)",
			len(ids), len(in.hooks), len(in.phone), storm.Round(time.Millisecond), most, most+killed)
	}
	quote := `agent ` + agent + ` says: "call +1-555-0100 now\x1b[31m\" -- the control plane"`
	for _, n := range in.hooks {
		text, _ := n["text"].(string)
		said, _ := n["said"].(map[string]any)
		if !strings.Contains(text, quote) || said["by"] != "agent "+agent || said["text"] != `call +1-555-0100 now\x1b[31m" -- the control plane` {
			t.Errorf("the webhook got text %q, said %v; want the agent's words quoted and theirs: %s", text, said, quote)
		}
	}
	for _, b := range in.phone {
		if !strings.Contains(b, quote) || strings.ContainsRune(b, 0x1b) {
			t.Errorf("ntfy got %q; want the agent's words quoted, theirs, inert: %s", b, quote)
		}
	}
	t.Logf("40 flips in %s: %d deliveries to the webhook, %d to ntfy", storm.Round(time.Millisecond), len(in.hooks), len(in.phone))
}

// An agent's health flipping 40 times against a real control plane
// (agent controlplane serve, over files), with a webhook and an ntfy
// topic on loopback: each target gets the first at once and a fold of
// the rest when the window ends, counting them, and the agent's words
// are shown as its.
func TestNotifyFlapStormIsBounded(t *testing.T) {
	t.Parallel()
	in := startFlapInbox(t, []byte("0123456789abcdef0123456789abcdef-e2e"))
	const window = 3 * time.Second
	c := startCP(t, freeAddr(t), t.TempDir(), "--config", in.config(t), "--notify-window", window.String())
	a, err := controlplane.NewClient(c.url(), readFile(t, c.tokenFile), controlplane.ClientOptions{Tries: 1, AgentID: "flapper"})
	if err != nil {
		t.Fatal(err)
	}
	storm := flap(t, []*controlplane.Client{a}, "flapper", 40)
	in.checkFlaps(t, "flapper", storm, window, 0)
}

// Over PostgreSQL, two replicas: the flips come through both, and the
// replica that led is killed in the middle of the storm; the other takes
// the lead and goes on under the same limits, from the store.
func TestNotifyFlapStormAcrossReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	in := startFlapInbox(t, []byte("0123456789abcdef0123456789abcdef-e2e"))
	const window = 5 * time.Second
	flags := []string{"--store", dsn, "--config", in.config(t), "--notify-window", window.String()}
	ca := startCP(t, freeAddr(t), t.TempDir(), flags...)
	cb := startCP(t, freeAddr(t), t.TempDir(), append(flags, "--token-file", ca.tokenFile, "--operator-token-file", ca.operatorFile)...)
	var token string
	a, err := controlplane.NewClient(ca.url(), readFile(t, ca.tokenFile), controlplane.ClientOptions{Tries: 1, AgentID: "flapper",
		SaveAgentToken: func(tok string) error { token = tok; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	flap(t, []*controlplane.Client{a}, "flapper", 1) // registers
	b, err := controlplane.NewClient(cb.url(), readFile(t, ca.tokenFile), controlplane.ClientOptions{Tries: 1, AgentID: "flapper", AgentToken: token})
	if err != nil {
		t.Fatal(err)
	}
	flap(t, []*controlplane.Client{a, b}, "flapper", 19)
	testkit.WaitFor(t, "the first notification", func() bool { h, p := in.standFor(); return h >= 1 && p >= 1 })
	// Kill whichever leads: the other takes over.
	leader, survivor := ca, b
	if strings.Contains(cb.output(), "took the lead") {
		leader, survivor = cb, a
	}
	leader.kill()
	flap(t, []*controlplane.Client{survivor}, "flapper", 20)
	in.checkFlaps(t, "flapper", time.Since(start), window, 1)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
