package main

import (
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Working or hung, through the real binaries, with a stall limit of 2 s:
// an attempt that spins the CPU for longer, saying nothing, is working
// (silent), shown so by the control plane and tasks show, and completes;
// one whose process is stopped (SIGSTOP) for as long is hung, and the
// stall limit ends it timed_out.
func TestASilentBusyAttemptIsNotHung(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir(), "--stall-limit", "2s")
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--liveness-interval", "300ms", "--kill-grace", "1s")
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	busy := submit(t, c, "Run the test suite\n@output testing\n@busy 6s\n@output all passed")
	stopped := submit(t, c, "Run the test suite\n@output testing\n@sigstop")

	// The view checked is the one looked at: waitPhase's own fetch comes
	// before the condition's, and may be from before the silence.
	var v api.TaskView
	c.waitPhase(t, busy, "working (silent)", func(state.Phase) bool {
		v = c.task(t, busy)
		return v.Liveness == state.LivenessSilent
	})
	if v.LastActivityAt.IsZero() {
		t.Errorf("working (silent) with no activity time: %+v", v.Task())
	}
	show := runAgent(t, append([]string{"tasks", "show", busy, "--remote"}, cpArgs...)...)
	if !strings.Contains(show.stdout, "liveness: working (silent), its processes at work ") {
		t.Errorf("tasks show of a silent busy task:\n%s%s", show.stdout, show.stderr)
	}
	if v := c.waitDone(t, busy); v.Phase != state.PhaseCompleted || v.Liveness != "" {
		t.Errorf("the busy task: %s (%s), liveness %q; want completed", v.Phase, v.PhaseReason, v.Liveness)
	}
	v = c.waitDone(t, stopped)
	if v.Phase != state.PhaseTimedOut || !strings.Contains(v.PhaseReason, "the control plane's watchdog: no progress for ") {
		t.Errorf("the stopped task: %s (%s), want timed_out by the stall limit", v.Phase, v.PhaseReason)
	}
}
