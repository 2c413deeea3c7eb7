package codex_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real Codex binary (pinned, from make tools) against
// the mock model on loopback, through the runner: what they check is what
// an operator sees, phases, attempts with their codes and retry decisions,
// results, and no process left behind.

func TestCodexAgainstTheRealCLI(t *testing.T) {
	for _, c := range []runnertest.CLICase{
		{Name: "text", Prompt: "Say hello", Models: []string{"gpt-5.5"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Hello from the mock model.", Asked: []string{"gpt-5.5"}},
		{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: gpt-a=r429 gpt-b=text", Models: []string{"gpt-a", "gpt-b"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Summary: "Hello from the mock model.", Asked: []string{"gpt-a", "gpt-b"}},
		{Name: "shell runs a command", Prompt: "Run it\nmock: shell", Models: []string{"gpt-5.5"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Done: the tool ran."},
		{Name: "patch writes a file", Prompt: "Write it\nmock: write", Models: []string{"gpt-5.5"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""}},
		{Name: "side effect then a 500 continues the session", Prompt: "Run it\nmock: shell after=r500", Models: []string{"gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}, Continued: true},
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
			runnertest.RunCLICase(t, c, func(m *mockmodel.Server) runner.Executor { return runnertest.CodexExec(t, m, codex.Config{}) })
		})
	}
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
			exe := runnertest.CodexExec(t, mock, codex.Config{Approval: c.policy, Sandbox: "read-only"})
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
