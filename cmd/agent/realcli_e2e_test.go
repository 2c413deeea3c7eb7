package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// The demo through the real CLIs, against the mock model it embeds.
func TestE2EDemoThroughTheRealCLIs(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			bin := clitest.CodexBin(t)
			if cli == "claude" {
				bin = clitest.ClaudeBin(t)
			}
			dir := t.TempDir()
			r := runAgent(t, "demo", "--executor", cli, "--executor-bin", bin, "--data-dir", dir)
			if r.code != 0 {
				t.Fatalf("demo: %+v", r)
			}
			for _, want := range []string{"-> retried in", "-> blocked: side_effect", "Attempt 2  completed", "0 pending, 0 dead"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
				}
			}
			// The shell task ran its command in its own work directory.
			if m, _ := filepath.Glob(filepath.Join(dir, "agent", "work", "*", "rotated.txt")); len(m) != 1 {
				t.Errorf("the command's file is not in a task's work directory: %v", m)
			}
		})
	}
	t.Run("not installed", func(t *testing.T) {
		wantOneLineError(t, runAgent(t, "demo", "--executor", "codex", "--executor-bin", "/nonexistent/codex"), 1, "npm install -g @openai/codex@0.169.0")
	})
}

// agent run with Claude Code against the control plane: the fallback chain
// on the wire, every record delivered once, nothing pending.
func TestE2ERunWithClaude(t *testing.T) {
	mock, err := mockmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Close()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	env := clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})
	ag := startProc(t, "agent", env, "run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "claude", "--executor-bin", clitest.ClaudeBin(t), "--models", "claude-a,claude-b",
		"--heartbeat-interval", "300ms", "--shutdown-grace", "2s")
	id := submit(t, c, "Summarize\nmock: claude-a=r429 claude-b=text")
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 || v.Attempts[0].Error == nil || v.Attempts[0].Error.Code != "rate_limit" {
		t.Fatalf("control plane shows %s with attempts %+v", v.Phase, v.Attempts)
	}
	if v.Result == nil || v.Result.Summary != "Hello from the mock model." {
		t.Errorf("result %+v", v.Result)
	}
	var models []string
	for _, r := range mock.Requests() {
		if len(models) == 0 || models[len(models)-1] != r.Model {
			models = append(models, r.Model)
		}
	}
	if strings.Join(models, ",") != "claude-a,claude-b" {
		t.Errorf("models on the wire %v, want claude-a then claude-b", models)
	}
	keys := map[string]int{}
	for _, e := range c.events(t, id) {
		keys[e.Key]++
	}
	for k, n := range keys {
		if n != 1 {
			t.Errorf("event %s accepted %d times", k, n)
		}
	}
	if code := ag.stop(); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, tail(ag.output(), 20))
	}
	snap, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stats.Pending != 0 || snap.Stats.Dead != 0 {
		t.Errorf("outbox after the run: %+v", snap.Stats)
	}
}
