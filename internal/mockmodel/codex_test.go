package mockmodel_test

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
)

// codexExec runs codex exec --json with the prompt against mock, with
// the CODEX_HOME clitest makes (request and stream retries 1).
func codexExec(t *testing.T, mock *mockmodel.Server, opts clitest.CodexOptions, limit time.Duration, prompt string, args ...string) run {
	t.Helper()
	args = append([]string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}, args...)
	return runCLI(t, mock, limit, clitest.CodexBin(t), clitest.CodexEnv(t, mock, opts), append(args, prompt)...)
}

// Each scenario through codex exec, ending as EXECUTORS.md describes:
// successes with their text and side effects, failures with the message
// the CLI gives after its own (capped) retries.
func TestCodexExec(t *testing.T) {
	S := mockmodel.ScenarioFinal
	for _, c := range []struct {
		name     string
		prompt   string
		idleMS   int
		limit    time.Duration // default hangGuard
		text     string        // the final agent message of a completed turn
		fail     string        // the turn.failed message holds this
		killed   bool          // still running at the limit: the agent must time it out
		requests []mockmodel.Scenario
		file     string // a file the turn leaves, with content
		content  string
	}{
		{name: "text", prompt: "Say hello", text: mockmodel.HelloText, requests: []mockmodel.Scenario{"text"}},
		{name: "shell runs the command", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", text: mockmodel.FinalText,
			requests: []mockmodel.Scenario{"shell", S}, file: "ran.txt", content: "ran\n"},
		{name: "shell runs the default command", prompt: "Run it\nmock: shell", text: mockmodel.FinalText,
			requests: []mockmodel.Scenario{"shell", S}, file: "mock_side_effect.txt", content: "mock-side-effect\n"},
		{name: "write adds a file with apply_patch", prompt: "Write it\nmock: write", text: mockmodel.FinalText,
			requests: []mockmodel.Scenario{"write", S}, file: mockmodel.PatchFile, content: mockmodel.WrittenContent},
		{name: "write adds the file named", prompt: "Write it\nmock: write\nmock-file: sub/named.txt", text: mockmodel.FinalText,
			requests: []mockmodel.Scenario{"write", S}, file: "sub/named.txt", content: mockmodel.WrittenContent},
		{name: "a tool then a failure", prompt: "Run it\nmock: shell after=quota\nmock-cmd: echo ran > ran.txt", fail: "Quota exceeded",
			requests: []mockmodel.Scenario{"shell", "quota"}, file: "ran.txt", content: "ran\n"},
		{name: "r429 after one retry that waited Retry-After", prompt: "x\nmock: r429", fail: "429 Too Many Requests", requests: []mockmodel.Scenario{"r429", "r429"}},
		{name: "quota is not retried", prompt: "x\nmock: quota", fail: "Quota exceeded. Check your plan and billing details.", requests: []mockmodel.Scenario{"quota"}},
		{name: "r401 is retried", prompt: "x\nmock: r401", fail: "401 Unauthorized", requests: []mockmodel.Scenario{"r401", "r401"}},
		{name: "r403", prompt: "x\nmock: r403", fail: "403 Forbidden", requests: []mockmodel.Scenario{"r403", "r403"}},
		{name: "r500 is retried per request and per stream", prompt: "x\nmock: r500", fail: "experiencing high demand",
			requests: []mockmodel.Scenario{"r500", "r500", "r500", "r500"}},
		{name: "overloaded", prompt: "x\nmock: overloaded", fail: "Selected model is at capacity", requests: []mockmodel.Scenario{"overloaded", "overloaded"}},
		{name: "context", prompt: "x\nmock: context", fail: "ran out of room in the model's context window", requests: []mockmodel.Scenario{"context"}},
		{name: "cut", prompt: "x\nmock: cut", fail: "stream closed before response.completed", requests: []mockmodel.Scenario{"cut", "cut"}},
		{name: "hang meets the stream idle timeout", prompt: "x\nmock: hang", idleMS: 1500, fail: "idle timeout waiting for SSE",
			requests: []mockmodel.Scenario{"hang", "hang"}},
		{name: "hang_headers is never timed out by codex", prompt: "x\nmock: hang_headers", limit: 6 * time.Second, killed: true,
			requests: []mockmodel.Scenario{"hang_headers"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mock := startMock(t)
			limit := c.limit
			if limit == 0 {
				limit = hangGuard
			}
			r := codexExec(t, mock, clitest.CodexOptions{StreamIdleMS: c.idleMS}, limit, c.prompt)
			defer func() {
				if t.Failed() {
					t.Log(r.dump(mock))
				}
			}()
			if r.killed != c.killed {
				t.Fatalf("killed at the limit: %v, want %v", r.killed, c.killed)
			}
			ends := len(r.of("turn.completed")) + len(r.of("turn.failed"))
			switch {
			case c.killed:
				if ends != 0 {
					t.Errorf("the turn ended, want it still waiting")
				}
			case c.fail != "":
				failed := r.of("turn.failed")
				if r.exit != 1 || len(failed) != 1 || !strings.Contains(str(failed[0], "error", "message"), c.fail) {
					t.Errorf("exit %d, turn.failed %v; want exit 1 and a failure with %q", r.exit, failed, c.fail)
				}
			default:
				msgs := agentMessages(r)
				if r.exit != 0 || len(r.of("turn.completed")) != 1 || len(msgs) == 0 || msgs[len(msgs)-1] != c.text {
					t.Errorf("exit %d, agent messages %q; want exit 0, a completed turn ending with %q", r.exit, msgs, c.text)
				}
			}
			var want []step
			for _, s := range c.requests {
				want = append(want, step{s, true})
			}
			checkRequests(t, mock, mockmodel.APIOpenAI, "gpt-5.5", want)
			if c.file != "" {
				r.checkFile(t, c.file, c.content)
			}
		})
	}
}

// agentMessages are the texts of the completed agent_message items.
func agentMessages(r run) []string {
	var out []string
	for _, l := range r.of("item.completed") {
		if str(l, "item", "type") == "agent_message" {
			out = append(out, str(l, "item", "text"))
		}
	}
	return out
}

// A fallback chain: the same prompt fails on one model and completes on
// the next, and the mock saw each model by name.
func TestCodexExecPerModel(t *testing.T) {
	t.Parallel()
	mock := startMock(t)
	prompt := "Say hello\nmock: gpt-5.4-mini=quota gpt-5.5=text"
	a := codexExec(t, mock, clitest.CodexOptions{}, hangGuard, prompt, "-m", "gpt-5.4-mini")
	b := codexExec(t, mock, clitest.CodexOptions{}, hangGuard, prompt, "-m", "gpt-5.5")
	if a.exit != 1 || len(a.of("turn.failed")) != 1 {
		t.Errorf("gpt-5.4-mini: exit %d, want a failed turn\n%s", a.exit, a.dump(mock))
	}
	if msgs := agentMessages(b); b.exit != 0 || len(msgs) != 1 || msgs[0] != mockmodel.HelloText {
		t.Errorf("gpt-5.5: exit %d, messages %q\n%s", b.exit, msgs, b.dump(mock))
	}
	var got []string
	for _, q := range mock.Requests() {
		got = append(got, q.Model+"="+string(q.Scenario))
	}
	if strings.Join(got, " ") != "gpt-5.4-mini=quota gpt-5.5=text" {
		t.Errorf("requests %v", got)
	}
}
