package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real Codex and Claude Code binaries (pinned, from
// make tools) against the mock model on loopback, through the runner: what
// they check is what an operator sees, phases, attempts with their codes
// and retry decisions, results, and no process left behind.

// cliCase is one scenario through one CLI.
type cliCase struct {
	name   string
	prompt string
	models []string
	// what the task must come to
	phase   state.Phase
	codes   []state.ErrorCode // the attempts' error codes, "" for one that completed
	gate    state.GateReason  // the last attempt's gate, when it failed
	summary string            // the result's summary, when completed
	models2 []string
}

// newCLIRunner returns a fixture whose runner drives exe with short limits.
func newCLIRunner(t *testing.T, exe runner.Executor, prompt string, models []string) *fixture {
	t.Helper()
	f := newFixture(t, exe, prompt)
	f.runner.Models = models
	f.runner.WorkRoot = t.TempDir()
	// An owner per test: parallel tests must not see each other's
	// processes as left behind.
	f.runner.Owner = fmt.Sprintf("test-%d-%s", os.Getpid(), strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	f.runner.Timeouts = runner.Timeouts{FirstEvent: []time.Duration{20 * time.Second}, Attempt: []time.Duration{2 * time.Minute}}
	return f
}

func codexExec(t *testing.T, mock *mockmodel.Server, cfg runner.CodexConfig) *runner.Codex {
	t.Helper()
	cfg.Bin = clitest.CodexBin(t)
	cfg.Env = append(cfg.Env, clitest.CodexEnv(t, mock, clitest.CodexOptions{StreamIdleMS: 1500})...)
	if cfg.Sandbox == "" {
		cfg.Sandbox = "danger-full-access"
	}
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	exe, err := runner.NewCodex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func claudeExec(t *testing.T, mock *mockmodel.Server, cfg runner.ClaudeConfig) *runner.Claude {
	t.Helper()
	cfg.Bin = clitest.ClaudeBin(t)
	cfg.Env = append(cfg.Env, clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})...)
	if cfg.Grace == 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.APITimeout == 0 {
		cfg.APITimeout = 3 * time.Second
	}
	exe, err := runner.NewClaude(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// check asserts the task's end against the case.
func (c cliCase) check(t *testing.T, f *fixture, mock *mockmodel.Server) {
	t.Helper()
	task := f.task
	if task.Phase != c.phase {
		t.Fatalf("task ended %s (%s), want %s; attempts %s; logs:\n%s", task.Phase, task.PhaseReason, c.phase, attemptsText(task), strings.Join(f.rec.logs(), "\n"))
	}
	if len(task.Attempts) != len(c.codes) {
		t.Fatalf("%d attempts (%s), want %d", len(task.Attempts), attemptsText(task), len(c.codes))
	}
	for i, a := range task.Attempts {
		var code state.ErrorCode
		if a.Error != nil {
			code = a.Error.Code
		}
		if code != c.codes[i] {
			t.Errorf("attempt %d: code %q (%v), want %q", i+1, code, a.Error, c.codes[i])
		}
		if a.SessionID == "" {
			t.Errorf("attempt %d has no session id", i+1)
		}
	}
	last := task.Attempts[len(task.Attempts)-1]
	if c.gate != "" && (last.Retry == nil || last.Retry.Gate != c.gate) {
		t.Errorf("last attempt's retry decision %+v, want gate %s", last.Retry, c.gate)
	}
	if c.summary != "" && (task.Result == nil || task.Result.Summary != c.summary) {
		t.Errorf("result %+v, want summary %q", task.Result, c.summary)
	}
	if c.models2 != nil {
		var asked []string
		for _, r := range mock.Requests() {
			asked = appendOnce(asked, r.Model)
		}
		if strings.Join(asked, ",") != strings.Join(c.models2, ",") {
			t.Errorf("models asked on the wire %v, want %v", asked, c.models2)
		}
	}
}

func appendOnce(list []string, s string) []string {
	if len(list) > 0 && list[len(list)-1] == s {
		return list
	}
	return append(list, s)
}

func attemptsText(task *state.Task) string {
	var parts []string
	for _, a := range task.Attempts {
		s := fmt.Sprintf("#%d %s", a.Number, a.Status)
		if a.Error != nil {
			s += " " + a.Error.Error()
		}
		if a.Retry != nil {
			s += fmt.Sprintf(" gate=%s %s", a.Retry.Gate, a.Retry.Decision)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// cliLimit keeps a few real CLIs running at once on a small machine.
var cliLimit = make(chan struct{}, 3)

func runCLICase(t *testing.T, c cliCase, exe func(*mockmodel.Server) runner.Executor) {
	t.Parallel()
	cliLimit <- struct{}{}
	defer func() { <-cliLimit }()
	mock, err := mockmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Close()
	f := newCLIRunner(t, exe(mock), c.prompt, c.models)
	f.run(t, context.Background())
	c.check(t, f, mock)
	assertNoMarkedProcess(t, f.runner.Owner)
}

// assertNoMarkedProcess fails when a process of the owner's attempts is
// still alive.
func assertNoMarkedProcess(t *testing.T, owner string) {
	t.Helper()
	if pids := proc.OwnerProcesses(owner); len(pids) > 0 {
		for _, pid := range pids {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("process %d (%s) of the attempt outlived it", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
		proc.SweepOwner(owner)
	}
}

func TestCodexAgainstTheRealCLI(t *testing.T) {
	for _, c := range []cliCase{
		{name: "text", prompt: "Say hello", models: []string{"gpt-5.5"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{""},
			summary: "Hello from the mock model.", models2: []string{"gpt-5.5"}},
		{name: "fallback chain on a 429", prompt: "Say hello\nmock: gpt-a=r429 gpt-b=text", models: []string{"gpt-a", "gpt-b"},
			phase: state.PhaseCompleted, codes: []state.ErrorCode{"rate_limit", ""}, summary: "Hello from the mock model.", models2: []string{"gpt-a", "gpt-b"}},
		{name: "shell runs a command", prompt: "Run it\nmock: shell", models: []string{"gpt-5.5"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{""},
			summary: "Done: the tool ran."},
		{name: "patch writes a file", prompt: "Write it\nmock: write", models: []string{"gpt-5.5"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{""}},
		{name: "side effect then a 500 is blocked by the gate", prompt: "Run it\nmock: shell after=r500", models: []string{"gpt-5.5"},
			phase: state.PhaseRecoverableFailed, codes: []state.ErrorCode{"unavailable"}, gate: "side_effect"},
		{name: "quota is permanent", prompt: "x\nmock: quota", models: []string{"gpt-5.5"}, phase: state.PhaseFailed, codes: []state.ErrorCode{"quota"}},
		{name: "401 is permanent", prompt: "x\nmock: r401", models: []string{"gpt-5.5"}, phase: state.PhaseFailed, codes: []state.ErrorCode{"auth"}},
		{name: "403 is permission", prompt: "x\nmock: r403", models: []string{"gpt-5.5"}, phase: state.PhaseFailed, codes: []state.ErrorCode{"permission"}},
		{name: "context overflow is permanent", prompt: "x\nmock: context", models: []string{"gpt-5.5"}, phase: state.PhaseFailed, codes: []state.ErrorCode{"context_overflow"}},
		{name: "500 is retried", prompt: "x\nmock: gpt-a=r500 gpt-b=text", models: []string{"gpt-a", "gpt-b"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{"unavailable", ""}},
		{name: "overloaded is retried", prompt: "x\nmock: gpt-a=overloaded gpt-b=text", models: []string{"gpt-a", "gpt-b"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{"overloaded", ""}},
		{name: "a cut stream is retried", prompt: "x\nmock: gpt-a=cut gpt-b=text", models: []string{"gpt-a", "gpt-b"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{"network", ""}},
		{name: "a silent stream times out in codex", prompt: "x\nmock: gpt-a=hang gpt-b=text", models: []string{"gpt-a", "gpt-b"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{"timeout", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runCLICase(t, c, func(m *mockmodel.Server) runner.Executor { return codexExec(t, m, runner.CodexConfig{}) })
		})
	}
}

func TestClaudeAgainstTheRealCLI(t *testing.T) {
	for _, c := range []cliCase{
		{name: "text", prompt: "Say hello", models: []string{"claude-a"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{""},
			summary: "Hello from the mock model.", models2: []string{"claude-a"}},
		{name: "fallback chain on a 429", prompt: "Say hello\nmock: claude-a=r429 claude-b=text", models: []string{"claude-a", "claude-b"},
			phase: state.PhaseCompleted, codes: []state.ErrorCode{"rate_limit", ""}, models2: []string{"claude-a", "claude-b"}},
		{name: "bash runs a command", prompt: "Run it\nmock: shell", models: []string{"claude-a"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{""},
			summary: "Done: the tool ran."},
		{name: "side effect then a 500 is blocked by the gate", prompt: "Run it\nmock: shell after=r500", models: []string{"claude-a"},
			phase: state.PhaseRecoverableFailed, codes: []state.ErrorCode{"unavailable"}, gate: "side_effect"},
		{name: "write creates a file", prompt: "Write it\nmock: write", models: []string{"claude-a"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{""},
			summary: "Done: the tool ran."},
		{name: "500 is retried", prompt: "x\nmock: claude-a=r500 claude-b=text", models: []string{"claude-a", "claude-b"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{"unavailable", ""}},
		{name: "a cut stream is taken up again by claude itself", prompt: "x\nmock: cut", models: []string{"claude-a"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{""},
			summary: "Hello from the mock model."},
		{name: "credit balance is quota", prompt: "x\nmock: quota", models: []string{"claude-a"}, phase: state.PhaseFailed, codes: []state.ErrorCode{"quota"}},
		{name: "401 is auth", prompt: "x\nmock: r401", models: []string{"claude-a"}, phase: state.PhaseFailed, codes: []state.ErrorCode{"auth"}},
		{name: "403 is permission", prompt: "x\nmock: r403", models: []string{"claude-a"}, phase: state.PhaseFailed, codes: []state.ErrorCode{"permission"}},
		{name: "prompt too long is context overflow", prompt: "x\nmock: context", models: []string{"claude-a"}, phase: state.PhaseFailed, codes: []state.ErrorCode{"context_overflow"}},
		{name: "overloaded is retried", prompt: "x\nmock: claude-a=overloaded claude-b=text", models: []string{"claude-a", "claude-b"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{"overloaded", ""}},
		{name: "no headers times out in claude", prompt: "x\nmock: claude-a=hang_headers claude-b=text", models: []string{"claude-a", "claude-b"}, phase: state.PhaseCompleted, codes: []state.ErrorCode{"timeout", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runCLICase(t, c, func(m *mockmodel.Server) runner.Executor {
				return claudeExec(t, m, runner.ClaudeConfig{AllowedTools: []string{"Bash", "Write"}})
			})
		})
	}
}

// Claude in print mode never asks: what it may not do it denies, and the
// denial is reported as a log line; the run still succeeds, without the
// side effect.
func TestClaudePermissionDenialIsLogged(t *testing.T) {
	mock, err := mockmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Close()
	f := newCLIRunner(t, claudeExec(t, mock, runner.ClaudeConfig{}), "Run it\nmock: shell\nmock-cmd: echo denied > denied.txt", []string{"claude-a"})
	f.run(t, context.Background())
	if f.task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s: %s", f.task.Phase, attemptsText(f.task))
	}
	if !slicesContainsSub(f.rec.logs(), "permission denied: Bash") {
		t.Errorf("no log line for the denial:\n%s", strings.Join(f.rec.logs(), "\n"))
	}
	if f.task.Attempts[0].Facts.SideEffect {
		t.Error("a denied command counted as a side effect")
	}
	if _, err := os.Stat(filepath.Join(f.runner.WorkRoot, f.task.ID, "denied.txt")); err == nil {
		t.Error("the denied command ran")
	}
}

// A model that accepts the request and never answers is stopped by the
// agent's own first-event limit: turn/started and system/init do not
// count as an answer.
func TestSilentModelHitsTheFirstEventLimit(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			var exe runner.Executor
			if cli == "codex" {
				exe = codexExec(t, mock, runner.CodexConfig{})
			} else {
				exe = claudeExec(t, mock, runner.ClaudeConfig{APITimeout: 10 * time.Minute})
			}
			f := newCLIRunner(t, exe, "x\nmock: hang_headers", []string{"m"})
			f.runner.Policy.MaxAttempts = 1
			// Long enough for the CLI to start and say turn_started on a
			// loaded machine; the model never answers, so it fires anyway.
			f.runner.Timeouts.FirstEvent = []time.Duration{10 * time.Second}
			f.run(t, context.Background())
			a := f.task.Attempts[0]
			if a.Error == nil || a.Error.Code != "first_event_timeout" {
				t.Fatalf("attempt %s, want first_event_timeout; logs:\n%s", attemptsText(f.task), strings.Join(f.rec.logs(), "\n"))
			}
			if !contains(f.rec.kinds(), "phase:turn_started") {
				t.Errorf("the turn started before the silence (the limit still fired): %v", f.rec.kinds())
			}
			assertNoMarkedProcess(t, f.runner.Owner)
		})
	}
}

// Cancel while a tool command runs: the CLI is stopped gracefully, the
// task ends cancelled, and no process of the attempt is left, although
// both CLIs start tool commands in sessions of their own.
func TestCancelDuringAToolCommandLeavesNoProcess(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			var exe runner.Executor
			if cli == "codex" {
				exe = codexExec(t, mock, runner.CodexConfig{})
			} else {
				exe = claudeExec(t, mock, runner.ClaudeConfig{AllowedTools: []string{"Bash"}})
			}
			marker := "sleep-" + strconv.Itoa(os.Getpid()) + "-" + cli
			f := newCLIRunner(t, exe, "Sleep\nmock: shell\nmock-cmd: bash -c 'exec -a "+marker+" sleep 300'", []string{"m"})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var once sync.Once
			f.rec.onReport = func(runner.Report) {
				if len(pidsNamed(marker)) > 0 {
					once.Do(func() { cancel(runner.ErrCancelled) })
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.run(t, ctx)
			}()
			// The command starts while the attempt is quiet: look for it.
			deadline := time.Now().Add(60 * time.Second)
			for len(pidsNamed(marker)) == 0 && time.Now().Before(deadline) {
				select {
				case <-done:
					t.Fatalf("the attempt ended before its command ran: %s; logs:\n%s", attemptsText(f.task), strings.Join(f.rec.logs(), "\n"))
				case <-time.After(50 * time.Millisecond):
				}
			}
			once.Do(func() { cancel(runner.ErrCancelled) })
			<-done
			if f.task.Phase != state.PhaseCancelled {
				t.Fatalf("task %s, want cancelled; %s", f.task.Phase, attemptsText(f.task))
			}
			if pids := pidsNamed(marker); len(pids) > 0 {
				t.Fatalf("the tool command outlived the cancelled attempt: %v", pids)
			}
			assertNoMarkedProcess(t, f.runner.Owner)
		})
	}
}

// pidsNamed lists live processes whose argv[0] is name.
func pidsNamed(name string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.HasPrefix(b, []byte(name+"\x00")) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// replies is a person answering approval requests, as the agent's control
// plane round trip would: it records each request and answers by a fixed
// decision.
type replies struct {
	mu       sync.Mutex
	requests []state.ApprovalRequest
	answer   runner.Approval
}

func (r *replies) Await(ctx context.Context, taskID string, req state.ApprovalRequest) (runner.Approval, error) {
	r.mu.Lock()
	r.requests = append(r.requests, req)
	r.mu.Unlock()
	if r.answer == "" {
		<-ctx.Done() // nobody answers
		return "", ctx.Err()
	}
	return r.answer, nil
}

// Codex asks before a command that needs escalation (approval policy
// on-request); the executor answers by the agent's policy, or asks a
// person, who may not answer in time.
func TestCodexApprovals(t *testing.T) {
	for _, c := range []struct {
		name     string
		policy   runner.ApprovalPolicy
		answer   runner.Approval
		ran      bool
		asked    bool
		phases   []string
		logWant  string
		complete bool
	}{
		{name: "accept by policy", policy: runner.ApprovalAcceptAll, ran: true, logWant: "approval accept by policy accept", complete: true},
		{name: "decline by policy", policy: runner.ApprovalDeclineAll, ran: false, logWant: "approval decline by policy decline", complete: true},
		{name: "a person accepts", policy: runner.ApprovalAsk, answer: runner.ApprovalAccept, ran: true, asked: true, logWant: "approval answered: accept", complete: true},
		{name: "a person declines", policy: runner.ApprovalAsk, answer: runner.ApprovalDecline, ran: false, asked: true, logWant: "approval answered: decline", complete: true},
		{name: "nobody answers in time", policy: runner.ApprovalAsk, ran: false, asked: true, logWant: "approval answered: decline", complete: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cliLimit <- struct{}{}
			defer func() { <-cliLimit }()
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			exe := codexExec(t, mock, runner.CodexConfig{Approval: c.policy, Sandbox: "read-only"})
			f := newCLIRunner(t, exe, "Escalate\nmock: escalate\nmock-cmd: echo approved > approved.txt", []string{"gpt-5.5"})
			rep := &replies{answer: c.answer}
			f.runner.Replies = rep
			f.runner.ReplyTimeout = 2 * time.Second
			f.run(t, context.Background())
			if (f.task.Phase == state.PhaseCompleted) != c.complete {
				t.Fatalf("task %s (%s); attempts %s; logs:\n%s", f.task.Phase, f.task.PhaseReason, attemptsText(f.task), strings.Join(f.rec.logs(), "\n"))
			}
			_, err = os.Stat(filepath.Join(f.runner.WorkRoot, f.task.ID, "approved.txt"))
			if ran := err == nil; ran != c.ran {
				t.Errorf("the command ran: %v, want %v; logs:\n%s", ran, c.ran, strings.Join(f.rec.logs(), "\n"))
			}
			if asked := len(rep.requests) > 0; asked != c.asked {
				t.Fatalf("a person was asked: %v, want %v", asked, c.asked)
			}
			if c.asked {
				req := rep.requests[0]
				if req.Kind != "command" || !strings.Contains(req.Command, "approved.txt") || req.Reason == "" {
					t.Errorf("the request does not say what it asks: %+v", req)
				}
				if !contains(f.rec.kinds(), "phase:awaiting_reply") {
					t.Errorf("no phase awaiting_reply reported: %v", f.rec.kinds())
				}
			}
			if !slicesContainsSub(f.rec.logs(), c.logWant) {
				t.Errorf("no log line with %q:\n%s", c.logWant, strings.Join(f.rec.logs(), "\n"))
			}
		})
	}
}

func slicesContainsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
