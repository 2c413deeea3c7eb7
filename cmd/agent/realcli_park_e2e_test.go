package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/state"
)

// Through the agent binary with the real CLIs: the mock's usage limit,
// reached after a command ran, parks the task; the agent is stopped
// while it is parked and started again; at the reset the same session
// continues once, the model seeing one follow-up turn with the earlier
// conversation, and the command is not run again.
func TestE2EUsageLimitParksAcrossTheAgentsRestart(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			mock.UsageLimitReset = 8 * time.Second
			c := startCP(t, freeAddr(t), t.TempDir())
			dataDir := t.TempDir()
			var env, args []string
			if cli == "codex" {
				env = clitest.CodexEnv(t, mock, clitest.CodexOptions{})
				args = []string{"--executor", "codex", "--executor-bin", clitest.CodexBin(t), "--executor-env", "MOCK_API_KEY"}
			} else {
				env = clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})
				args = []string{"--executor", "claude", "--executor-bin", clitest.ClaudeBin(t), "--claude-allowed-tools", "Bash", "--claude-limit-wait", "1s"}
			}
			args = append([]string{"run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
				"--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--kill-grace", "1s"}, args...)
			ag := startProc(t, "agent", env, args...)
			id := submit(t, c, "Rotate the logs\nmock: shell after=usage_limit\nmock-cmd: echo rotated >> rotated.txt")
			v := c.waitPhase(t, id, "parked", func(p state.Phase) bool { return p == state.PhaseParked })
			if v.Parked == nil || v.Parked.Reason != state.ParkUsageLimit || v.Parked.ResumesAt.IsZero() {
				t.Fatalf("parked: %+v", v.Parked)
			}
			asked := len(mock.Requests())
			if code := ag.stop(); code != 0 {
				t.Fatalf("agent exit %d:\n%s", code, tail(ag.output(), 20))
			}
			ag = startProc(t, "agent", env, args...)
			v = c.waitDone(t, id)
			if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 {
				t.Fatalf("task %s (%s) with %d attempts; agent:\n%s", v.Phase, v.PhaseReason, len(v.Attempts), tail(ag.output(), 30))
			}
			a1, a2 := v.Attempts[0], v.Attempts[1]
			if a1.Error == nil || a1.Error.Code != state.CodeUsageLimit || a2.Continues != 1 || a2.SessionID != a1.SessionID {
				t.Errorf("attempt 1 %+v, attempt 2 continues %d in %s", a1.Error, a2.Continues, a2.SessionID)
			}
			if resets := mock.LimitResets(); a2.StartedAt.Before(resets.Add(-time.Second)) {
				t.Errorf("attempt 2 started %s, before the limit reset at %s", a2.StartedAt, resets)
			}
			reqs := mock.Requests()[asked:]
			if len(reqs) != 1 || !reqs[0].Said(mockmodel.RoleUser, "Rotate the logs") || !reqs[0].Said(mockmodel.RoleUser, "The usage limit has reset.") {
				t.Fatalf("%d requests after the park; want one follow-up turn with the earlier conversation: %+v", len(reqs), reqs)
			}
			if b := rotatedFile(t, dataDir, id); b != "rotated\n" {
				t.Errorf("the command's file holds %q, want it run once", b)
			}
			if code := ag.stop(); code != 0 {
				t.Errorf("agent exit %d", code)
			}
			if strings.Contains(ag.output(), `"level":"ERROR"`) {
				t.Errorf("the agent logged an error:\n%s", tail(ag.output(), 20))
			}
		})
	}
}

// rotatedFile reads rotated.txt in task id's work directory ("" when absent).
func rotatedFile(t *testing.T, dataDir, id string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dataDir, "work", id, "rotated.txt"))
	return string(b)
}
