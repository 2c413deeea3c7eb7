package acp_test

import (
	"testing"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real claude-code-acp (Claude Code over ACP,
// pinned, from make tools), running the pinned Claude Code, against the
// mock model on loopback (the Anthropic API), through the runner,
// confined as agent run confines attempts.

func TestClaudeCodeACPAgainstTheRealCLI(t *testing.T) {
	one := []string{"claude-a"}
	two := []string{"claude-a", "claude-b"}
	for _, c := range []struct {
		runnertest.CLICase
		approval runner.ApprovalPolicy
	}{
		{CLICase: runnertest.CLICase{Name: "text", Prompt: "Say hello", Models: one, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.HelloText, Asked: one}},
		{CLICase: runnertest.CLICase{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: claude-a=r429 claude-b=text", Models: two,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Summary: mockmodel.HelloText, Asked: two}},
		{CLICase: runnertest.CLICase{Name: "a tool call runs a command", Prompt: "Run it\nmock: shell", Models: one, Phase: state.PhaseCompleted,
			Codes: []state.ErrorCode{""}, Summary: mockmodel.FinalText, SideEffect: true}, approval: runner.ApprovalAcceptAll},
		{CLICase: runnertest.CLICase{Name: "a tool call writes a file", Prompt: "Write it\nmock: write", Models: one, Phase: state.PhaseCompleted,
			Codes: []state.ErrorCode{""}, SideEffect: true}, approval: runner.ApprovalAcceptAll},
		{CLICase: runnertest.CLICase{Name: "side effect then a 500 continues the session", Prompt: "Run it\nmock: shell after=r500", Models: one,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}, Continued: true, SideEffect: true}, approval: runner.ApprovalAcceptAll},
		{CLICase: runnertest.CLICase{Name: "quota is permanent", Prompt: "x\nmock: quota", Models: one, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"quota"}}},
		{CLICase: runnertest.CLICase{Name: "401 is auth", Prompt: "x\nmock: r401", Models: one, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}}},
		{CLICase: runnertest.CLICase{Name: "403 is permission", Prompt: "x\nmock: r403", Models: one, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"permission"}}},
		{CLICase: runnertest.CLICase{Name: "context overflow is permanent", Prompt: "x\nmock: context", Models: one, Phase: state.PhaseFailed,
			Codes: []state.ErrorCode{"context_overflow"}}},
		{CLICase: runnertest.CLICase{Name: "overloaded is retried", Prompt: "x\nmock: claude-a=overloaded claude-b=text", Models: two,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"overloaded", ""}}},
		// Claude Code's own fallback after a cut stream (the request
		// again, not streamed) is off (acp.ClaudeCodeACP): its answer
		// would not reach ACP. The cut is network, and the next model
		// continues the session.
		{CLICase: runnertest.CLICase{Name: "a cut stream is a network failure", Prompt: "x\nmock: claude-a=cut claude-b=text", Models: two,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"network", ""}, Summary: mockmodel.HelloText}},
		// Claude Code 2.1.330 waits on a stream gone silent after its
		// first event (a minute and more, its idle limits aside), and
		// claude-code-acp says nothing of the event: the agent's
		// first-event limit ends the attempt.
		{CLICase: runnertest.CLICase{Name: "a silent stream hits the first-event limit", Prompt: "x\nmock: claude-a=hang claude-b=text", Models: two,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"first_event_timeout", ""}, Summary: mockmodel.HelloText}},
	} {
		c.Confined, c.SlowStart = true, true
		t.Run(c.Name, func(t *testing.T) {
			runnertest.RunCLICase(t, c.CLICase, func(m *mockmodel.Server) runner.Executor {
				return runnertest.ClaudeCodeACPExec(t, m, acp.Config{Approval: c.approval})
			})
		})
	}
}
