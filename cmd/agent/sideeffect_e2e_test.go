package main

import (
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/taskfollow"
	"github.com/edgeagent/agent/state"
)

// on_side_effect, through the real binary: a task submitted with
// --on-side-effect ask whose attempt fails after a side effect stops for a
// person (submit --wait exits 3), who continues it: the session goes on
// and the side effect is not done again. An agent run with
// --on-side-effect ask stops so for every task, unless a task says
// continue.
func TestOnSideEffectAskThroughTheAgent(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	first := startAgentProc(t, c, dataDir)
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	const prompt = "Tidy the changelog\n@side-effect wrote CHANGELOG.md\n@fail network\n@output tidied"

	r := runAgent(t, append([]string{"submit", "--wait", "--on-side-effect", "ask", "--prompt", prompt}, cpArgs...)...)
	if r.code != taskfollow.ExitNeedsPerson || !strings.Contains(r.stdout, "-> blocked: side_effect, a person decides (on_side_effect ask)") {
		t.Fatalf("submit --wait --on-side-effect ask: exit %d, want %d\n%s%s", r.code, taskfollow.ExitNeedsPerson, r.stdout, r.stderr)
	}
	id := strings.Fields(r.stdout)[0]
	local := waitLocalPhase(t, dataDir, id, state.PhaseRecoverableFailed)
	if !strings.Contains(local.PhaseReason, "on_side_effect is ask: a person decides") {
		t.Errorf("the local reason: %q", local.PhaseReason)
	}
	if r := runAgent(t, append([]string{"tasks", "continue", id}, cpArgs...)...); r.code != 0 {
		t.Fatalf("tasks continue: %+v", r)
	}
	v := c.waitPhase(t, id, "completed", func(p state.Phase) bool { return p == state.PhaseCompleted })
	if len(v.Attempts) != 2 || v.Attempts[1].Continues != 1 || !v.Attempts[1].RetriedByPerson {
		t.Errorf("attempts: %+v", v.Attempts)
	}

	// The agent's own setting, and a task that overrides it.
	if code := first.stop(); code != 0 {
		t.Fatalf("the first agent exited %d", code)
	}
	dataDir2 := t.TempDir()
	startAgentProc(t, c, dataDir2, "--on-side-effect", "ask")
	asks := submit(t, c, prompt)
	goesOn := runAgent(t, append([]string{"submit", "--on-side-effect", "continue", "--prompt", prompt}, cpArgs...)...)
	if goesOn.code != 0 {
		t.Fatalf("submit: %+v", goesOn)
	}
	if v := c.waitDone(t, asks); v.Phase != state.PhaseRecoverableFailed || !v.Attempts[0].Retry.Asked {
		t.Errorf("under --on-side-effect ask: %s, %+v", v.Phase, v.Attempts[0].Retry)
	}
	if v := c.waitDone(t, strings.TrimSpace(goesOn.stdout)); v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 || v.Attempts[1].Continues != 1 {
		t.Errorf("a task that says continue: %s, %d attempts", v.Phase, len(v.Attempts))
	}

	if r := runAgent(t, append([]string{"submit", "--on-side-effect", "maybe", "--prompt", "x"}, cpArgs...)...); r.code != 2 || !strings.Contains(r.stderr, `--on-side-effect "maybe": want continue or ask`) {
		t.Errorf("a bad --on-side-effect: %+v", r)
	}
}
