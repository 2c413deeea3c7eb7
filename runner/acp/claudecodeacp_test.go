package acp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/cli"
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

// claude-code-acp asks before a command and a file change (Claude Code's
// default permission mode), confined as agent run confines attempts:
// the executor answers by the policy, or asks a person with what the
// call would do, and Claude Code runs or writes only what is accepted.
func TestClaudeCodeACPAsks(t *testing.T) {
	const cmd = "echo ran > ran.txt"
	for _, c := range []struct {
		name   string
		policy runner.ApprovalPolicy
		prompt string
		answer runner.Approval
		file   string
		want   string
		kind   state.ApprovalKind // what a person is asked, "" for nobody
		why    string
	}{
		{name: "accept by policy", policy: runner.ApprovalAcceptAll, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd, file: "ran.txt", want: "ran\n"},
		{name: "decline by policy", policy: runner.ApprovalDeclineAll, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd, file: "ran.txt",
			why: "declined by the approval policy"},
		{name: "a command a person accepts runs", policy: runner.ApprovalAsk, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd, answer: runner.ApprovalAccept,
			file: "ran.txt", want: "ran\n", kind: state.ApprovalCommand},
		{name: "a command a person declines does not run", policy: runner.ApprovalAsk, prompt: "Run it\nmock: shell\nmock-cmd: " + cmd, answer: runner.ApprovalDecline,
			file: "ran.txt", kind: state.ApprovalCommand, why: "declined by a person"},
		{name: "a new file a person accepts is made", policy: runner.ApprovalAsk, prompt: "Write it\nmock: write", answer: runner.ApprovalAccept,
			file: mockmodel.WriteFile, want: mockmodel.WrittenContent, kind: state.ApprovalFileChange},
		{name: "a new file a person declines is not made", policy: runner.ApprovalAsk, prompt: "Write it\nmock: write", answer: runner.ApprovalDecline,
			file: mockmodel.WriteFile, kind: state.ApprovalFileChange, why: "declined by a person"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			f := runnertest.NewCLIFixture(t, runnertest.ClaudeCodeACPExec(t, mock, acp.Config{Approval: c.policy}), c.prompt, []string{"claude-a"})
			runnertest.Confine(t, f)
			runnertest.SlowStart(f)
			rep := &replies{answer: c.answer}
			f.Runner.Replies = rep
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
			if asked := len(rep.requests) > 0; asked != (c.kind != "") {
				t.Fatalf("a person was asked %+v, want asked %v; logs:\n%s", rep.requests, c.kind != "", logs)
			}
			if c.kind != "" {
				req := rep.requests[0]
				switch {
				case req.Kind != c.kind:
					t.Errorf("asked %s, want %s: %+v", req.Kind, c.kind, req)
				case c.kind == state.ApprovalCommand && !strings.Contains(req.Command, cmd):
					t.Errorf("the question does not say the command: %+v", req)
				case c.kind == state.ApprovalFileChange && (len(req.Paths) != 1 || req.Paths[0] != filepath.Join(work, c.file)):
					t.Errorf("the question's paths %q, want %s", req.Paths, filepath.Join(work, c.file))
				}
			}
			checkDenied(t, f.Task, c.why)
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// claude-code-acp takes a model (session/set_model) only once a
// one-token request to the model API with it has succeeded: the API's
// refusal of that request (here a rate limit, from a model API on
// loopback that answers every request so) fails the attempt as what it
// is, not as a model the agent refused.
func TestClaudeCodeACPModelChoiceFailsAsTheAPIFailed(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		code   state.ErrorCode
	}{
		{http.StatusTooManyRequests, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`, state.CodeRateLimit},
		{http.StatusServiceUnavailable, `{"type":"error","error":{"type":"api_error","message":"Service unavailable"}}`, state.CodeUnavailable},
		{http.StatusNotFound, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nonesuch"}}`, state.CodeInvalidRequest},
	} {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			var asked atomic.Int32
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead {
					return
				}
				asked.Add(1)
				w.Header().Set("content-type", "application/json")
				w.Header().Set("retry-after", "1")
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			defer api.Close()
			mock := runnertest.StartMock(t) // for the executor's environment: the API is moved below
			exe := runnertest.ClaudeCodeACPExec(t, mock, acp.Config{Base: cli.Base{Env: []string{"ANTHROPIC_BASE_URL=" + api.URL}}})
			a := runnertest.RunAttempt(context.Background(), t, exe, runner.AttemptSpec{AttemptID: "a-1", WorkDir: t.TempDir(), SessionDir: t.TempDir(),
				Task: runner.TaskInput{ID: "t-1", Prompt: "Say hello", Attempt: 1, AttemptID: "a-1", Model: "claude-nonesuch"}}, nil)
			if a.ErrorCode() != c.code || !strings.Contains(a.Error().Message, "claude-nonesuch") {
				t.Fatalf("the attempt ended %s, want %s naming the model:\n%s", a.ErrorCode(), c.code, a)
			}
			if asked.Load() == 0 {
				t.Error("the model API was not asked")
			}
			if len(mock.Requests()) != 0 {
				t.Errorf("the mock was asked %d times: the API was not moved", len(mock.Requests()))
			}
		})
	}
}
