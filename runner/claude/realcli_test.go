package claude_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real Claude Code binary (pinned, from make tools) against
// the mock model on loopback, through the runner: what they check is what
// an operator sees, phases, attempts with their codes and retry decisions,
// results, and no process left behind.

func TestClaudeAgainstTheRealCLI(t *testing.T) {
	for _, c := range []runnertest.CLICase{
		{Name: "text", Prompt: "Say hello", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Hello from the mock model.", Asked: []string{"claude-a"}},
		{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: claude-a=r429 claude-b=text", Models: []string{"claude-a", "claude-b"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Asked: []string{"claude-a", "claude-b"}},
		{Name: "bash runs a command", Prompt: "Run it\nmock: shell", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Done: the tool ran."},
		{Name: "side effect then a 500 continues the session", Prompt: "Run it\nmock: shell after=r500", Models: []string{"claude-a"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}, Continued: true},
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
				return runnertest.ClaudeExec(t, m, claude.Config{AllowedTools: []string{"Bash", "Write"}})
			})
		})
	}
}

// Claude in print mode never asks: what it may not do it denies, and the
// denial is reported as a log line; the run still succeeds, without the
// side effect.
func TestClaudePermissionDenialIsLogged(t *testing.T) {
	mock := runnertest.StartMock(t)
	f := runnertest.NewCLIFixture(t, runnertest.ClaudeExec(t, mock, claude.Config{}), "Run it\nmock: shell\nmock-cmd: echo denied > denied.txt", []string{"claude-a"})
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
