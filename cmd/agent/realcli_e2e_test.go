package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// The demo through the real CLIs, against the mock model it embeds.
func TestE2EDemoThroughTheRealCLIs(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{"codex", "claude", "opencode"} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			bins := map[string]func(testing.TB) string{"codex": clitest.CodexBin, "claude": clitest.ClaudeBin, "opencode": clitest.OpenCodeBin}
			bin := bins[cli](t)
			dir := t.TempDir()
			// Through OpenCode, whose every attempt takes seconds to
			// start (tens on a loaded machine), the demo took over 3 min.
			r := runAgentWithin(t, 10*time.Minute, nil, "demo", "--executor", cli, "--executor-bin", bin, "--data-dir", dir)
			if r.code != 0 {
				t.Fatalf("demo: %+v", r)
			}
			for _, want := range []string{"-> retried in", "-> continued in", "continued attempt 1's session after", "continued by a person", "Attempt 2/3  completed", "0 pending, 0 dead"} {
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
	t.Parallel()
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
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 || v.Attempts[0].Error == nil || v.Attempts[0].Error.Code != state.CodeRateLimit {
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

// The approval policy ask, round trip: Codex asks, the task waits in
// awaiting_reply at the control plane with the request, a person answers
// with agent tasks reply, the agent takes the answer at its next heartbeat.
// With attempts that outlive the agent, a restart (SIGKILL) mid-wait
// leaves the request pending: the next start re-attaches to Codex, still
// waiting, and the person's answer reaches it, in the one attempt. With
// attempts that do not (--reattach-grace 0), a
// restart mid-wait ends the attempt as agent_restart and the gate
// decides: the model had asked, so the next start continues its session
// (the follow-up is a new turn, which the mock answers with text); the
// control plane's pending request is cleared.
func TestE2EAskApprovalThroughTheControlPlane(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		answer  string // --accept, --decline, or "restart"
		ran     bool
		phase   state.Phase
		errCode state.ErrorCode
		// continued: attempt 2 continued attempt 1's session
		continued bool
		// reattach: the restart re-attaches (the answer is then --accept)
		reattach bool
	}{
		{name: "accepted", answer: "--accept", ran: true, phase: state.PhaseCompleted},
		{name: "declined", answer: "--decline", ran: false, phase: state.PhaseCompleted},
		{name: "agent restarted while waiting", answer: "restart", ran: false, phase: state.PhaseCompleted, errCode: state.CodeAgentRestart, continued: true},
		{name: "agent restarted while waiting, re-attached", answer: "restart", ran: true, phase: state.PhaseCompleted, reattach: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			cp := startCP(t, freeAddr(t), t.TempDir())
			defer cp.stop()
			dataDir := t.TempDir()
			env := clitest.CodexEnv(t, mock, clitest.CodexOptions{})
			args := []string{"run", "--control-plane", cp.url(), "--token-file", cp.tokenFile, "--data-dir", dataDir,
				"--executor", "codex", "--executor-bin", clitest.CodexBin(t), "--executor-env", "MOCK_API_KEY",
				"--codex-sandbox", "read-only", "--approval", "ask", "--reply-timeout", "2m",
				"--heartbeat-interval", "5s", "--shutdown-grace", "2s", "--kill-grace", "1s"}
			if !c.reattach {
				args = append(args, "--reattach-grace", "0")
			}
			ag := startProc(t, "agent", env, args...)
			id := submit(t, cp, "Escalate\nmock: escalate\nmock-cmd: echo approved > approved.txt")
			v := cp.waitPhase(t, id, "awaiting_reply", func(p state.Phase) bool { return p == state.PhaseAwaitingReply })
			if v.AwaitingReply == nil || !strings.Contains(v.AwaitingReply.Command, "approved.txt") || v.AwaitingReply.Reason == "" {
				t.Fatalf("the control plane does not show the request: %+v", v.AwaitingReply)
			}
			asked := v.AwaitingReply.ID
			if c.answer == "restart" {
				ag.kill()
				ag = startProc(t, "agent", env, args...)
			}
			if c.reattach {
				testkit.WaitFor(t, "the agent to take the attempt up", func() bool {
					return strings.Contains(ag.output(), "taking up an attempt left running, where it is")
				})
				if v := cp.task(t, id); v.Phase != state.PhaseAwaitingReply || v.AwaitingReply == nil || v.AwaitingReply.ID != asked {
					t.Fatalf("after the restart the task is %s awaiting %+v, want the same request pending", v.Phase, v.AwaitingReply)
				}
				if r := runAgent(t, "tasks", "reply", id, "--accept", "--control-plane", cp.url(), "--token-file", cp.operatorFile); r.code != 0 {
					t.Fatalf("tasks reply: %+v", r)
				}
			} else if c.answer != "restart" {
				r := runAgent(t, "tasks", "reply", id, c.answer, "--control-plane", cp.url(), "--token-file", cp.operatorFile)
				if r.code != 0 {
					t.Fatalf("tasks reply: %+v", r)
				}
				if said := id + ": " + c.name + " request "; !strings.HasPrefix(r.stdout, said) {
					t.Errorf("tasks reply %s says %q, want it to begin %q", c.answer, r.stdout, said)
				}
				// A second, different answer is refused: the request is
				// answered. It says so while the answer waits for the
				// agent; once the agent took it, the task is past
				// awaiting a reply (a loaded machine gets there first).
				other := map[string]string{"--accept": "--decline", "--decline": "--accept"}[c.answer]
				r = runAgent(t, "tasks", "reply", id, other, "--control-plane", cp.url(), "--token-file", cp.operatorFile)
				says := "already answered"
				if strings.Contains(r.stderr, "not awaiting a reply") {
					says = "not awaiting a reply"
				}
				wantOneLineError(t, r, 1, says)
			}
			v = cp.waitDone(t, id)
			if v.Phase != c.phase {
				t.Fatalf("task %s (%s), want %s; agent:\n%s", v.Phase, v.PhaseReason, c.phase, tail(ag.output(), 30))
			}
			if c.errCode != "" && (v.Attempts[0].Error == nil || v.Attempts[0].Error.Code != c.errCode) {
				t.Errorf("attempt 1 error %+v, want %s", v.Attempts[0].Error, c.errCode)
			}
			if c.continued && (len(v.Attempts) != 2 || v.Attempts[1].Continues != 1 || v.Attempts[1].SessionID != v.Attempts[0].SessionID) {
				t.Errorf("attempts %+v, want attempt 2 to continue attempt 1's session", v.Attempts)
			}
			if c.reattach && len(v.Attempts) != 1 {
				t.Errorf("%d attempts, want the one re-attached to", len(v.Attempts))
			}
			if v.AwaitingReply != nil || v.Reply != nil {
				t.Errorf("the request is still pending at the control plane after the task moved on: %+v %+v", v.AwaitingReply, v.Reply)
			}
			_, err = os.Stat(filepath.Join(dataDir, "work", id, "approved.txt"))
			if ran := err == nil; ran != c.ran {
				t.Errorf("the command ran: %v, want %v", ran, c.ran)
			}
			if code := ag.stop(); code != 0 {
				t.Errorf("agent exit %d", code)
			}
		})
	}
}

// An agent SIGKILLed mid-turn, through the real CLIs, its attempts not
// outliving it (--reattach-grace 0): the attempt had run
// a command (a side effect), so the next start continues the CLI's
// session instead of replaying the prompt. The model is asked with the
// earlier conversation and the follow-up, and the command is not run
// again.
func TestE2EAgentKilledMidTurnContinuesTheCLISession(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{"codex", "claude", "opencode", "gemini"} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			c := startCP(t, freeAddr(t), t.TempDir())
			dataDir := t.TempDir()
			var env, args []string
			switch cli {
			case "codex":
				env = clitest.CodexEnv(t, mock, clitest.CodexOptions{})
				args = []string{"--executor", "codex", "--executor-bin", clitest.CodexBin(t), "--executor-env", "MOCK_API_KEY"}
			case "claude":
				env = clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})
				args = []string{"--executor", "claude", "--executor-bin", clitest.ClaudeBin(t), "--claude-allowed-tools", "Bash"}
			case "gemini":
				env = clitest.GeminiEnv(t, mock)
				args = []string{"--executor", "acp", "--executor-bin", clitest.GeminiBin(t), "--models", "gemini-2.5-pro", "--approval", "accept"}
			default:
				env = clitest.OpenCodeEnv(t, mock)
				args = []string{"--executor", "opencode", "--executor-bin", clitest.OpenCodeBin(t), "--models", clitest.OpenCodeModels[0]}
			}
			args = append([]string{"run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
				"--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--kill-grace", "1s", "--reattach-grace", "0"}, args...)
			ag := startProc(t, "agent", env, args...)
			id := submit(t, c, "Rotate the logs\nmock: shell after=hang\nmock-cmd: echo rotated >> rotated.txt")
			// The command ran and the model hangs on its result: mid-turn.
			testkit.WaitFor(t, "the command to run", func() bool {
				v := c.task(t, id)
				return len(v.Attempts) == 1 && v.Attempts[0].Facts.SideEffect && v.Attempts[0].SessionPath != ""
			})
			ag.kill()
			ag = startProc(t, "agent", env, args...)
			v := c.waitDone(t, id)
			if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 {
				t.Fatalf("task %s (%s) with %d attempts; agent:\n%s", v.Phase, v.PhaseReason, len(v.Attempts), tail(ag.output(), 30))
			}
			a1, a2 := v.Attempts[0], v.Attempts[1]
			if a1.Error == nil || a1.Error.Code != state.CodeAgentRestart || a1.Retry.Decision != state.DecisionContinued ||
				a2.Continues != 1 || a2.SessionID != a1.SessionID {
				t.Errorf("attempt 1 %+v %+v, attempt 2 continues %d in %s", a1.Error, a1.Retry, a2.Continues, a2.SessionID)
			}
			reqs := mock.Requests()
			last := reqs[len(reqs)-1]
			if !last.Said(mockmodel.RoleUser, "Rotate the logs") || !last.Said(mockmodel.RoleUser, "cut off before it finished") {
				t.Errorf("the request after the continue lacks the earlier conversation or the follow-up: %+v", last.Conversation)
			}
			if b, err := os.ReadFile(filepath.Join(dataDir, "work", id, "rotated.txt")); err != nil || string(b) != "rotated\n" {
				t.Errorf("the command's file holds %q (%v), want it run once", b, err)
			}
			if code := ag.stop(); code != 0 {
				t.Errorf("agent exit %d", code)
			}
		})
	}
}

