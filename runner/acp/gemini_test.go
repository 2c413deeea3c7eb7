package acp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real Gemini CLI (pinned, from make tools) in its
// ACP mode against the mock model on loopback (the Gemini API), through
// the runner, confined as agent run confines attempts.

func TestGeminiAgainstTheRealCLI(t *testing.T) {
	pro := []string{"gemini-2.5-pro"}
	two := []string{"gemini-2.5-pro", "gemini-3.8-flash"}
	for _, c := range []struct {
		runnertest.CLICase
		approval runner.ApprovalPolicy
	}{
		{CLICase: runnertest.CLICase{Name: "text", Prompt: "Say hello", Models: pro, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.HelloText, Asked: pro}},
		{CLICase: runnertest.CLICase{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: gemini-2.5-pro=r429 gemini-3.8-flash=text", Models: two,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Summary: mockmodel.HelloText, Asked: two}},
		{CLICase: runnertest.CLICase{Name: "a tool call runs a command", Prompt: "Run it\nmock: shell", Models: pro, Phase: state.PhaseCompleted,
			Codes: []state.ErrorCode{""}, Summary: mockmodel.FinalText, SideEffect: true}, approval: runner.ApprovalAcceptAll},
		{CLICase: runnertest.CLICase{Name: "a tool call writes a file", Prompt: "Write it\nmock: write", Models: pro, Phase: state.PhaseCompleted,
			Codes: []state.ErrorCode{""}, SideEffect: true}, approval: runner.ApprovalAcceptAll},
		{CLICase: runnertest.CLICase{Name: "side effect then a 500 continues the session", Prompt: "Run it\nmock: shell after=r500", Models: pro,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}, Continued: true, SideEffect: true}, approval: runner.ApprovalAcceptAll},
		{CLICase: runnertest.CLICase{Name: "quota is permanent", Prompt: "x\nmock: quota", Models: pro, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"quota"}}},
		{CLICase: runnertest.CLICase{Name: "401 is auth", Prompt: "x\nmock: r401", Models: pro, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}}},
		{CLICase: runnertest.CLICase{Name: "403 is permission", Prompt: "x\nmock: r403", Models: pro, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"permission"}}},
		{CLICase: runnertest.CLICase{Name: "context overflow is permanent", Prompt: "x\nmock: context", Models: pro, Phase: state.PhaseFailed,
			Codes: []state.ErrorCode{"context_overflow"}}},
		{CLICase: runnertest.CLICase{Name: "overloaded is retried", Prompt: "x\nmock: gemini-2.5-pro=overloaded gemini-3.8-flash=text", Models: two,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"overloaded", ""}}},
		// Gemini CLI 0.61.0 answers a stream that ends without a finish
		// reason with end_turn, as if the part were the answer; its
		// record of the session, which holds no answer to the request,
		// tells the cut. The prompt's own request it takes out of the
		// session, so the continue the part shown calls for finds
		// nothing to load: a person replays it.
		{CLICase: runnertest.CLICase{Name: "a cut stream is a network failure", Prompt: "x\nmock: gemini-2.5-pro=cut gemini-3.8-flash=text", Models: two,
			Phase: state.PhaseRecoverableFailed, Codes: []state.ErrorCode{"network", "session_lost"}, Gate: state.GateVisibleOutput}},
		// After a tool's result, Gemini CLI 0.61.0 does not ask for a
		// finish reason: it records the part as the answer, with the
		// usage the cut stream carried, while its prompt's answer counts
		// only the request that finished (acp.geminiTurnCut): the cut is
		// network, and the session is continued.
		{CLICase: runnertest.CLICase{Name: "a cut stream after a command is a network failure", Prompt: "Run it\nmock: shell after=cut", Models: pro,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"network", ""}, Continued: true, SideEffect: true}, approval: runner.ApprovalAcceptAll},
	} {
		c.Confined, c.SlowStart = true, true
		t.Run(c.Name, func(t *testing.T) {
			runnertest.RunCLICase(t, c.CLICase, func(m *mockmodel.Server) runner.Executor {
				return runnertest.GeminiExec(t, m, acp.Config{Approval: c.approval})
			})
		})
	}
}

