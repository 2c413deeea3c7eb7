package acp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real codex-acp (Codex over ACP; pinned, from make
// tools) against the mock model on loopback, through the runner,
// confined as agent run confines attempts.

func TestCodexACPAgainstTheRealCLI(t *testing.T) {
	gpt := []string{"gpt-5.5"}
	for _, c := range []runnertest.CLICase{
		{Name: "text", Prompt: "Say hello", Models: gpt, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.HelloText, Asked: gpt},
		{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: gpt-5.4=r429 gpt-5.5=text", Models: []string{"gpt-5.4", "gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Summary: mockmodel.HelloText, Asked: []string{"gpt-5.4", "gpt-5.5"}},
		{Name: "a tool call runs a command", Prompt: "Run it\nmock: shell", Models: gpt, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.FinalText, SideEffect: true},
		{Name: "a patch writes a file", Prompt: "Write it\nmock: write", Models: gpt, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""}, SideEffect: true},
		{Name: "side effect then a 500 continues the session", Prompt: "Run it\nmock: shell after=r500", Models: gpt,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}, Continued: true, SideEffect: true},
		// codex-acp 0.16.0 says a spent quota (429 insufficient_quota)
		// as any 429 ("exceeded retry limit, last status: 429 Too Many
		// Requests"): it is taken for a rate limit, and retried.
		{Name: "quota is said as a 429", Prompt: "x\nmock: quota", Models: gpt, Phase: state.PhaseFailed,
			Codes: []state.ErrorCode{"rate_limit", "rate_limit", "rate_limit"}},
		{Name: "401 is auth", Prompt: "x\nmock: r401", Models: gpt, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}},
		{Name: "403 is permission", Prompt: "x\nmock: r403", Models: gpt, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"permission"}},
		{Name: "context overflow is permanent", Prompt: "x\nmock: context", Models: gpt, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"context_overflow"}},
		{Name: "overloaded is retried", Prompt: "x\nmock: gpt-5.4=overloaded gpt-5.5=text", Models: []string{"gpt-5.4", "gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"overloaded", ""}},
		{Name: "a cut stream is retried", Prompt: "x\nmock: gpt-5.4=cut gpt-5.5=text", Models: []string{"gpt-5.4", "gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"network", ""}},
		{Name: "a silent stream times out in codex", Prompt: "x\nmock: gpt-5.4=hang gpt-5.5=text", Models: []string{"gpt-5.4", "gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"timeout", ""}},
	} {
		c.Confined = true
		t.Run(c.Name, func(t *testing.T) {
			runnertest.RunCLICase(t, c, func(m *mockmodel.Server) runner.Executor { return runnertest.CodexACPExec(t, m, acp.Config{}) })
		})
	}
}

// codex-acp asks when Codex would (its approval policy on-request, its
// sandbox read-only, not confined by the agent: Codex's own sandbox is
// bubblewrap, which cannot run under Landlock): a command the model wants
// run outside the sandbox. The executor answers by the policy, or asks a
// person with the command, and Codex runs it only if accepted.
func TestCodexACPAsks(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy runner.ApprovalPolicy
		answer runner.Approval
		ran    bool
		asked  bool
		why    string
	}{
		{name: "accept by policy", policy: runner.ApprovalAcceptAll, ran: true},
		{name: "decline by policy", policy: runner.ApprovalDeclineAll, why: "declined by the approval policy"},
		{name: "a person accepts", policy: runner.ApprovalAsk, answer: runner.ApprovalAccept, ran: true, asked: true},
		{name: "a person declines", policy: runner.ApprovalAsk, answer: runner.ApprovalDecline, asked: true, why: "declined by a person"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.CodexACPExec(t, mock, acp.Config{Approval: c.policy, Base: cli.Base{
				Args: []string{"-c", `approval_policy="on-request"`, "-c", `sandbox_mode="read-only"`}}})
			f := runnertest.NewCLIFixture(t, exe, "Escalate\nmock: escalate\nmock-cmd: echo approved > approved.txt", []string{"gpt-5.5"})
			rep := &replies{answer: c.answer}
			f.Runner.Replies = rep
			f.Run(t, context.Background())
			logs := strings.Join(f.Rec.Logs(), "\n")
			if f.Task.Phase != state.PhaseCompleted {
				t.Fatalf("task %s (%s); attempts %s; logs:\n%s", f.Task.Phase, f.Task.PhaseReason, runnertest.AttemptsText(f.Task), logs)
			}
			_, err := os.Stat(filepath.Join(f.Runner.WorkRoot, f.Task.ID, "approved.txt"))
			if ran := err == nil; ran != c.ran {
				t.Errorf("the command ran: %v, want %v; logs:\n%s", ran, c.ran, logs)
			}
			if asked := len(rep.requests) > 0; asked != c.asked {
				t.Fatalf("a person was asked: %v, want %v; logs:\n%s", asked, c.asked, logs)
			}
			if c.asked {
				req := rep.requests[0]
				if req.Kind != state.ApprovalCommand || !strings.Contains(req.Command, "approved.txt") {
					t.Errorf("the request does not say what it asks: %+v", req)
				}
			}
			checkDenied(t, f.Task, c.why)
		})
	}
}
