package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/state"
)

// Subtasks through the real Codex CLI against the mock model: the model's
// shell tool runs `agent subtask submit` and `agent subtask wait` with the
// task token the agent put in Codex's environment, under the default
// isolation (Landlock: the shell reaches the control plane on loopback).
// The subtask runs on the same agent, through Codex too.
func TestE2ESubtasksThroughCodex(t *testing.T) {
	t.Parallel()
	mock, err := mockmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Close()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	env := clitest.CodexEnv(t, mock, clitest.CodexOptions{})
	ag := startProc(t, "agent", env, "run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "codex", "--executor-bin", clitest.CodexBin(t), "--executor-env", "MOCK_API_KEY", "--max-concurrent", "2",
		"--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--kill-grace", "1s")
	cmd := `id=$("$AGENT_BIN" subtask submit --title "Count the files" "Count the files") && "$AGENT_BIN" subtask wait "$id" > waited.txt 2>&1; echo "exit $?" >> waited.txt`
	parent := submit(t, c, "Delegate the count\nmock: shell\nmock-cmd: "+cmd)

	v := c.waitDone(t, parent)
	if v.Phase != state.PhaseCompleted || len(v.Children) != 1 {
		t.Fatalf("the parent: %s (%s), subtasks %v; agent:\n%s", v.Phase, v.PhaseReason, v.Children, tail(ag.output(), 3000))
	}
	child := c.task(t, v.Children[0])
	if child.Phase != state.PhaseCompleted || child.Parent != parent || child.Title != "Count the files" {
		t.Errorf("the subtask: %s, parent %q, title %q", child.Phase, child.Parent, child.Title)
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "work", parent, "waited.txt"))
	got := string(b)
	if err != nil || !strings.Contains(got, child.ID+"  completed  Count the files") || !strings.Contains(got, "Attempt 1/3  completed") || !strings.Contains(got, "exit 0") {
		t.Errorf("what agent subtask wait printed in the model's shell (%v):\n%s", err, got)
	}
	if code := ag.stop(); code != 0 {
		t.Errorf("agent exit %d", code)
	}
}
