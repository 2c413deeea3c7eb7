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

	"github.com/edgeagent/agent/internal/landlock"
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
// on-request, its own sandbox read-only, not confined by the agent); the
// executor answers by the agent's policy, or asks a person. What is
// declined is a denied call on the attempt.
func TestCodexApprovals(t *testing.T) {
	for _, c := range []struct {
		name    string
		policy  runner.ApprovalPolicy
		answer  runner.Approval
		ran     bool
		asked   bool
		logWant string
		why     string // the denied call's why, "" for none
	}{
		{name: "accept by policy", policy: runner.ApprovalAcceptAll, ran: true, logWant: "approval accept by policy accept"},
		{name: "decline by policy", policy: runner.ApprovalDeclineAll, ran: false, logWant: "approval decline by policy decline", why: "declined by the approval policy"},
		{name: "a person accepts", policy: runner.ApprovalAsk, answer: runner.ApprovalAccept, ran: true, asked: true, logWant: "accepted by a person"},
		{name: "a person declines", policy: runner.ApprovalAsk, answer: runner.ApprovalDecline, ran: false, asked: true, logWant: "declined by a person", why: "declined by a person"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.CodexExec(t, mock, codex.Config{Approval: c.policy, Sandbox: "read-only"})
			f := runnertest.NewCLIFixture(t, exe, "Escalate\nmock: escalate\nmock-cmd: echo approved > approved.txt", []string{"gpt-5.5"})
			rep := &replies{answer: c.answer}
			f.Runner.Replies = rep
			f.Run(t, context.Background())
			if f.Task.Phase != state.PhaseCompleted {
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
				if req.Kind != "command" || req.Tool != "shell" || !strings.Contains(req.Command, "approved.txt") || req.Reason == "" || req.Cwd == "" {
					t.Errorf("the request does not say what it asks: %+v", req)
				}
				if !slices.Contains(f.Rec.Kinds(), "phase:awaiting_reply") {
					t.Errorf("no phase awaiting_reply reported: %v", f.Rec.Kinds())
				}
			}
			if !runnertest.ContainsSub(f.Rec.Logs(), c.logWant) {
				t.Errorf("no log line with %q:\n%s", c.logWant, strings.Join(f.Rec.Logs(), "\n"))
			}
			checkDenied(t, f.Task, c.why)
		})
	}
}

// checkDenied fails unless the task was refused exactly one call, for
// why, or none when why is "", and says so where a person looks: the
// completed phase's reason.
func checkDenied(t *testing.T, task *state.Task, why string) {
	t.Helper()
	d := task.Attempts[0].Denied
	if why == "" {
		if d.Count != 0 || task.Denied != 0 || task.PhaseReason != "" {
			t.Errorf("denied %+v (task %d, reason %q), want none", d, task.Denied, task.PhaseReason)
		}
		return
	}
	if d.Count != 1 || len(d.Calls) != 1 || d.Calls[0].Why != why || d.Calls[0].Tool == "" || d.Calls[0].Input == "" || task.Denied != 1 {
		t.Errorf("denied %+v (task %d), want one call, %s", d, task.Denied, why)
	}
	if task.PhaseReason != "1 tool call denied" {
		t.Errorf("the task completed with reason %q, want it to say the denied call", task.PhaseReason)
	}
}

