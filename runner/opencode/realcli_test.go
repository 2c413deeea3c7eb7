package opencode_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/opencode"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real OpenCode binary (pinned, from make tools)
// against the mock model on loopback (its anthropic provider moved
// there), through the runner, confined as agent run confines attempts:
// what they check is what an operator sees, phases, attempts with their
// codes and retry decisions, results, and no process left behind.

var models = []string{"anthropic/claude-a"}

func TestOpenCodeAgainstTheRealCLI(t *testing.T) {
	for _, c := range []runnertest.CLICase{
		{Name: "text", Prompt: "Say hello", Models: models, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.HelloText, Asked: []string{"claude-a"}},
		{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: claude-a=r429 claude-b=text", Models: []string{"anthropic/claude-a", "anthropic/claude-b"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Summary: mockmodel.HelloText, Asked: []string{"claude-a", "claude-b"}},
		{Name: "a tool call runs a command", Prompt: "Run it\nmock: shell", Models: models, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.FinalText, SideEffect: true},
		{Name: "a tool call writes a file", Prompt: "Write it\nmock: write", Models: models, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			SideEffect: true},
		{Name: "side effect then a 429 continues the session", Prompt: "Run it\nmock: shell after=r429", Models: models,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Continued: true, SideEffect: true},
		{Name: "quota is permanent", Prompt: "x\nmock: quota", Models: models, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"quota"}},
		{Name: "401 is auth", Prompt: "x\nmock: r401", Models: models, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}},
		{Name: "403 is permission", Prompt: "x\nmock: r403", Models: models, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"permission"}},
		{Name: "context overflow is permanent", Prompt: "x\nmock: context", Models: models, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"context_overflow"}},
		// OpenCode keeps what a cut stream said as a message of its own
		// and asks again: the turn completes in one attempt.
		{Name: "a cut stream is taken up by OpenCode", Prompt: "x\nmock: cut", Models: models, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.HelloText},
	} {
		c.Confined, c.SlowStart = true, true
		t.Run(c.Name, func(t *testing.T) {
			runnertest.RunCLICase(t, c, func(m *mockmodel.Server) runner.Executor { return runnertest.OpenCodeExec(t, m, opencode.Config{}) })
		})
	}
}

// OpenCode says the tokens of a turn when it ends (its prompt's answer
// has the last model request's, its own record every request's): a
// token budget smaller than one answer's ends the task budget_exceeded
// after that attempt, with the tokens of all its model requests (here a
// tool call's and the answer after it), never retried.
func TestOpenCodeOverItsTokenBudget(t *testing.T) {
	runnertest.LimitCLIs(t)
	mock := runnertest.StartMock(t)
	f := runnertest.NewCLIFixture(t, runnertest.OpenCodeExec(t, mock, opencode.Config{}), "Run it\nmock: shell", models)
	runnertest.Confine(t, f)
	runnertest.SlowStart(f)
	f.Task.MaxTokens = 10                  // the mock's every answer uses more
	f.Runner.OnBudget = state.OnBudgetFail // not parked for a person to raise it
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseFailed || len(f.Task.Attempts) != 1 {
		t.Fatalf("task %s, want failed after 1 attempt; %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	a := f.Task.Attempts[0]
	if a.Error == nil || a.Error.Code != state.CodeBudgetExceeded {
		t.Fatalf("attempt %s", runnertest.AttemptsText(f.Task))
	}
	// Two requests of the mock's: 20 input and 7 output tokens each.
	if a.Usage.InputTokens != 40 || a.Usage.OutputTokens != 14 || a.Usage.TotalTokens != 54 {
		t.Errorf("usage %+v, want both model requests' tokens (40 in, 14 out)", a.Usage)
	}
}

// OpenCode is an ACP agent like any other: --executor acp --executor-bin
// opencode runs it with its profile (opencode.Agent), and a question it
// asks reaches a person the same way.
func TestOpenCodeThroughTheACPExecutor(t *testing.T) {
	runnertest.LimitCLIs(t)
	mock := runnertest.StartMock(t)
	agent, err := opencode.Agent(runner.ApprovalAsk)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := acp.New(acp.Config{Agent: &agent, Approval: runner.ApprovalAsk,
		Base: cli.Base{Bin: clitest.OpenCodeBin(t), Env: clitest.OpenCodeEnv(t, mock), Grace: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if exe.Name() != "acp" || !strings.Contains(exe.Describe(), "OpenCode over ACP") {
		t.Errorf("executor %s, %s", exe.Name(), exe.Describe())
	}
	f := runnertest.NewCLIFixture(t, exe, "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", models)
	runnertest.Confine(t, f)
	runnertest.SlowStart(f)
	rep := &replies{answer: runner.ApprovalAccept}
	f.Runner.Replies = rep
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted || len(rep.requests) != 1 || rep.requests[0].Kind != state.ApprovalCommand {
		t.Fatalf("task %s (%s), questions %+v; logs:\n%s", f.Task.Phase, runnertest.AttemptsText(f.Task), rep.requests, strings.Join(f.Rec.Logs(), "\n"))
	}
	if b, err := os.ReadFile(filepath.Join(f.Runner.WorkRoot, f.Task.ID, "ran.txt")); err != nil || string(b) != "ran\n" {
		t.Errorf("the accepted command's file: %q %v", b, err)
	}
}
