package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/state"
)

// TestE2ERealCLIsMidTurnOutliveThreeRestartsOfTheAgent runs Codex and
// Claude Code against the mock model, mid-turn (the model asked for a
// command, which runs until the test lets it end), and restarts the agent
// three times meanwhile: stopped (SIGTERM), killed (SIGKILL), stopped
// again. Each start takes the attempt up where it is: the task completes
// in one attempt, the CLI process the same throughout, the model asked
// once for the command and once with its result (one model turn, no
// follow-up), the command run once, and every event at the control plane
// once.
func TestE2ERealCLIsMidTurnOutliveThreeRestartsOfTheAgent(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			c := startCP(t, freeAddr(t), t.TempDir())
			dataDir := t.TempDir()
			var env, args []string
			if cli == "codex" {
				env = clitest.CodexEnv(t, mock, clitest.CodexOptions{})
				args = []string{"--executor", "codex", "--executor-bin", clitest.CodexBin(t), "--executor-env", "MOCK_API_KEY"}
			} else {
				env = clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})
				args = []string{"--executor", "claude", "--executor-bin", clitest.ClaudeBin(t), "--claude-allowed-tools", "Bash"}
			}
			args = append([]string{"run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
				"--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--kill-grace", "1s", "--reattach-grace", "2m"}, args...)
			gate := filepath.Join(t.TempDir(), "go-on")
			cmd := fmt.Sprintf("echo started > started.txt; while [ ! -f %s ]; do sleep 0.1; done; echo rotated >> rotated.txt", gate)
			ag := startProc(t, "agent", env, args...)
			id := submit(t, c, "Rotate the logs\nmock: shell\nmock-cmd: "+cmd)
			started := filepath.Join(dataDir, "work", id, "started.txt")
			testkit.WaitFor(t, "the command to start", func() bool {
				_, err := os.Stat(started)
				return err == nil && c.task(t, id).Attempts[0].SessionID != ""
			})
			pid := 0
			for i, kill := range []bool{false, true, false} {
				if kill {
					ag.kill()
				} else if code := ag.stop(); code != 0 {
					t.Fatalf("stop %d: exit %d:\n%s", i+1, code, tail(ag.output(), 30))
				}
				ag = startProc(t, "agent", env, args...)
				testkit.WaitFor(t, "the agent to take the attempt up", func() bool { return takenUpPid(ag.output()) != 0 })
				switch p := takenUpPid(ag.output()); {
				case pid == 0:
					pid = p
				case p != pid:
					t.Fatalf("restart %d: the CLI is process %d, was %d", i+1, p, pid)
				}
			}
			must(t, os.WriteFile(gate, nil, 0o600))
			v := c.waitDone(t, id)
			if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
				t.Fatalf("task %s (%s) after %d attempts, want completed after 1; agent:\n%s", v.Phase, v.PhaseReason, len(v.Attempts), tail(ag.output(), 40))
			}
			if v.Result == nil || v.Result.Summary != mockmodel.FinalText {
				t.Errorf("result %+v, want the model's answer to the command's result", v.Result)
			}
			var asked, answered int
			for _, r := range mock.Requests() {
				if r.Said(mockmodel.RoleUser, "cut off before it finished") {
					t.Errorf("the model was sent a follow-up: %+v", r.Conversation)
				}
				switch r.Scenario {
				case mockmodel.ScenarioShell:
					asked++
				case mockmodel.ScenarioFinal:
					answered++
				}
			}
			if asked != 1 || answered != 1 {
				t.Errorf("the model was asked for the command %d times and with its result %d times, want once each (one turn)", asked, answered)
			}
			if b, err := os.ReadFile(filepath.Join(dataDir, "work", id, "rotated.txt")); err != nil || string(b) != "rotated\n" {
				t.Errorf("the command's file holds %q (%v), want it run once", b, err)
			}
			keys := map[string]int{}
			for _, e := range c.events(t, id) {
				keys[e.Key]++
			}
			for k, n := range keys {
				if n != 1 {
					t.Errorf("event %s held %d times", k, n)
				}
			}
			outputs := 0
			for _, e := range c.events(t, id) {
				if e.Kind == state.EventLog && strings.Contains(string(e.Payload), mockmodel.FinalText) {
					outputs++
				}
			}
			if outputs != 1 {
				t.Errorf("the model's answer is in %d log events, want 1", outputs)
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

// takenUpPid is the executor pid the agent's log says it took an attempt
// up with, 0 before it says so. A keeper starts one executor, ever: the
// same pid at each start is the same process.
func takenUpPid(out string) int {
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "taking up an attempt left running, where it is") {
			continue
		}
		if m := executorPidRE.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[1])
			return pid
		}
	}
	return 0
}

var executorPidRE = regexp.MustCompile(`"executor_pid":(\d+)`)
