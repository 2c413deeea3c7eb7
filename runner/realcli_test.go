package runner_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real Codex and Claude Code binaries (pinned, from
// make tools) against the mock model on loopback, through the runner: what
// they check is what an operator sees, phases, attempts with their codes
// and retry decisions, results, and no process left behind.

func TestCodexAgainstTheRealCLI(t *testing.T) {
	for _, c := range []runnertest.CLICase{
		{Name: "text", Prompt: "Say hello", Models: []string{"gpt-5.5"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Hello from the mock model.", Asked: []string{"gpt-5.5"}},
		{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: gpt-a=r429 gpt-b=text", Models: []string{"gpt-a", "gpt-b"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Summary: "Hello from the mock model.", Asked: []string{"gpt-a", "gpt-b"}},
		{Name: "shell runs a command", Prompt: "Run it\nmock: shell", Models: []string{"gpt-5.5"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Done: the tool ran."},
		{Name: "patch writes a file", Prompt: "Write it\nmock: write", Models: []string{"gpt-5.5"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""}},
		{Name: "side effect then a 500 is blocked by the gate", Prompt: "Run it\nmock: shell after=r500", Models: []string{"gpt-5.5"},
			Phase: state.PhaseRecoverableFailed, Codes: []state.ErrorCode{"unavailable"}, Gate: "side_effect"},
		{Name: "quota is permanent", Prompt: "x\nmock: quota", Models: []string{"gpt-5.5"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"quota"}},
		{Name: "401 is permanent", Prompt: "x\nmock: r401", Models: []string{"gpt-5.5"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}},
		{Name: "403 is permission", Prompt: "x\nmock: r403", Models: []string{"gpt-5.5"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"permission"}},
		{Name: "context overflow is permanent", Prompt: "x\nmock: context", Models: []string{"gpt-5.5"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"context_overflow"}},
		{Name: "500 is retried", Prompt: "x\nmock: gpt-a=r500 gpt-b=text", Models: []string{"gpt-a", "gpt-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}},
		{Name: "overloaded is retried", Prompt: "x\nmock: gpt-a=overloaded gpt-b=text", Models: []string{"gpt-a", "gpt-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"overloaded", ""}},
		{Name: "a cut stream is retried", Prompt: "x\nmock: gpt-a=cut gpt-b=text", Models: []string{"gpt-a", "gpt-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"network", ""}},
		{Name: "a silent stream times out in codex", Prompt: "x\nmock: gpt-a=hang gpt-b=text", Models: []string{"gpt-a", "gpt-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"timeout", ""}},
	} {
		t.Run(c.Name, func(t *testing.T) {
			runnertest.RunCLICase(t, c, func(m *mockmodel.Server) runner.Executor { return runnertest.CodexExec(t, m, runner.CodexConfig{}) })
		})
	}
}

func TestClaudeAgainstTheRealCLI(t *testing.T) {
	for _, c := range []runnertest.CLICase{
		{Name: "text", Prompt: "Say hello", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Hello from the mock model.", Asked: []string{"claude-a"}},
		{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: claude-a=r429 claude-b=text", Models: []string{"claude-a", "claude-b"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Asked: []string{"claude-a", "claude-b"}},
		{Name: "bash runs a command", Prompt: "Run it\nmock: shell", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Done: the tool ran."},
		{Name: "side effect then a 500 is blocked by the gate", Prompt: "Run it\nmock: shell after=r500", Models: []string{"claude-a"},
			Phase: state.PhaseRecoverableFailed, Codes: []state.ErrorCode{"unavailable"}, Gate: "side_effect"},
		{Name: "write creates a file", Prompt: "Write it\nmock: write", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Done: the tool ran."},
		{Name: "500 is retried", Prompt: "x\nmock: claude-a=r500 claude-b=text", Models: []string{"claude-a", "claude-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}},
		{Name: "a cut stream is taken up again by claude itself", Prompt: "x\nmock: cut", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Hello from the mock model."},
		{Name: "credit balance is quota", Prompt: "x\nmock: quota", Models: []string{"claude-a"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"quota"}},
		{Name: "401 is auth", Prompt: "x\nmock: r401", Models: []string{"claude-a"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}},
		{Name: "403 is permission", Prompt: "x\nmock: r403", Models: []string{"claude-a"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"permission"}},
		{Name: "prompt too long is context overflow", Prompt: "x\nmock: context", Models: []string{"claude-a"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"context_overflow"}},
		{Name: "overloaded is retried", Prompt: "x\nmock: claude-a=overloaded claude-b=text", Models: []string{"claude-a", "claude-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"overloaded", ""}},
		{Name: "no headers times out in claude", Prompt: "x\nmock: claude-a=hang_headers claude-b=text", Models: []string{"claude-a", "claude-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"timeout", ""}},
	} {
		t.Run(c.Name, func(t *testing.T) {
			runnertest.RunCLICase(t, c, func(m *mockmodel.Server) runner.Executor {
				return runnertest.ClaudeExec(t, m, runner.ClaudeConfig{AllowedTools: []string{"Bash", "Write"}})
			})
		})
	}
}

// Claude in print mode never asks: what it may not do it denies, and the
// denial is reported as a log line; the run still succeeds, without the
// side effect.
func TestClaudePermissionDenialIsLogged(t *testing.T) {
	mock := runnertest.StartMock(t)
	f := runnertest.NewCLIFixture(t, runnertest.ClaudeExec(t, mock, runner.ClaudeConfig{}), "Run it\nmock: shell\nmock-cmd: echo denied > denied.txt", []string{"claude-a"})
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s: %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	if !runnertest.ContainsSub(f.Rec.Logs(), "permission denied: Bash") {
		t.Errorf("no log line for the denial:\n%s", strings.Join(f.Rec.Logs(), "\n"))
	}
	if f.Task.Attempts[0].Facts.SideEffect {
		t.Error("a denied command counted as a side effect")
	}
	if _, err := os.Stat(filepath.Join(f.Runner.WorkRoot, f.Task.ID, "denied.txt")); err == nil {
		t.Error("the denied command ran")
	}
}

// A model that accepts the request and never answers is stopped by the
// agent's own first-event limit: turn/started and system/init do not
// count as an answer.
func TestSilentModelHitsTheFirstEventLimit(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock := runnertest.StartMock(t)
			var exe runner.Executor
			if cli == "codex" {
				exe = runnertest.CodexExec(t, mock, runner.CodexConfig{})
			} else {
				exe = runnertest.ClaudeExec(t, mock, runner.ClaudeConfig{APITimeout: 10 * time.Minute})
			}
			f := runnertest.NewCLIFixture(t, exe, "x\nmock: hang_headers", []string{"m"})
			f.Runner.Policy.MaxAttempts = 1
			// Long enough for the CLI to start and say turn_started on a
			// loaded machine; the model never answers, so it fires anyway.
			f.Runner.Timeouts.FirstEvent = []time.Duration{10 * time.Second}
			f.Run(t, context.Background())
			a := f.Task.Attempts[0]
			if a.Error == nil || a.Error.Code != "first_event_timeout" {
				t.Fatalf("attempt %s, want first_event_timeout; logs:\n%s", runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
			}
			if !slices.Contains(f.Rec.Kinds(), "phase:turn_started") {
				t.Errorf("the turn started before the silence (the limit still fired): %v", f.Rec.Kinds())
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// Cancel while a tool command runs: the CLI is stopped gracefully, the
// task ends cancelled, and no process of the attempt is left, although
// both CLIs start tool commands in sessions of their own.
func TestCancelDuringAToolCommandLeavesNoProcess(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock := runnertest.StartMock(t)
			var exe runner.Executor
			if cli == "codex" {
				exe = runnertest.CodexExec(t, mock, runner.CodexConfig{})
			} else {
				exe = runnertest.ClaudeExec(t, mock, runner.ClaudeConfig{AllowedTools: []string{"Bash"}})
			}
			marker := "sleep-" + strconv.Itoa(os.Getpid()) + "-" + cli
			f := runnertest.NewCLIFixture(t, exe, "Sleep\nmock: shell\nmock-cmd: bash -c 'exec -a "+marker+" sleep 300'", []string{"m"})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var once sync.Once
			f.Rec.OnReport = func(runner.Report) {
				if len(pidsNamed(marker)) > 0 {
					once.Do(func() { cancel(runner.ErrCancelled) })
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.Run(t, ctx)
			}()
			// The command starts while the attempt is quiet: look for it.
			deadline := time.Now().Add(60 * time.Second)
			for len(pidsNamed(marker)) == 0 && time.Now().Before(deadline) {
				select {
				case <-done:
					t.Fatalf("the attempt ended before its command ran: %s; logs:\n%s", runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
				case <-time.After(50 * time.Millisecond):
				}
			}
			once.Do(func() { cancel(runner.ErrCancelled) })
			<-done
			if f.Task.Phase != state.PhaseCancelled {
				t.Fatalf("task %s, want cancelled; %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
			}
			if pids := pidsNamed(marker); len(pids) > 0 {
				t.Fatalf("the tool command outlived the cancelled attempt: %v", pids)
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
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
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.CodexExec(t, mock, runner.CodexConfig{Approval: c.policy, Sandbox: "read-only"})
			f := runnertest.NewCLIFixture(t, exe, "Escalate\nmock: escalate\nmock-cmd: echo approved > approved.txt", []string{"gpt-5.5"})
			rep := &replies{answer: c.answer}
			f.Runner.Replies = rep
			f.Runner.ReplyTimeout = 2 * time.Second
			f.Run(t, context.Background())
			if (f.Task.Phase == state.PhaseCompleted) != c.complete {
				t.Fatalf("task %s (%s); attempts %s; logs:\n%s", f.Task.Phase, f.Task.PhaseReason, runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
			}
			_, err := os.Stat(filepath.Join(f.Runner.WorkRoot, f.Task.ID, "approved.txt"))
			if ran := err == nil; ran != c.ran {
				t.Errorf("the command ran: %v, want %v; logs:\n%s", ran, c.ran, strings.Join(f.Rec.Logs(), "\n"))
			}
			if asked := len(rep.requests) > 0; asked != c.asked {
				t.Fatalf("a person was asked: %v, want %v", asked, c.asked)
			}
			if c.asked {
				req := rep.requests[0]
				if req.Kind != "command" || !strings.Contains(req.Command, "approved.txt") || req.Reason == "" {
					t.Errorf("the request does not say what it asks: %+v", req)
				}
				if !slices.Contains(f.Rec.Kinds(), "phase:awaiting_reply") {
					t.Errorf("no phase awaiting_reply reported: %v", f.Rec.Kinds())
				}
			}
			if !runnertest.ContainsSub(f.Rec.Logs(), c.logWant) {
				t.Errorf("no log line with %q:\n%s", c.logWant, strings.Join(f.Rec.Logs(), "\n"))
			}
		})
	}
}
