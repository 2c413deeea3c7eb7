package opencode_test

import (
	"context"
	"github.com/edgeagent/agent/internal/testkit"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/opencode"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// The tests below continue OpenCode's session across attempts, each its
// own OpenCode process as in the agent, straight through the executor
// (runnertest.RunAttempt): it loads the session (session/load) and sends
// the follow-up.

const (
	firstPrompt = "Say hello (the first turn)"
	followUp    = "Your turn was cut short. Go on where you were."
)

// attemptSpec is attempt n of task t-1, in work, its session directory
// sessions.
func attemptSpec(n int, work, sessions, prompt string, resume *runner.Resume) runner.AttemptSpec {
	id := "a-" + strconv.Itoa(n)
	return runner.AttemptSpec{AttemptID: id, WorkDir: work, SessionDir: sessions, Resume: resume,
		Task: runner.TaskInput{ID: "t-1", Prompt: prompt, Attempt: n, AttemptID: id, Model: "anthropic/claude-a"}}
}

// A continue loads the session and sends the follow-up, not the task's
// prompt: the same session goes on, and the model sees the first turn's
// prompt, its own answer and the follow-up; the history OpenCode replays
// as it loads the session is not reported as the attempt's output.
// Confined too, without /tmp: OpenCode writes only its data, state and
// cache directories, which the executor makes writable, never its
// configuration.
func TestAContinueLoadsTheSession(t *testing.T) {
	for _, confined := range []bool{false, true} {
		name := "unconfined"
		if confined {
			name = "confined"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.OpenCodeExec(t, mock, opencode.Config{})
			work, sessions := t.TempDir(), t.TempDir()
			s1 := attemptSpec(1, work, sessions, firstPrompt, nil)
			if confined {
				s1.TempDir = t.TempDir()
				s1.Confine = runnertest.Confined(t, work, s1.TempDir, sessions)
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
				t.Fatalf("the session's record: %v", err)
			}
			before := len(mock.Requests())

			s2 := attemptSpec(2, work, sessions, "the task's prompt, not to be sent again", &runner.Resume{SessionID: id, Path: path, Prompt: followUp})
			s2.TempDir, s2.Confine = s1.TempDir, s1.Confine
			a2 := runnertest.RunAttempt(context.Background(), t, exe, s2, nil)
			if a2.Result() == nil || a2.Exit.Turn != runner.TurnCompleted {
				t.Fatalf("attempt 2 did not complete:\n%s", a2)
			}
			if id2, path2 := a2.Session(); id2 != id || path2 != path {
				t.Errorf("attempt 2 bound %s at %s, want %s at %s", id2, path2, id, path)
			}
			outputs := 0
			for _, ev := range a2.Events() {
				if ev.Type == runner.EventOutput {
					outputs++
				}
			}
			if outputs != 1 {
				t.Errorf("attempt 2 reported %d outputs, want its own answer only (not the replayed history):\n%s", outputs, a2)
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
			if last.Said(mockmodel.RoleUser, "not to be sent again") {
				t.Error("the continue sent the task's prompt again")
			}
		})
	}
}

// A session that cannot be continued (its record deleted, or an id
// OpenCode never had) ends the attempt with session_lost, and no new
// session is started in its place: the model is asked nothing.
func TestALostSessionIsSessionLost(t *testing.T) {
	for _, lost := range []struct {
		name string
		lose func(t *testing.T, id, path string) runner.Resume
	}{
		{"record deleted", func(t *testing.T, id, path string) runner.Resume {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			return runner.Resume{SessionID: id, Path: path, Prompt: followUp}
		}},
		{"unknown id", func(t *testing.T, id, path string) runner.Resume {
			return runner.Resume{SessionID: "ses_0000000000000000000000000", Prompt: followUp}
		}},
	} {
		t.Run(lost.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.OpenCodeExec(t, mock, opencode.Config{})
			work, sessions := t.TempDir(), t.TempDir()
			a1 := runnertest.RunAttempt(context.Background(), t, exe, attemptSpec(1, work, sessions, firstPrompt, nil), nil)
			id, path := a1.Session()
			if a1.Result() == nil || path == "" {
				t.Fatalf("attempt 1:\n%s", a1)
			}
			before := len(mock.Requests())
			r := lost.lose(t, id, path)
			a2 := runnertest.RunAttempt(context.Background(), t, exe, attemptSpec(2, work, sessions, "the task's prompt, never to be sent again", &r), nil)
			if a2.ErrorCode() != state.CodeSessionLost || a2.Result() != nil || a2.Exit.Turn != runner.TurnFailed {
				t.Fatalf("attempt 2 did not end session_lost:\n%s", a2)
			}
			if msg := a2.Error().Message; !strings.Contains(msg, r.SessionID) {
				t.Errorf("the session_lost error does not name the session: %q", msg)
			}
			if got := mock.Requests()[before:]; len(got) != 0 {
				t.Errorf("the model was asked %d times after the session was lost: a new session started", len(got))
			}
			if slices.Contains(a2.Sessions(), r.SessionID) {
				t.Errorf("the lost attempt bound the session it could not continue:\n%s", a2)
			}
		})
	}
}

// A turn cut mid-stream, by the runner's cancel (session/cancel) or by a
// SIGKILL of OpenCode, leaves its session in OpenCode's database with the
// prompt in it: the next attempt loads it, and the model sees the cut
// turn's prompt and the follow-up.
func TestASessionSurvivesACutTurn(t *testing.T) {
	bin := clitest.OpenCodeBin(t)
	for _, kill := range []bool{false, true} {
		name := "cancelled"
		if kill {
			name = "SIGKILL"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.OpenCodeExec(t, mock, opencode.Config{})
			work, sessions := t.TempDir(), t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cutDone := make(chan struct{})
			defer func() { <-cutDone }()
			go func() {
				defer close(cutDone)
				testkit.Until(testkit.HangAfter, func() bool { return len(mock.Requests()) > 0 || ctx.Err() != nil })
				time.Sleep(300 * time.Millisecond) // the scenario: the cut comes 300 ms into the turn
				if kill && runnertest.KillCLI(t, bin) > 0 {
					return
				}
				cancel()
			}()
			cut := "Work on it (the turn that is cut)\nmock: hang"
			a1 := runnertest.RunAttempt(ctx, t, exe, attemptSpec(1, work, sessions, cut, nil), nil)
			cancel()
			id, path := a1.Session()
			if a1.Result() != nil || id == "" || path == "" {
				t.Fatalf("attempt 1 was not cut with its session bound:\n%s", a1)
			}
			if kill && a1.Exit.Killed {
				t.Fatalf("attempt 1 was cancelled, not killed:\n%s", a1)
			}
			a2 := runnertest.RunAttempt(context.Background(), t, exe, attemptSpec(2, work, sessions, cut, &runner.Resume{SessionID: id, Path: path, Prompt: followUp + "\nmock: text"}), nil)
			if a2.Result() == nil {
				t.Fatalf("attempt 2 did not complete:\n%s", a2)
			}
			reqs := mock.Requests()
			last := reqs[len(reqs)-1]
			if !last.Said(mockmodel.RoleUser, "the turn that is cut") || !last.Said(mockmodel.RoleUser, followUp) {
				t.Errorf("the continued request does not carry the cut turn's prompt and the follow-up: %v", last.Conversation)
			}
		})
	}
}
