package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// TestE2EClaudeQuestionOutlivesTheAgent runs Claude Code, confined,
// against the mock model with --approval ask: its Bash call asks, and
// while the question waits for a person the agent is stopped (SIGTERM) or
// killed (SIGKILL). The next start takes the attempt up (the same Claude
// Code process) and the question with it: still the one question, its id
// and deadline as first asked, not declined because the agent went. The
// person answers through the control plane after the restart: accepted,
// the command runs once; declined, it never runs and the task says the
// call was denied, once. Either way the task completes in one attempt,
// the model asked once for the command and once with its outcome (one
// turn, no follow-up).
func TestE2EClaudeQuestionOutlivesTheAgent(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	for _, c := range []struct {
		name   string
		kill   bool
		answer string
	}{
		{"stopped/accepted", false, "--accept"},
		{"killed/accepted", true, "--accept"},
		{"killed/declined", true, "--decline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			cp := startCP(t, freeAddr(t), t.TempDir())
			defer cp.stop()
			dataDir := t.TempDir()
			env := clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})
			args := []string{"run", "--control-plane", cp.url(), "--token-file", cp.tokenFile, "--data-dir", dataDir,
				"--executor", "claude", "--executor-bin", clitest.ClaudeBin(t), "--claude-allowed-tools", "Write",
				"--approval", "ask", "--approval-timeout", "1h", "--reattach-grace", "2m",
				"--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--kill-grace", "1s"}
			ag := startProc(t, "agent", env, args...)
			id := submit(t, cp, "Run it\nmock: shell\nmock-cmd: echo ran >> ran.txt")
			cp.waitPhase(t, id, "awaiting_reply", func(p state.Phase) bool { return p == state.PhaseAwaitingReply || p.Terminal() })
			before := inboxJSON(t, cp)
			if len(before) != 1 || before[0].TaskID != id || before[0].Request.Command != "echo ran >> ran.txt" {
				t.Fatalf("the inbox %+v, want the task's one question; agent:\n%s", before, tail(ag.output(), 30))
			}
			pid := claudePid(t, dataDir)

			if c.kill {
				ag.kill()
			} else if code := ag.stop(); code != 0 {
				t.Fatalf("stop: exit %d:\n%s", code, tail(ag.output(), 30))
			}
			ag = startProc(t, "agent", env, args...)
			testkit.WaitFor(t, "the agent to take the attempt up", func() bool { return takenUpPid(ag.output()) != 0 })
			if p := takenUpPid(ag.output()); p != pid {
				t.Fatalf("the agent took up process %d, Claude Code was %d", p, pid)
			}
			after := inboxJSON(t, cp)
			if len(after) != 1 || after[0].Request.ID != before[0].Request.ID || !after[0].Request.Asked.Equal(before[0].Request.Asked) ||
				!after[0].Request.Deadline.Equal(before[0].Request.Deadline) {
				t.Fatalf("after the restart the inbox %+v, want the question as first asked %+v", after, before)
			}
			if v := cp.task(t, id); v.Phase != state.PhaseAwaitingReply || v.Denied != 0 {
				t.Fatalf("after the restart the task is %s with %d denied calls, want awaiting_reply, none", v.Phase, v.Denied)
			}
			reply := runAgent(t, "tasks", "reply", id, c.answer, "--control-plane", cp.url(), "--token-file", cp.operatorFile)
			if reply.code != 0 {
				t.Fatalf("tasks reply: %+v", reply)
			}
			v := cp.waitDone(t, id)
			wantReason, wantDenied, wantFile := "", 0, "ran\n"
			if c.answer == "--decline" {
				wantReason, wantDenied, wantFile = "1 tool call denied", 1, ""
			}
			if v.Phase != state.PhaseCompleted || v.PhaseReason != wantReason || len(v.Attempts) != 1 || v.Denied != wantDenied {
				t.Fatalf("task %s (%q) after %d attempts, %d denied calls; want completed (%q) after 1, %d denied; agent:\n%s",
					v.Phase, v.PhaseReason, len(v.Attempts), v.Denied, wantReason, wantDenied, tail(ag.output(), 40))
			}
			if v.Result == nil || v.Result.Summary != mockmodel.FinalText {
				t.Errorf("result %+v, want the model's answer to the command's outcome", v.Result)
			}
			got, err := os.ReadFile(filepath.Join(dataDir, "work", id, "ran.txt"))
			switch {
			case wantFile != "" && string(got) != wantFile:
				t.Errorf("ran.txt holds %q (%v), want the command run once", got, err)
			case wantFile == "" && err == nil:
				t.Errorf("the declined command ran: ran.txt holds %q", got)
			}
			var shell, final int
			for _, r := range mock.Requests() {
				if r.Said(mockmodel.RoleUser, "cut off before it finished") {
					t.Errorf("the model was sent a follow-up: %+v", r.Conversation)
				}
				switch r.Scenario {
				case mockmodel.ScenarioShell:
					shell++
				case mockmodel.ScenarioFinal:
					final++
				}
			}
			if shell != 1 || final != 1 {
				t.Errorf("the model was asked for the command %d times and with its outcome %d times, want once each (one turn)", shell, final)
			}
			keys, asked := map[string]int{}, 0
			for _, e := range cp.events(t, id) {
				keys[e.Key]++
				if e.Kind != state.EventPhase {
					continue
				}
				var p state.PhaseEvent
				if json.Unmarshal(e.Payload, &p) == nil && p.Phase == state.PhaseAwaitingReply {
					asked++
				}
			}
			if asked != 1 {
				t.Errorf("the question was put to the person %d times, want once", asked)
			}
			for k, n := range keys {
				if n != 1 {
					t.Errorf("event %s held %d times", k, n)
				}
			}
			if code := ag.stop(); code != 0 {
				t.Errorf("agent exit %d", code)
			}
			testkit.WaitFor(t, "the spool to be removed", func() bool {
				entries, _ := os.ReadDir(filepath.Join(dataDir, "spool"))
				return len(entries) == 0
			})
		})
	}
}

// claudePid is the Claude Code process running an attempt of the agent
// with dataDir: the one whose command line has the MCP config in the
// attempt's temporary directory.
func claudePid(t *testing.T, dataDir string) int {
	t.Helper()
	want := "--mcp-config\x00" + filepath.Join(dataDir, "work", runner.ServeDirName)
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), want) {
			pids = append(pids, pid)
		}
	}
	// Its keeper's command line has the executor's too: Claude Code is
	// the one whose parent is among them.
	var claude []int
	for _, pid := range pids {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && slices.Contains(pids, atoi(fields[1])) {
			claude = append(claude, pid)
		}
	}
	if len(claude) != 1 {
		t.Fatalf("Claude Code processes of the attempt: %v of %v, want one", claude, pids)
	}
	return claude[0]
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