// Confined by the agent (Landlock), Codex's own sandbox cannot run, so
// ask starts the thread untrusted: Codex asks before a plain command and
// before a file change, with what they would do (the command and its
// directory; the paths and the diff), and runs or makes only what a
// person accepts. A question nobody answers in time is declined, and
// the task says so.
func TestCodexAsksWhenConfined(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	for _, c := range []struct {
		name    string
		prompt  string
		before  string // the content of the file the turn changes, before it
		answer  runner.Approval
		file    string // the file the turn writes
		want    string // what it holds after the turn; "" when it must not exist or stay as before
		kind    state.ApprovalKind
		diff    []string // the question's diff holds these
		why     string
		expired bool
	}{
		{name: "a command a person accepts runs", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", answer: runner.ApprovalAccept,
			file: "ran.txt", want: "ran\n", kind: state.ApprovalCommand},
		{name: "a command a person declines does not run", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", answer: runner.ApprovalDecline,
			file: "ran.txt", kind: state.ApprovalCommand, why: "declined by a person"},
		{name: "a new file a person accepts is made", prompt: "Write it\nmock: write", answer: runner.ApprovalAccept,
			file: mockmodel.PatchFile, want: mockmodel.WrittenContent, kind: state.ApprovalFileChange, diff: []string{"+++ ", "+written by the mock model"}},
		{name: "a new file a person declines is not made", prompt: "Write it\nmock: write", answer: runner.ApprovalDecline,
			file: mockmodel.PatchFile, kind: state.ApprovalFileChange, diff: []string{"+written by the mock model"}, why: "declined by a person"},
		{name: "an edit a person accepts is made", prompt: "Edit it\nmock: edit", before: mockmodel.WrittenContent, answer: runner.ApprovalAccept,
			file: mockmodel.PatchFile, want: mockmodel.EditedContent, kind: state.ApprovalFileChange, diff: []string{"-written by the mock model", "+edited by the mock model"}},
		{name: "a command nobody answers in time is declined", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt",
			file: "ran.txt", kind: state.ApprovalCommand, why: "no answer within 1s", expired: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			// The default sandbox: confined, Codex starts it with full
			// access, and asks all the same.
			exe := runnertest.CodexExec(t, mock, codex.Config{Approval: runner.ApprovalAsk, Sandbox: "workspace-write"})
			f := runnertest.NewCLIFixture(t, exe, c.prompt, []string{"gpt-5.5"})
			f.Runner.Isolation = &runner.Isolation{}
			rep := &replies{answer: c.answer}
			f.Runner.Replies = rep
			f.Runner.ApprovalTimeout = time.Second
			work := filepath.Join(f.Runner.WorkRoot, f.Task.ID)
			if c.before != "" {
				if err := os.MkdirAll(work, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(work, c.file), []byte(c.before), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f.Run(t, context.Background())
			logs := strings.Join(f.Rec.Logs(), "\n")
			if f.Task.Phase != state.PhaseCompleted {
				t.Fatalf("task %s (%s); attempts %s; logs:\n%s", f.Task.Phase, f.Task.PhaseReason, runnertest.AttemptsText(f.Task), logs)
			}
			if len(rep.requests) != 1 {
				t.Fatalf("%d questions, want 1; logs:\n%s", len(rep.requests), logs)
			}
			req := rep.requests[0]
			if req.Kind != c.kind || req.ID == "" {
				t.Errorf("question %+v, want kind %s", req, c.kind)
			}
			switch c.kind {
			case state.ApprovalCommand:
				if !strings.Contains(req.Command, "echo ran > ran.txt") || req.Cwd != work {
					t.Errorf("the question does not say the command and where it runs: %+v (want in %s)", req, work)
				}
			case state.ApprovalFileChange:
				if len(req.Paths) != 1 || req.Paths[0] != filepath.Join(work, c.file) {
					t.Errorf("the question's paths %q, want %s", req.Paths, filepath.Join(work, c.file))
				}
				for _, d := range c.diff {
					if !strings.Contains(req.Diff, d) {
						t.Errorf("the question's diff lacks %q:\n%s", d, req.Diff)
					}
				}
			}
			if want := f.Runner.ApprovalTimeout; req.Deadline.IsZero() {
				t.Errorf("the question has no deadline, want one %s on", want)
			}
			got, err := os.ReadFile(filepath.Join(work, c.file))
			switch {
			case c.want != "" && string(got) != c.want:
				t.Errorf("%s holds %q (%v), want %q; logs:\n%s", c.file, got, err, c.want, logs)
			case c.want == "" && c.before == "" && err == nil:
				t.Errorf("%s was made though declined: %q", c.file, got)
			}
			checkDenied(t, f.Task, c.why)
			if exp := f.Task.ApprovalExpired; c.expired != (exp != nil) || exp != nil && exp.ID != req.ID {
				t.Errorf("the task's expired question %+v, want expired %v", exp, c.expired)
			}
			if c.expired && !expiredReported(f.Rec) {
				t.Errorf("no phase event reported the expired question: %v", f.Rec.Kinds())
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// expiredReported reports whether a phase event carried an expired
// question, as the control plane is told.
func expiredReported(rec *runnertest.Recorder) bool {
	for _, p := range rec.Phases() {
		if p.Expired != nil && strings.Contains(p.Reason, "expired: no answer within") {
			return true
		}
	}
	return false
}