// Gemini CLI asks before every command and file change (its default
// approval mode), confined as agent run confines attempts: the executor
// answers by the policy, or asks a person with what the call would do,
// and Gemini CLI runs or writes only what is accepted. never declines
// what it asks (nobody is asked). A question nobody answers in time is
// declined.
func TestGeminiAsks(t *testing.T) {
	const cmd = "echo ran > ran.txt"
	for _, c := range []struct {
		name    string
		policy  runner.ApprovalPolicy
		prompt  string
		answer  runner.Approval
		file    string
		want    string
		kind    state.ApprovalKind
		diff    string
		why     string
		expired bool
	}{
		{name: "never declines what it asks", policy: runner.ApprovalNever, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd,
			file: "ran.txt", why: "nobody is asked (--approval never)"},
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
			f := runnertest.NewCLIFixture(t, runnertest.GeminiExec(t, mock, acp.Config{Approval: c.policy}), c.prompt, []string{"gemini-2.5-pro"})
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
			got, err := os.ReadFile(filepath.Join(work, c.file))
			switch {
			case c.want != "" && string(got) != c.want:
				t.Errorf("%s holds %q (%v), want %q; logs:\n%s", c.file, got, err, c.want, logs)
			case c.want == "" && err == nil:
				t.Errorf("%s was made though declined: %q", c.file, got)
			}
			if c.kind == "" {
				if len(rep.requests) != 0 {
					t.Errorf("a person was asked %+v, though the policy answers", rep.requests)
				}
			} else {
				if len(rep.requests) != 1 {
					t.Fatalf("%d questions, want 1; logs:\n%s", len(rep.requests), logs)
				}
				req := rep.requests[0]
				if req.Kind != c.kind || req.ID == "" || req.Deadline.IsZero() {
					t.Errorf("question %+v, want kind %s, an id and a deadline", req, c.kind)
				}
				switch c.kind {
				case state.ApprovalCommand:
					if !strings.Contains(req.Command, cmd) || req.Cwd != work {
						t.Errorf("the question does not say the command and where it runs: %+v (want in %s)", req, work)
					}
				case state.ApprovalFileChange:
					if len(req.Paths) != 1 || req.Paths[0] != filepath.Join(work, c.file) || !strings.Contains(req.Diff, c.diff) {
						t.Errorf("the question's paths %q and diff:\n%s\nwant %s and %q", req.Paths, req.Diff, filepath.Join(work, c.file), c.diff)
					}
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

// Gemini CLI 0.61.0's session/load, in a new process, empties the
// session's record when it comes in the minute the record is named by
// (acp.Gemini), which a continue right after a failure mostly does: the
// executor moves the record aside first. This test makes sure of that
// minute: before the continue, it names Gemini CLI's record of the
// session by the current minute. The load then replays the history
// partly after its answer; none of it (the first attempt's command) is
// taken for the continue's.
func TestGeminiContinuesInTheMinuteItsSessionBegan(t *testing.T) {
	c := runnertest.CLICase{Name: "continue", Prompt: "Run it\nmock: shell after=r500", Models: []string{"gemini-2.5-pro"},
		Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}, Continued: true, SideEffect: true, Confined: true, SlowStart: true}
	var renamed []string
	var f *runnertest.Fixture
	t.Run(c.Name, func(t *testing.T) {
		runnertest.LimitCLIs(t)
		mock := runnertest.StartMock(t)
		exe := &thisMinute{Executor: runnertest.GeminiExec(t, mock, acp.Config{Approval: runner.ApprovalAcceptAll}), t: t, renamed: &renamed}
		f = runnertest.NewCLIFixture(t, exe, c.Prompt, c.Models)
		runnertest.Confine(t, f)
		runnertest.SlowStart(f)
		f.Run(t, context.Background())
		c.Check(t, f, mock)
		runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		if len(renamed) != 1 {
			t.Fatalf("Gemini CLI's record of the session was named by the continue's minute %d times, want once", len(renamed))
		}
		if second := f.Task.Attempts[1].Facts; second.ToolCall || second.SideEffect {
			t.Errorf("the continue is said to have called a tool (%+v): the first attempt's command, replayed by the load, was taken for its", second)
		}

		// A second continue: the first one's load left a record of its
		// own chat of the session (its context alone), with which
		// Gemini CLI's next start would remove the session's record.
		first := f.Task.Attempts[0]
		var events []runner.Event
		exit := exe.Executor.Run(context.Background(), runner.AttemptSpec{
			Task: runner.TaskInput{ID: f.Task.ID, Prompt: c.Prompt, Model: c.Models[0]}, AttemptID: f.Task.ID + "-again",
			WorkDir: filepath.Join(f.Runner.WorkRoot, f.Task.ID), SessionDir: filepath.Dir(first.SessionPath),
			Resume: &runner.Resume{SessionID: first.SessionID, Path: first.SessionPath, Prompt: "Go on once more."},
		}, func(ev runner.Event) { events = append(events, ev) })
		if exit.Turn != runner.TurnCompleted {
			t.Fatalf("the second continue ended %+v; events %+v", exit, events)
		}
		reqs := mock.Requests()
		if last := reqs[len(reqs)-1]; !last.Said(mockmodel.RoleUser, "Go on once more.") || !last.Said(mockmodel.RoleUser, "Run it") {
			t.Errorf("the second continue's request does not carry the first prompt and its follow-up: %+v", last.Conversation)
		}
		runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
	})
}

// thisMinute is the Gemini CLI executor, but that before a continue it
// names Gemini CLI's record of the session by the current minute, as the
// record of a session begun in this minute is.
type thisMinute struct {
	*acp.Executor
	t       *testing.T
	renamed *[]string
}

func (x *thisMinute) Run(ctx context.Context, spec runner.AttemptSpec, emit func(runner.Event)) runner.Exit {
	if r := spec.Resume; r != nil {
		_, env := x.VersionEnv()
		home := cli.EnvValue(env, "HOME")
		found, _ := filepath.Glob(filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*-"+r.SessionID[:8]+".jsonl"))
		for _, p := range found {
			now := filepath.Join(filepath.Dir(p), "session-"+time.Now().UTC().Format("2006-01-02T15-04")+"-"+r.SessionID[:8]+".jsonl")
			if p != now {
				if err := os.Rename(p, now); err != nil {
					x.t.Error(err)
				}
			}
			*x.renamed = append(*x.renamed, now)
		}
	}
	return x.Executor.Run(ctx, spec, emit)
}
