package acp_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real codex-acp (Codex over ACP; pinned, from make
// tools) against the mock model on loopback, through the runner,
// confined as agent run confines attempts.

func TestCodexACPAgainstTheRealCLI(t *testing.T) {
	gpt := []string{"gpt-5.5"}
	for _, c := range []runnertest.CLICase{
		{Name: "text", Prompt: "Say hello", Models: gpt, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.HelloText, Asked: gpt},
		{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: gpt-5.4=r429 gpt-5.5=text", Models: []string{"gpt-5.4", "gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Summary: mockmodel.HelloText, Asked: []string{"gpt-5.4", "gpt-5.5"}},
		{Name: "a tool call runs a command", Prompt: "Run it\nmock: shell", Models: gpt, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: mockmodel.FinalText, SideEffect: true},
		{Name: "a patch writes a file", Prompt: "Write it\nmock: write", Models: gpt, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""}, SideEffect: true},
		{Name: "side effect then a 500 continues the session", Prompt: "Run it\nmock: shell after=r500", Models: gpt,
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}, Continued: true, SideEffect: true},
		// codex-acp 0.16.0 says a spent quota (429 insufficient_quota)
		// as any 429 ("exceeded retry limit, last status: 429 Too Many
		// Requests", codex_error_info response_too_many_failed_attempts
		// 429), and neither its stderr nor Codex's records under
		// CODEX_HOME say more (docs/executors.md): it is taken for a
		// rate limit, and retried.
		{Name: "quota is said as a 429", Prompt: "x\nmock: quota", Models: gpt, Phase: state.PhaseFailed,
			Codes: []state.ErrorCode{"rate_limit", "rate_limit", "rate_limit"}},
		{Name: "401 is auth", Prompt: "x\nmock: r401", Models: gpt, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}},
		{Name: "403 is permission", Prompt: "x\nmock: r403", Models: gpt, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"permission"}},
		{Name: "context overflow is permanent", Prompt: "x\nmock: context", Models: gpt, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"context_overflow"}},
		{Name: "overloaded is retried", Prompt: "x\nmock: gpt-5.4=overloaded gpt-5.5=text", Models: []string{"gpt-5.4", "gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"overloaded", ""}},
		{Name: "a cut stream is retried", Prompt: "x\nmock: gpt-5.4=cut gpt-5.5=text", Models: []string{"gpt-5.4", "gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"network", ""}},
		{Name: "a silent stream times out in codex", Prompt: "x\nmock: gpt-5.4=hang gpt-5.5=text", Models: []string{"gpt-5.4", "gpt-5.5"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"timeout", ""}},
	} {
		c.Confined = true
		t.Run(c.Name, func(t *testing.T) {
			runnertest.RunCLICase(t, c, func(m *mockmodel.Server) runner.Executor { return runnertest.CodexACPExec(t, m, acp.Config{}) })
		})
	}
}

// codex-acp asks when Codex would (its approval policy on-request, its
// sandbox read-only), confined as agent run confines attempts: a command
// the model wants run outside Codex's sandbox, and a patch (read-only
// allows no write). Codex's sandbox (bubblewrap) cannot run under the
// agent's Landlock, but neither needs it: what is accepted runs outside
// it, inside the agent's confinement. The executor answers by the
// policy, or asks a person with what the call would do, and Codex runs
// or writes only what is accepted.
func TestCodexACPAsks(t *testing.T) {
	const escalate = "Escalate\nmock: escalate\nmock-cmd: echo approved > approved.txt"
	for _, c := range []struct {
		name   string
		policy runner.ApprovalPolicy
		prompt string
		answer runner.Approval
		file   string // what the call makes
		made   bool
		kind   state.ApprovalKind // what a person is asked, "" for nobody
		why    string
	}{
		{name: "accept by policy", policy: runner.ApprovalAcceptAll, prompt: escalate, file: "approved.txt", made: true},
		{name: "decline by policy", policy: runner.ApprovalDeclineAll, prompt: escalate, file: "approved.txt", why: "declined by the approval policy"},
		{name: "a person accepts", policy: runner.ApprovalAsk, prompt: escalate, answer: runner.ApprovalAccept, file: "approved.txt", made: true,
			kind: state.ApprovalCommand},
		{name: "a person declines", policy: runner.ApprovalAsk, prompt: escalate, answer: runner.ApprovalDecline, file: "approved.txt",
			kind: state.ApprovalCommand, why: "declined by a person"},
		{name: "a patch a person accepts is written", policy: runner.ApprovalAsk, prompt: "Write it\nmock: write", answer: runner.ApprovalAccept,
			file: mockmodel.PatchFile, made: true, kind: state.ApprovalFileChange},
		{name: "a patch a person declines is not written", policy: runner.ApprovalAsk, prompt: "Write it\nmock: write", answer: runner.ApprovalDecline,
			file: mockmodel.PatchFile, kind: state.ApprovalFileChange, why: "declined by a person"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			exe := runnertest.CodexACPExec(t, mock, acp.Config{Approval: c.policy, Base: cli.Base{
				Args: []string{"-c", `approval_policy="on-request"`, "-c", `sandbox_mode="read-only"`}}})
			f := runnertest.NewCLIFixture(t, exe, c.prompt, []string{"gpt-5.5"})
			runnertest.Confine(t, f)
			rep := &replies{answer: c.answer}
			f.Runner.Replies = rep
			work := filepath.Join(f.Runner.WorkRoot, f.Task.ID)
			f.Run(t, context.Background())
			logs := strings.Join(f.Rec.Logs(), "\n")
			if f.Task.Phase != state.PhaseCompleted {
				t.Fatalf("task %s (%s); attempts %s; logs:\n%s", f.Task.Phase, f.Task.PhaseReason, runnertest.AttemptsText(f.Task), logs)
			}
			_, err := os.Stat(filepath.Join(work, c.file))
			if made := err == nil; made != c.made {
				t.Errorf("%s was made: %v, want %v; logs:\n%s", c.file, made, c.made, logs)
			}
			if asked := len(rep.requests) > 0; asked != (c.kind != "") {
				t.Fatalf("a person was asked: %v, want %v; logs:\n%s", asked, c.kind != "", logs)
			}
			if c.kind != "" {
				req := rep.requests[0]
				switch {
				case req.Kind != c.kind:
					t.Errorf("asked %s, want %s: %+v", req.Kind, c.kind, req)
				case c.kind == state.ApprovalCommand && !strings.Contains(req.Command, "approved.txt"):
					t.Errorf("the question does not say the command: %+v", req)
				case c.kind == state.ApprovalFileChange && (len(req.Paths) != 1 || req.Paths[0] != filepath.Join(work, c.file) || !strings.Contains(req.Diff, "written by the mock model")):
					t.Errorf("the question's paths %q and diff:\n%s\nwant %s and the new text", req.Paths, req.Diff, filepath.Join(work, c.file))
				}
			}
			checkDenied(t, f.Task, c.why)
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// codex-acp refuses a session until it is asked to sign in, though its
// key is set (OPENAI_API_KEY), when Codex's provider needs an OpenAI
// login: the executor signs it in with the key of the attempt's
// environment (authenticate openai-api-key), confined, and the model is
// asked with that key. Without a key the attempt ends auth, and the
// model is asked nothing.
func TestCodexACPSignsInWithTheKeyInItsEnvironment(t *testing.T) {
	const key = "sk-test-4f1c9e"
	for _, c := range []runnertest.CLICase{
		// Codex's openai provider tries WebSockets first, and says its
		// fall back to HTTP in the answer's text: no Summary to compare.
		{Name: "a key in the environment", Prompt: "Say hello", Models: []string{"gpt-5.5"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""}},
		{Name: "no key", Prompt: "Say hello", Models: []string{"gpt-5.5"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}},
	} {
		c.Confined = true
		t.Run(c.Name, func(t *testing.T) {
			var mock *mockmodel.Server
			var codexHome string
			withKey := c.Phase == state.PhaseCompleted
			runnertest.RunCLICase(t, c, func(m *mockmodel.Server) runner.Executor {
				mock = m
				env := clitest.CodexEnv(t, m, clitest.CodexOptions{StreamIdleMS: 1500})
				codexHome = cli.EnvValue(env, "CODEX_HOME")
				// Codex's own OpenAI provider, moved to the mock: it takes
				// its key from an OpenAI login, not from a variable.
				cfg := fmt.Sprintf("model = \"gpt-5.5\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\nopenai_base_url = %q\n", m.OpenAIBaseURL())
				if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
				k := ""
				if withKey {
					k = key
				}
				env = append(env, "OPENAI_API_KEY="+k, "CODEX_API_KEY=")
				exe, err := acp.New(acp.Config{Base: cli.Base{Bin: clitest.CodexACPBin(t), Env: env, Grace: 2 * time.Second}})
				if err != nil {
					t.Fatal(err)
				}
				return exe
			})
			reqs := mock.Requests()
			if !withKey {
				if len(reqs) != 0 {
					t.Errorf("the model was asked %d times without a key", len(reqs))
				}
				return
			}
			if len(reqs) == 0 {
				t.Fatal("the model was not asked")
			}
			for _, r := range reqs {
				if r.Key != key {
					t.Errorf("a model request carried key %q, want the environment's", r.Key)
				}
			}
			if _, err := os.Stat(filepath.Join(codexHome, "auth.json")); err != nil {
				t.Errorf("codex-acp kept no login after signing in: %v", err)
			}
		})
	}
}
