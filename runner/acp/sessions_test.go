package acp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// codex-acp's session (Codex's thread), Gemini CLI's and claude-code-acp's
// (Claude Code's transcript) are continued
// with session/load: the session's record is kept in the task's session
// directory. One the agent cannot load (its record gone, an id it never
// had) ends the attempt session_lost, with no new session in its place.
func TestACPSessions(t *testing.T) {
	for _, c := range []struct {
		name, model, unknown string
		exe                  func(*mockmodel.Server) *acp.Executor
	}{
		{name: "codex-acp", model: "gpt-5.5", unknown: "019a0000-0000-7000-8000-000000000000",
			exe: func(m *mockmodel.Server) *acp.Executor { return runnertest.CodexACPExec(t, m, acp.Config{}) }},
		// Mostly in the minute the session began (acp.Gemini).
		{name: "gemini", model: "gemini-2.5-pro", unknown: "0000dead-0000-4000-8000-000000000000",
			exe: func(m *mockmodel.Server) *acp.Executor { return runnertest.GeminiExec(t, m, acp.Config{}) }},
		{name: "claude-code-acp", model: "claude-a", unknown: "0000dead-0000-4000-8000-000000000000",
			exe: func(m *mockmodel.Server) *acp.Executor { return runnertest.ClaudeCodeACPExec(t, m, acp.Config{}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := func(n int, work, sessions, prompt string, resume *runner.Resume) runner.AttemptSpec {
				id := "a-" + string(rune('0'+n))
				return runner.AttemptSpec{AttemptID: id, WorkDir: work, SessionDir: sessions, Resume: resume,
					Task: runner.TaskInput{ID: "t-1", Prompt: prompt, Attempt: n, AttemptID: id, Model: c.model}}
			}
			mock := runnertest.StartMock(t)
			exe := c.exe(mock)
			work, sessions := t.TempDir(), t.TempDir()
			a1 := runnertest.RunAttempt(context.Background(), t, exe, spec(1, work, sessions, "Say hello (the first turn)", nil), nil)
			id, path := a1.Session()
			if a1.Result() == nil || id == "" || path == "" || !runner.CanResume(exe) {
				t.Fatalf("attempt 1 did not complete with a session kept:\n%s", a1)
			}
			a2 := runnertest.RunAttempt(context.Background(), t, exe, spec(2, work, sessions, "not sent", &runner.Resume{SessionID: id, Path: path, Prompt: "Go on."}), nil)
			if a2.Result() == nil {
				t.Fatalf("attempt 2 did not continue:\n%s", a2)
			}
			if last := mock.Requests()[len(mock.Requests())-1]; !last.Said("user", "the first turn") || !last.Said("user", "Go on.") {
				t.Errorf("the continued request lacks the first turn or the follow-up: %v", last.Conversation)
			}
			before := len(mock.Requests())
			for _, r := range []runner.Resume{{SessionID: c.unknown, Prompt: "Go on."}, {SessionID: id, Path: path + ".gone", Prompt: "Go on."}} {
				a := runnertest.RunAttempt(context.Background(), t, exe, spec(3, work, sessions, "never sent", &r), nil)
				if a.ErrorCode() != state.CodeSessionLost || a.Result() != nil || !strings.Contains(a.Error().Message, r.SessionID) {
					t.Errorf("resuming %+v did not end session_lost naming it:\n%s", r, a)
				}
			}
			if n := len(mock.Requests()) - before; n != 0 {
				t.Errorf("the model was asked %d times for sessions that were lost", n)
			}
		})
	}
}
