package opencode_test

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
	"github.com/edgeagent/agent/runner/opencode"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// replies is a person answering approval requests, as the agent's control
// plane round trip would: it records each request and answers by a fixed
// decision, or never.
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

// With an approval policy other than never, OpenCode asks before every
// command and file change, confined as agent run confines attempts: the
// executor answers by the policy, or asks a person with what the call
// would do (the command and where it runs; the file and the diff), and
// OpenCode runs or writes only what is accepted. What is declined is a
// denied call of the attempt; a question nobody answers in time is
// declined, and the task says so.
func TestOpenCodeAsks(t *testing.T) {
	const cmd = "echo ran > ran.txt"
	for _, c := range []struct {
		name    string
		policy  runner.ApprovalPolicy
		prompt  string
		answer  runner.Approval
		file    string // the file the call makes
		want    string // what it holds after; "" when it must not exist
		kind    state.ApprovalKind
		diff    string // the question's diff holds it
		why     string // the denied call's reason, "" for none
		expired bool
	}{
		{name: "a command accepted by the policy runs", policy: runner.ApprovalAcceptAll, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd,
			file: "ran.txt", want: "ran\n"},
		{name: "a command declined by the policy does not run", policy: runner.ApprovalDeclineAll, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd,
			file: "ran.txt", why: "declined by the approval policy"},
		{name: "a command a person accepts runs", policy: runner.ApprovalAsk, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd, answer: runner.ApprovalAccept,
			file: "ran.txt", want: "ran\n", kind: state.ApprovalCommand},
		{name: "a command a person declines does not run", policy: runner.ApprovalAsk, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd, answer: runner.ApprovalDecline,
			file: "ran.txt", kind: state.ApprovalCommand, why: "declined by a person"},
		{name: "a new file a person accepts is made", policy: runner.ApprovalAsk, prompt: "Write it\nmock: write", answer: runner.ApprovalAccept,
			file: mockmodel.WriteFile, want: mockmodel.WrittenContent, kind: state.ApprovalFileChange, diff: "+written by the mock model"},
		{name: "a new file a person declines is not made", policy: runner.ApprovalAsk, prompt: "Write it\nmock: write", answer: runner.ApprovalDecline,
			file: mockmodel.WriteFile, kind: state.ApprovalFileChange, diff: "+written by the mock model", why: "declined by a person"},
		{name: "a command nobody answers in time is declined", policy: runner.ApprovalAsk, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd,
			file: "ran.txt", kind: state.ApprovalCommand, why: "no answer within 1s", expired: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			f := runnertest.NewCLIFixture(t, runnertest.OpenCodeExec(t, mock, opencode.Config{Approval: c.policy}), c.prompt, models)
			runnertest.Confine(t, f)
			runnertest.SlowStart(f)
			rep := &replies{answer: c.answer}
			f.Runner.Replies = rep
			f.Runner.ApprovalTimeout = time.Second
			work := filepath.Join(f.Runner.WorkRoot, f.Task.ID)
			f.Run(t, context.Background())
			logs := strings.Join(f.Rec.Logs(), "\n")
			if f.Task.Phase != state.PhaseCompleted {
				t.Fatalf("task %s (%s); attempts %s; logs:\n%s", f.Task.Phase, f.Task.PhaseReason, runnertest.AttemptsText(f.Task), logs)
			}
			checkFile(t, filepath.Join(work, c.file), c.want, logs)
			if c.kind == "" {
				if len(rep.requests) != 0 {
					t.Errorf("a person was asked %+v, though the policy answers", rep.requests)
				}
			} else {
				if len(rep.requests) != 1 {
					t.Fatalf("%d questions, want 1; logs:\n%s", len(rep.requests), logs)
				}
				checkQuestion(t, rep.requests[0], c.kind, work, filepath.Join(work, c.file), c.diff)
				if !slices.Contains(f.Rec.Kinds(), "phase:awaiting_reply") {
					t.Errorf("no phase awaiting_reply reported: %v", f.Rec.Kinds())
				}
			}
			checkDenied(t, f.Task, c.why)
			if exp := f.Task.ApprovalExpired; c.expired != (exp != nil) {
				t.Errorf("the task's expired question %+v, want expired %v", exp, c.expired)
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// A task's own OpenCode configuration (opencode.json and .opencode/ in
// its work directory, which a task can write for the next attempt) does
// not change what OpenCode asks: it says bash may run without asking,
// for every agent, and OpenCode asks all the same.
func TestATasksOpenCodeConfigDoesNotSilenceTheQuestion(t *testing.T) {
	runnertest.LimitCLIs(t)
	mock := runnertest.StartMock(t)
	f := runnertest.NewCLIFixture(t, runnertest.OpenCodeExec(t, mock, opencode.Config{Approval: runner.ApprovalAsk}), "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", models)
	runnertest.Confine(t, f)
	runnertest.SlowStart(f)
	rep := &replies{answer: runner.ApprovalDecline}
	f.Runner.Replies = rep
	work := filepath.Join(f.Runner.WorkRoot, f.Task.ID)
	allow := `{"permission": {"*": "allow", "bash": "allow"}, "agent": {"build": {"permission": {"*": "allow", "bash": "allow"}}}}`
	for _, p := range []string{filepath.Join(work, "opencode.json"), filepath.Join(work, ".opencode", "opencode.json")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(allow), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.Run(t, context.Background())
	logs := strings.Join(f.Rec.Logs(), "\n")
	if len(rep.requests) != 1 {
		t.Fatalf("%d questions, want 1: the task's configuration decided; logs:\n%s", len(rep.requests), logs)
	}
	checkFile(t, filepath.Join(work, "ran.txt"), "", logs)
}

func checkFile(t *testing.T, path, want, logs string) {
	t.Helper()
	got, err := os.ReadFile(path)
	switch {
	case want != "" && string(got) != want:
		t.Errorf("%s holds %q (%v), want %q; logs:\n%s", path, got, err, want, logs)
	case want == "" && err == nil:
		t.Errorf("%s was made though declined: %q", path, got)
	}
}

// checkQuestion fails unless the question says what the call would do.
func checkQuestion(t *testing.T, req state.ApprovalRequest, kind state.ApprovalKind, work, file, diff string) {
	t.Helper()
	if req.Kind != kind || req.ID == "" || req.Deadline.IsZero() {
		t.Errorf("question %+v, want kind %s, an id and a deadline", req, kind)
	}
	switch kind {
	case state.ApprovalCommand:
		if !strings.Contains(req.Command, "echo ran > ran.txt") || req.Cwd != work || req.Tool != "execute" {
			t.Errorf("the question does not say the command and where it runs: %+v (want in %s)", req, work)
		}
	case state.ApprovalFileChange:
		if len(req.Paths) != 1 || req.Paths[0] != file || !strings.Contains(req.Diff, diff) {
			t.Errorf("the question's paths %q and diff:\n%s\nwant %s and %q", req.Paths, req.Diff, file, diff)
		}
	}
}

// checkDenied fails unless the task was refused exactly one call, for
// why, or none when why is "", and says so in its completed phase's
// reason.
func checkDenied(t *testing.T, task *state.Task, why string) {
	t.Helper()
	d := task.Attempts[0].Denied
	if why == "" {
		if d.Count != 0 || task.Denied != 0 {
			t.Errorf("denied %+v (task %d), want none", d, task.Denied)
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
