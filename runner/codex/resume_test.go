package codex_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests continue a Codex thread across attempts, through the real
// binary against the mock model: each attempt is its own app server, as
// in the agent.

const (
	firstPrompt = "Say hello (the first turn)"
	followUp    = "Your turn was cut short. Go on where you were."
)

// spec is an attempt of task t-1 in work.
func spec(n int, work, prompt string, resume *runner.Resume) runner.AttemptSpec {
	id := "a-" + string(rune('0'+n))
	return runner.AttemptSpec{AttemptID: id, WorkDir: work, Resume: resume,
		Task: runner.TaskInput{ID: "t-1", Prompt: prompt, Attempt: n, AttemptID: id, Model: "gpt-5.5"}}
}

// A continue resumes the thread (thread/resume) and sends the follow-up:
// the same thread, and the model sees the earlier turn, its own earlier
// answer and the follow-up. Confined too: the rollout is in CODEX_HOME,
// which only the executor makes writable.
func TestCodexContinuesItsThread(t *testing.T) {
	for _, confined := range []bool{false, true} {
		name := "unconfined"
		if confined {
			name = "confined"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.CodexExec(t, mock, codex.Config{})
			if !runner.CanResume(exe) {
				t.Fatal("the codex executor does not say it resumes")
			}
			work := t.TempDir()
			s1 := spec(1, work, firstPrompt, nil)
			if confined {
				s1.TempDir = t.TempDir()
				s1.Confine = runnertest.Confined(t, work, s1.TempDir)
			}
			a1 := runnertest.RunAttempt(context.Background(), t, exe, s1, nil)
			if a1.Result() == nil || a1.Result().Summary != mockmodel.HelloText {
				t.Fatalf("attempt 1 did not complete:\n%s", a1)
			}
			id, path := a1.Session()
			if id == "" || path == "" {
				t.Fatalf("attempt 1 bound session %q at %q:\n%s", id, path, a1)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the rollout the thread is kept in: %v", err)
			}
			before := len(mock.Requests())

			s2 := spec(2, work, firstPrompt, &runner.Resume{SessionID: id, Path: path, Prompt: followUp})
			s2.TempDir, s2.Confine = s1.TempDir, s1.Confine
			a2 := runnertest.RunAttempt(context.Background(), t, exe, s2, nil)
			if a2.Result() == nil || a2.Exit.Turn != runner.TurnCompleted {
				t.Fatalf("attempt 2 did not complete:\n%s", a2)
			}
			if id2, path2 := a2.Session(); id2 != id || path2 != path {
				t.Errorf("attempt 2 bound %s at %s, want %s at %s", id2, path2, id, path)
			}
			if got := a2.Sessions(); len(got) != 1 {
				t.Errorf("attempt 2's events name sessions %v, want only %s", got, id)
			}
			reqs := mock.Requests()
			if len(reqs) != before+1 {
				t.Fatalf("%d model requests for the continue, want 1", len(reqs)-before)
			}
			last := reqs[len(reqs)-1]
			for _, w := range []struct {
				role mockmodel.Role
				text string
			}{{mockmodel.RoleUser, firstPrompt}, {mockmodel.RoleAssistant, mockmodel.HelloText}, {mockmodel.RoleUser, followUp}} {
				if !last.Said(w.role, w.text) {
					t.Errorf("the continued request does not carry %s %q: %v", w.role, w.text, last.Conversation)
				}
			}
		})
	}
}

// A thread Codex cannot resume (its rollout deleted, or an id it never
// had) ends the attempt with session_lost, and no new thread is started
// in its place: the model is not asked anything.
func TestCodexLostThreadIsSessionLost(t *testing.T) {
	for _, c := range []struct {
		name string
		lose func(t *testing.T, id, path string) runner.Resume
	}{
		{"the rollout deleted", func(t *testing.T, id, path string) runner.Resume {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			return runner.Resume{SessionID: id, Path: path, Prompt: followUp}
		}},
		{"a thread codex never had", func(t *testing.T, id, path string) runner.Resume {
			return runner.Resume{SessionID: "019a0000-0000-7000-8000-000000000000", Path: path + ".nothing", Prompt: followUp}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.CodexExec(t, mock, codex.Config{})
			work := t.TempDir()
			a1 := runnertest.RunAttempt(context.Background(), t, exe, spec(1, work, firstPrompt, nil), nil)
			id, path := a1.Session()
			if a1.Result() == nil || path == "" {
				t.Fatalf("attempt 1:\n%s", a1)
			}
			before := len(mock.Requests())
			r := c.lose(t, id, path)
			a2 := runnertest.RunAttempt(context.Background(), t, exe, spec(2, work, "the task's prompt, never to be sent", &r), nil)
			if a2.ErrorCode() != state.CodeSessionLost || a2.Result() != nil || a2.Exit.Turn != runner.TurnFailed {
				t.Fatalf("attempt 2 did not end session_lost:\n%s", a2)
			}
			if a2.Error().Message == "" {
				t.Error("the session_lost error says nothing")
			}
			if got := mock.Requests()[before:]; len(got) != 0 {
				t.Errorf("the model was asked %d times after the thread was lost: a new thread started", len(got))
			}
			for _, sid := range a2.Sessions() {
				if sid == r.SessionID {
					t.Errorf("the lost attempt bound the session it could not resume")
				}
			}
		})
	}
}

// A turn cut mid-stream, by the runner's cancel (turn/interrupt) or by a
// SIGKILL of the app server, leaves its thread on disk with the prompt in
// it: the next attempt resumes it, and the model sees the cut turn's
// prompt and the follow-up.
func TestCodexThreadSurvivesACutTurn(t *testing.T) {
	for _, kill := range []bool{false, true} {
		name := "cancelled"
		if kill {
			name = "SIGKILL"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.CodexExec(t, mock, codex.Config{})
			work := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Cut once the model is asked (it never answers: hang).
			go func() {
				for len(mock.Requests()) == 0 && ctx.Err() == nil {
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(200 * time.Millisecond)
				if kill && runnertest.KillCLI(t, clitest.CodexBin(t)) > 0 {
					return
				}
				cancel()
			}()
			cut := "Work on it (the turn that is cut)\nmock: hang"
			a1 := runnertest.RunAttempt(ctx, t, exe, spec(1, work, cut, nil), nil)
			cancel()
			id, path := a1.Session()
			if a1.Result() != nil || id == "" || path == "" {
				t.Fatalf("attempt 1 was not cut with its session bound:\n%s", a1)
			}
			if kill && a1.Exit.Killed {
				t.Fatalf("attempt 1 was cancelled, not killed:\n%s", a1)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the cut turn's rollout: %v", err)
			}
			// The model never answered the cut turn, so its "mock: hang"
			// would still choose: the follow-up says its own.
			a2 := runnertest.RunAttempt(context.Background(), t, exe, spec(2, work, cut, &runner.Resume{SessionID: id, Path: path, Prompt: followUp + "\nmock: text"}), nil)
			if a2.Result() == nil {
				t.Fatalf("attempt 2 did not complete:\n%s", a2)
			}
			if got, _ := a2.Session(); got != id {
				t.Errorf("attempt 2 bound %s, want %s", got, id)
			}
			reqs := mock.Requests()
			last := reqs[len(reqs)-1]
			if !last.Said(mockmodel.RoleUser, "the turn that is cut") || !last.Said(mockmodel.RoleUser, followUp) {
				t.Errorf("the continued request does not carry the cut turn's prompt and the follow-up: %v", last.Conversation)
			}
		})
	}
}
