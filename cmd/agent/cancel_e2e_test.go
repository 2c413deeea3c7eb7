package main

// Cancels and the control plane's own endings reach the agent at once, on
// the claim it holds open, and both views say the same: who ended the
// task and why; a cancel that crosses the task's end resolves one way on
// both sides.

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// A person's cancel reaches a running task at once, though the agent's
// next heartbeat is minutes away and every slot is taken: the claim the
// agent holds open for its running tasks carries it. The task ends
// cancelled on both sides, saying who cancelled it.
func TestCancelReachesARunningTaskAtOnce(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir(), "--heartbeat-interval", "5m")
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--max-concurrent", "1")
	// Its output first: nothing it does after (no report, no first-event
	// limit) brings the cancel but the claim held open.
	id := submit(t, c, "Hold on\n@output started\n@wait-file "+filepath.Join(t.TempDir(), "never"))
	waitLocalPhase(t, dataDir, id, state.PhaseTurnStarted)
	if r := runAgent(t, "tasks", "cancel", id, "--control-plane", c.url(), "--token-file", c.operatorFile); r.code != 0 {
		t.Fatalf("tasks cancel: %+v", r)
	}
	local := waitLocalPhase(t, dataDir, id, state.PhaseCancelled)
	remote := c.waitDone(t, id)
	sameEnding(t, local, remote.Task(), "cancelled: cancelled by a person")
}

// The control plane's watchdog timing a running task out ends it on its
// agent as timed_out too, at once and with the watchdog's reason, not as
// a cancel nobody asked for.
func TestAWatchdogEndingIsTheAgentsToo(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir(), "--heartbeat-interval", "5m", "--stall-limit", "2s")
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	id := submit(t, c, "Stall\n@output started\n@wait-file "+filepath.Join(t.TempDir(), "never"))
	local := waitLocalPhase(t, dataDir, id, state.PhaseTimedOut)
	remote := c.task(t, id)
	sameEnding(t, local, remote.Task(), "the control plane's watchdog: no progress for ")
	if a := local.Attempts[0]; a.Error == nil || a.Error.Code != state.CodeTimedOut || a.Retry != nil {
		t.Errorf("the local attempt: %+v, retry %+v; want failed timed_out, as the control plane's", a.Error, a.Retry)
	}
}

// sameEnding checks that the agent's view of a task and the control
// plane's end alike: the phase, its reason (which starts with want), the
// last attempt's status and error; and that tasks show says it so on both
// sides.
func sameEnding(t *testing.T, local, remote *state.Task, want string) {
	t.Helper()
	if local.Phase != remote.Phase || local.PhaseReason != remote.PhaseReason || !strings.HasPrefix(local.PhaseReason, want) {
		t.Errorf("local %s (%s), control plane %s (%s); want both %q", local.Phase, local.PhaseReason, remote.Phase, remote.PhaseReason, want)
	}
	la, ra := local.Current(), remote.Current()
	if la == nil || ra == nil || la.Status != ra.Status || la.Error == nil || ra.Error == nil || *la.Error != *ra.Error {
		t.Errorf("the last attempt: local %+v, control plane %+v", la, ra)
	}
}

// A cancel that crosses the task's end resolves one way: the agent had
// finished first, so the completion stands, and both sides note the
// cancel came after it. Here the agent's reports wait at a proxy while
// the task completes and a person cancels it; the answer to the reports,
// once they go through, tells the agent, as the control plane notes it.
func TestACancelThatCrossesTheEndResolvesOneWay(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	target, err := url.Parse(c.url())
	if err != nil {
		t.Fatal(err)
	}
	p := newHoldProxy(target, func(path string) bool { return path == "/v1/events" })
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	dataDir := t.TempDir()
	startProc(t, "agent", nil, "run", "--control-plane", hs.URL, "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "sample", "--heartbeat-interval", "300ms", "--shutdown-grace", "2s")
	gate := filepath.Join(t.TempDir(), "gate")
	id := submit(t, c, "Finish\n@wait-file "+gate+"\n@output done")
	c.waitPhase(t, id, "turn_started", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
	p.hold.Store(true)
	must(t, os.WriteFile(gate, nil, 0o600))
	waitLocalPhase(t, dataDir, id, state.PhaseCompleted)
	if r := runAgent(t, "tasks", "cancel", id, "--control-plane", c.url(), "--token-file", c.operatorFile); r.code != 0 {
		t.Fatalf("tasks cancel of a task the control plane has running: %+v", r)
	}
	p.hold.Store(false)
	remote := c.waitDone(t, id)
	var local *state.Task
	testkit.WaitFor(t, "the agent to note the cancel", func() bool {
		local, err = datadir.LoadTask(dataDir, id)
		return err == nil && local.CancelRequested
	})
	if remote.Phase != state.PhaseCompleted || !remote.CancelRequested || local.Phase != state.PhaseCompleted {
		t.Fatalf("control plane %s (cancel %v), local %s: want completed on both, the cancel noted", remote.Phase, remote.CancelRequested, local.Phase)
	}
	note := state.CancelNote(local)
	if note == "" || note != state.CancelNote(remote.Task()) || !strings.HasSuffix(note, "came after it had ended completed: the ending stands") {
		t.Errorf("notes: local %q, control plane %q", note, state.CancelNote(remote.Task()))
	}
	for _, args := range [][]string{{"--data-dir", dataDir}, {"--remote", "--control-plane", c.url(), "--token-file", c.operatorFile}} {
		if r := runAgent(t, append([]string{"tasks", "show", id}, args...)...); !strings.Contains(r.stdout, note) {
			t.Errorf("tasks show %v lacks %q:\n%s", args, note, r.stdout)
		}
	}
}

// holdProxy passes everything to the control plane but, while hold is
// set, the requests whose path held names: those it refuses, and drops
// the answer of one that was on its way when hold was set, as a network
// that drops them would.
type holdProxy struct {
	hold atomic.Bool
	held func(path string) bool
	rp   *httputil.ReverseProxy
}

func newHoldProxy(target *url.URL, held func(path string) bool) *holdProxy {
	return &holdProxy{held: held, rp: httputil.NewSingleHostReverseProxy(target)}
}

func (h *holdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	holds := func() bool { return h.hold.Load() && h.held(r.URL.Path) }
	if holds() {
		http.Error(w, "held by the test", http.StatusServiceUnavailable)
		return
	}
	rec := httptest.NewRecorder()
	h.rp.ServeHTTP(rec, r)
	if holds() {
		http.Error(w, "held by the test", http.StatusServiceUnavailable)
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}
