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

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real Codex and Claude Code binaries (pinned, from
// make tools) against the mock model on loopback, through the runner: what
// they check is what an operator sees, phases, attempts with their codes
// and retry decisions, results, and no process left behind.

// A model that accepts the request and never answers is stopped by the
// agent's own first-event limit: turn/started and system/init do not
// count as an answer.
func TestSilentModelHitsTheFirstEventLimit(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock := runnertest.StartMock(t)
			var exe runner.Executor
			if cli == "codex" {
				exe = runnertest.CodexExec(t, mock, codex.Config{})
			} else {
				exe = runnertest.ClaudeExec(t, mock, claude.Config{APITimeout: 10 * time.Minute})
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
				exe = runnertest.CodexExec(t, mock, codex.Config{})
			} else {
				exe = runnertest.ClaudeExec(t, mock, claude.Config{AllowedTools: []string{"Bash"}})
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

// The tests below continue a CLI's session across attempts, each attempt
// its own CLI process as in the agent, straight through the executor
// (runnertest.RunAttempt): Codex resumes its thread (thread/resume),
// Claude Code its session (--resume).

const (
	firstPrompt = "Say hello (the first turn)"
	followUp    = "Your turn was cut short. Go on where you were."
)

// resumeCLIs are the executors that continue sessions, each with the
// pinned CLI it runs.
var resumeCLIs = []struct {
	name string
	exe  func(*testing.T, *mockmodel.Server) runner.Executor
	bin  func(testing.TB) string
}{
	{"codex", func(t *testing.T, m *mockmodel.Server) runner.Executor {
		return runnertest.CodexExec(t, m, codex.Config{})
	}, clitest.CodexBin},
	{"claude", func(t *testing.T, m *mockmodel.Server) runner.Executor {
		return runnertest.ClaudeExec(t, m, claude.Config{})
	}, clitest.ClaudeBin},
}

// attemptSpec is attempt n of task t-1, in work.
func attemptSpec(n int, work, prompt string, resume *runner.Resume) runner.AttemptSpec {
	id := "a-" + strconv.Itoa(n)
	return runner.AttemptSpec{AttemptID: id, WorkDir: work, Resume: resume,
		Task: runner.TaskInput{ID: "t-1", Prompt: prompt, Attempt: n, AttemptID: id, Model: "gpt-5.5"}}
}

// A continue resumes the session and sends the follow-up, not the task's
// prompt: the same session goes on, at the same path, and the model sees
// the first turn's prompt, its own answer and the follow-up. Confined
// too, without /tmp: the session is in the CLI's state directory, which
// only the executor makes writable.
func TestAContinueResumesTheSession(t *testing.T) {
	for _, c := range resumeCLIs {
		for _, confined := range []bool{false, true} {
			name := c.name
			if confined {
				name += "/confined"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				runnertest.LimitCLIs(t)
				mock := runnertest.StartMock(t)
				exe := c.exe(t, mock)
				if !runner.CanResume(exe) {
					t.Fatalf("the %s executor does not say it resumes", c.name)
				}
				work := t.TempDir()
				s1 := attemptSpec(1, work, firstPrompt, nil)
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
					t.Fatalf("the file the session is kept in: %v", err)
				}
				before := len(mock.Requests())

				s2 := attemptSpec(2, work, "the task's prompt, not to be sent again", &runner.Resume{SessionID: id, Path: path, Prompt: followUp})
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
				if last.Said(mockmodel.RoleUser, "not to be sent again") {
					t.Error("the continue sent the task's prompt again")
				}
			})
		}
	}
}

// A session the CLI cannot resume (its file deleted, or an id it never
// had) ends the attempt with session_lost, and no new session is started
// in its place: the model is asked nothing.
func TestALostSessionIsSessionLost(t *testing.T) {
	for _, c := range resumeCLIs {
		for _, lost := range []struct {
			name string
			lose func(t *testing.T, id, path string) runner.Resume
		}{
			{"file deleted", func(t *testing.T, id, path string) runner.Resume {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				return runner.Resume{SessionID: id, Path: path, Prompt: followUp}
			}},
			{"unknown id", func(t *testing.T, id, path string) runner.Resume {
				return runner.Resume{SessionID: "019a0000-0000-7000-8000-000000000000", Path: path + ".nothing", Prompt: followUp}
			}},
		} {
			t.Run(c.name+"/"+lost.name, func(t *testing.T) {
				t.Parallel()
				runnertest.LimitCLIs(t)
				mock := runnertest.StartMock(t)
				exe := c.exe(t, mock)
				work := t.TempDir()
				a1 := runnertest.RunAttempt(context.Background(), t, exe, attemptSpec(1, work, firstPrompt, nil), nil)
				id, path := a1.Session()
				if a1.Result() == nil || path == "" {
					t.Fatalf("attempt 1:\n%s", a1)
				}
				before := len(mock.Requests())
				r := lost.lose(t, id, path)
				a2 := runnertest.RunAttempt(context.Background(), t, exe, attemptSpec(2, work, "the task's prompt, never to be sent again", &r), nil)
				if a2.ErrorCode() != state.CodeSessionLost || a2.Result() != nil || a2.Exit.Turn != runner.TurnFailed {
					t.Fatalf("attempt 2 did not end session_lost:\n%s", a2)
				}
				msg := a2.Error().Message
				if !strings.Contains(msg, r.SessionID) {
					t.Errorf("the session_lost error does not name the session: %q", msg)
				}
				t.Logf("session_lost: %s", msg)
				if got := mock.Requests()[before:]; len(got) != 0 {
					t.Errorf("the model was asked %d times after the session was lost: a new session started", len(got))
				}
				if slices.Contains(a2.Sessions(), r.SessionID) {
					t.Errorf("the lost attempt bound the session it could not resume:\n%s", a2)
				}
			})
		}
	}
}

// A turn cut mid-stream, by the runner's cancel (Codex: turn/interrupt;
// Claude Code: SIGINT) or by a SIGKILL of the CLI, leaves its session on
// disk with the prompt in it: the next attempt resumes it, and the model
// sees the cut turn's prompt and the follow-up.
func TestASessionSurvivesACutTurn(t *testing.T) {
	for _, c := range resumeCLIs {
		bin := c.bin(t) // found here: the cutter's goroutine may not fail the test
		for _, kill := range []bool{false, true} {
			name := c.name + "/cancelled"
			if kill {
				name = c.name + "/SIGKILL"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				runnertest.LimitCLIs(t)
				mock := runnertest.StartMock(t)
				exe := c.exe(t, mock)
				work := t.TempDir()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cutDone := make(chan struct{})
				defer func() { <-cutDone }()
				// Cut once the model is asked: it never answers (hang).
				go func() {
					defer close(cutDone)
					for len(mock.Requests()) == 0 && ctx.Err() == nil {
						time.Sleep(20 * time.Millisecond)
					}
					time.Sleep(300 * time.Millisecond)
					if kill && runnertest.KillCLI(t, bin) > 0 {
						return
					}
					cancel()
				}()
				cut := "Work on it (the turn that is cut)\nmock: hang"
				a1 := runnertest.RunAttempt(ctx, t, exe, attemptSpec(1, work, cut, nil), nil)
				cancel()
				id, path := a1.Session()
				if a1.Result() != nil || id == "" || path == "" {
					t.Fatalf("attempt 1 was not cut with its session bound:\n%s", a1)
				}
				if kill && a1.Exit.Killed {
					t.Fatalf("attempt 1 was cancelled, not killed:\n%s", a1)
				}
				if _, err := os.Stat(path); err != nil {
					t.Fatalf("the cut turn's session file: %v", err)
				}
				// The model never answered the cut turn, so its "mock:
				// hang" would still choose: the follow-up says its own.
				a2 := runnertest.RunAttempt(context.Background(), t, exe, attemptSpec(2, work, cut, &runner.Resume{SessionID: id, Path: path, Prompt: followUp + "\nmock: text"}), nil)
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
}

// A token budget smaller than one model answer's usage: the CLI's own
// usage report passes it, the attempt is stopped as a cancel stops it,
// and the task ends budget_exceeded after one attempt, with the usage
// the CLI reported, and no process left.
func TestRealCLIOverItsTokenBudgetIsStopped(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock := runnertest.StartMock(t)
			var exe runner.Executor
			if cli == "codex" {
				exe = runnertest.CodexExec(t, mock, codex.Config{})
			} else {
				exe = runnertest.ClaudeExec(t, mock, claude.Config{AllowedTools: []string{"Bash"}})
			}
			marker := "sleep-" + strconv.Itoa(os.Getpid()) + "-budget-" + cli
			f := runnertest.NewCLIFixture(t, exe, "Sleep\nmock: shell\nmock-cmd: bash -c 'exec -a "+marker+" sleep 300'", []string{"m"})
			f.Task.MaxTokens = 10 // the mock's every answer uses more
			f.Run(t, context.Background())
			if f.Task.Phase != state.PhaseFailed || len(f.Task.Attempts) != 1 {
				t.Fatalf("task %s, want failed after 1 attempt; %s; logs:\n%s", f.Task.Phase, runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
			}
			a := f.Task.Attempts[0]
			if a.Error == nil || a.Error.Code != state.CodeBudgetExceeded || a.Retry.Gate != state.GateBudget {
				t.Fatalf("attempt %s", runnertest.AttemptsText(f.Task))
			}
			if a.Usage.TotalTokens <= 10 || a.Usage.InputTokens == 0 || a.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v, want the CLI's report of over 10 tokens", a.Usage)
			}
			if r := f.Task.Result; r == nil || r.Usage == nil || r.Usage.TotalTokens != a.Usage.TotalTokens {
				t.Errorf("result %+v", r)
			}
			if pids := pidsNamed(marker); len(pids) > 0 {
				t.Fatalf("the tool command outlived the stopped attempt: %v", pids)
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// Confined by the agent with Codex's default sandbox (workspace-write,
// started as danger-full-access), Codex still complains at every start
// that bubblewrap is missing: the line is said as noise, never as an
// error on stderr.
func TestCodexSandboxComplaintIsNoiseWhenConfined(t *testing.T) {
	runnertest.LimitCLIs(t)
	mock := runnertest.StartMock(t)
	exe, err := codex.New(codex.Config{Sandbox: "workspace-write", Base: cli.Base{Bin: clitest.CodexBin(t), Grace: 2 * time.Second,
		Env: clitest.CodexEnv(t, mock, clitest.CodexOptions{UserSandbox: true})}})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	s := attemptSpec(1, work, firstPrompt, nil)
	s.TempDir = t.TempDir()
	s.Confine = runnertest.Confined(t, work, s.TempDir)
	a := runnertest.RunAttempt(context.Background(), t, exe, s, nil)
	if a.Result() == nil {
		t.Fatalf("the attempt did not complete:\n%s", a)
	}
	said := 0
	for _, ev := range a.Events() {
		for _, l := range ev.Lines {
			if !strings.Contains(l, "bubblewrap") {
				continue
			}
			if ev.Stream == runner.StreamStderr || !strings.HasPrefix(l, "(not a problem: the agent confines this attempt itself") {
				t.Errorf("a %s line about bubblewrap, not marked as noise: %q", ev.Stream, l)
			}
			said++
		}
	}
	if said == 0 {
		t.Errorf("Codex said nothing of its sandbox: this test no longer sees what it checks:\n%s", a)
	}
}