// agent run --executor acp with real ACP agents against the control
// plane: the profile comes with the binary's name (codex-acp: Codex's
// configuration and hosts; gemini: --acp added), the attempts run
// confined as always, and the fallback chain is on the wire.
func TestE2ERunWithACPAgents(t *testing.T) {
	for _, tc := range []struct {
		name, bin, prompt string
		models            []string
		codes             []state.ErrorCode
		env               func(testing.TB, *mockmodel.Server) []string
		more              []string
	}{
		{name: "codex-acp", bin: clitest.CodexACPBin(t), prompt: "Summarize\nmock: gpt-5.4=r429 gpt-5.5=text", models: []string{"gpt-5.4", "gpt-5.5"},
			codes: []state.ErrorCode{state.CodeRateLimit, ""},
			env: func(t testing.TB, m *mockmodel.Server) []string {
				return clitest.CodexEnv(t, m, clitest.CodexOptions{})
			}, more: []string{"--executor-env", "MOCK_API_KEY"}},
		{name: "gemini", bin: clitest.GeminiBin(t), prompt: "Summarize", models: []string{"gemini-2.5-pro"}, codes: []state.ErrorCode{""},
			env: clitest.GeminiEnv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			c := startCP(t, freeAddr(t), t.TempDir())
			args := append([]string{"run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", t.TempDir(),
				"--executor", "acp", "--executor-bin", tc.bin, "--models", strings.Join(tc.models, ","),
				"--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--kill-grace", "1s"}, tc.more...)
			ag := startProc(t, "agent", tc.env(t, mock), args...)
			id := submit(t, c, tc.prompt)
			v := c.waitDone(t, id)
			if v.Phase != state.PhaseCompleted || len(v.Attempts) != len(tc.codes) {
				t.Fatalf("task %s with attempts %+v; agent:\n%s", v.Phase, v.Attempts, tail(ag.output(), 30))
			}
			for i, a := range v.Attempts {
				var code state.ErrorCode
				if a.Error != nil {
					code = a.Error.Code
				}
				if code != tc.codes[i] {
					t.Errorf("attempt %d: %+v, want code %q", i+1, a.Error, tc.codes[i])
				}
			}
			if v.Result == nil || v.Result.Summary != mockmodel.HelloText {
				t.Errorf("result %+v", v.Result)
			}
			var asked []string
			for _, r := range mock.Requests() {
				if len(asked) == 0 || asked[len(asked)-1] != r.Model {
					asked = append(asked, r.Model)
				}
			}
			if strings.Join(asked, ",") != strings.Join(tc.models, ",") {
				t.Errorf("models on the wire %v, want %v", asked, tc.models)
			}
			if code := ag.stop(); code != 0 {
				t.Errorf("agent exit %d:\n%s", code, tail(ag.output(), 20))
			}
		})
	}
}
