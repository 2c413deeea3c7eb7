package mockmodel_test

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
)

// claudeP runs claude -p with stream-json output (and partial messages)
// against mock, with its own retries capped at 1.
func claudeP(t *testing.T, mock *mockmodel.Server, apiTimeout, limit time.Duration, prompt, model string, args ...string) run {
	t.Helper()
	env := clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{MaxRetries: 1, APITimeout: apiTimeout})
	args = append([]string{"-p", prompt, "--output-format", "stream-json", "--verbose", "--include-partial-messages", "--model", model}, args...)
	return runCLI(t, mock, limit, clitest.ClaudeBin(t), env, args...)
}

// Each scenario through claude -p, ending as EXECUTORS.md describes for
// Claude Code 2.1.330: successes with their text and side effects,
// failures with the result's status and text after the CLI's own
// retries (CLAUDE_CODE_MAX_RETRIES=1).
func TestClaudePrint(t *testing.T) {
	F := mockmodel.ScenarioFinal
	for _, c := range []struct {
		name       string
		prompt     string
		args       []string
		apiTimeout time.Duration
		limit      time.Duration // default hangGuard
		text       string        // the result of a successful run
		deltas     string        // the text deltas streamed, all together (default text)
		status     float64       // the failed result's api_error_status; -1 for null
		fail       string        // the failed result's text holds this
		reason     string        // the result's terminal_reason, when it matters
		retried    bool          // an api_retry line came before the end
		killed     bool          // still running at the limit: the agent must time it out
		requests   []step
		file       string // a file the run leaves, with WrittenContent
	}{
		{name: "text", prompt: "Say hello", text: mockmodel.HelloText, requests: []step{{"text", true}}},
		{name: "shell runs Bash", prompt: "Run it\nmock: shell\nmock-cmd: echo mock-side-effect > ran.txt", args: []string{"--allowedTools", "Bash"},
			text: mockmodel.FinalText, requests: []step{{"shell", true}, {F, true}}, file: "ran.txt"},
		{name: "write creates the file in the cwd", prompt: "Write it\nmock: write", args: []string{"--permission-mode", "acceptEdits"},
			text: mockmodel.FinalText, requests: []step{{"write", true}, {F, true}}, file: mockmodel.WriteFile},
		{name: "write creates the file named", prompt: "Write it\nmock: write\nmock-file: named.txt", args: []string{"--permission-mode", "acceptEdits"},
			text: mockmodel.FinalText, requests: []step{{"write", true}, {F, true}}, file: "named.txt"},
		{name: "r429 after one retry", prompt: "x\nmock: r429", status: 429, fail: "429", retried: true, requests: []step{{"r429", true}, {"r429", true}}},
		{name: "quota is a billing error", prompt: "x\nmock: quota", status: 400, fail: "Credit balance is too low", requests: []step{{"quota", true}}},
		{name: "r401 is retried", prompt: "x\nmock: r401", status: 401, fail: "Invalid API key", retried: true, requests: []step{{"r401", true}, {"r401", true}}},
		{name: "r403", prompt: "x\nmock: r403", status: 403, fail: "403", requests: []step{{"r403", true}}},
		{name: "r500", prompt: "x\nmock: r500", status: 500, fail: "500", retried: true, requests: []step{{"r500", true}, {"r500", true}}},
		{name: "overloaded is a 529", prompt: "x\nmock: overloaded", status: 529, fail: "529", retried: true, requests: []step{{"overloaded", true}, {"overloaded", true}}},
		{name: "context", prompt: "x\nmock: context", status: 400, fail: "Prompt is too long", reason: "prompt_too_long", requests: []step{{"context", true}}},
		{name: "cut is taken up without streaming", prompt: "x\nmock: cut", text: mockmodel.HelloText, deltas: "Partial Partial ", retried: true,
			requests: []step{{"cut", true}, {"cut", true}, {"cut", false}}},
		{name: "hang_headers meets API_TIMEOUT_MS", prompt: "x\nmock: hang_headers", apiTimeout: 3 * time.Second, status: -1, fail: "Request timed out",
			retried: true, requests: []step{{"hang_headers", true}, {"hang_headers", true}}},
		{name: "hang is not timed out by claude for minutes", prompt: "x\nmock: hang", limit: 6 * time.Second, killed: true,
			requests: []step{{"hang", true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mock := startMock(t)
			limit := c.limit
			if limit == 0 {
				limit = hangGuard
			}
			r := claudeP(t, mock, c.apiTimeout, limit, c.prompt, "claude-mock", c.args...)
			defer func() {
				if t.Failed() {
					t.Log(r.dump(mock))
				}
			}()
			if r.killed != c.killed {
				t.Fatalf("killed at the limit: %v, want %v", r.killed, c.killed)
			}
			results := r.of("result")
			switch {
			case c.killed:
				if len(results) != 0 {
					t.Errorf("a result line, want none: the run should still wait")
				}
				if !hasStreamEvent(r, "message_start") {
					t.Errorf("no message_start stream event: the stream did not start before the silence")
				}
			case len(results) != 1:
				t.Fatalf("%d result lines, want 1", len(results))
			case c.fail != "":
				res := results[0]
				status, ok := res["api_error_status"].(float64)
				if !ok {
					status = -1
				}
				if r.exit != 1 || res["is_error"] != true || status != c.status || !strings.Contains(str(res, "result"), c.fail) {
					t.Errorf("exit %d, is_error %v, api_error_status %v, result %q; want exit 1, an error with status %v and %q",
						r.exit, res["is_error"], res["api_error_status"], str(res, "result"), c.status, c.fail)
				}
			default:
				res := results[0]
				if r.exit != 0 || res["is_error"] != false || str(res, "result") != c.text {
					t.Errorf("exit %d, is_error %v, result %q; want exit 0 and %q", r.exit, res["is_error"], str(res, "result"), c.text)
				}
				want := c.deltas
				if want == "" {
					want = c.text
				}
				if got := textDeltas(r); got != want {
					t.Errorf("text deltas streamed %q, want %q", got, want)
				}
			}
			if c.reason != "" && (len(results) == 0 || str(results[0], "terminal_reason") != c.reason) {
				t.Errorf("terminal_reason %q, want %q", str(results[0], "terminal_reason"), c.reason)
			}
			if retried := hasSystem(r, "api_retry"); retried != c.retried {
				t.Errorf("an api_retry line: %v, want %v", retried, c.retried)
			}
			checkRequests(t, mock, mockmodel.APIAnthropic, "claude-mock", c.requests)
			if c.file != "" {
				content := mockmodel.WrittenContent
				if c.name == "shell runs Bash" {
					content = "mock-side-effect\n"
				}
				r.checkFile(t, c.file, content)
			}
		})
	}
}

func hasStreamEvent(r run, typ string) bool {
	for _, l := range r.of("stream_event") {
		if str(l, "event", "type") == typ {
			return true
		}
	}
	return false
}

// textDeltas are the text_delta stream events' texts, joined.
func textDeltas(r run) string {
	var b strings.Builder
	for _, l := range r.of("stream_event") {
		if str(l, "event", "delta", "type") == "text_delta" {
			b.WriteString(str(l, "event", "delta", "text"))
		}
	}
	return b.String()
}

func hasSystem(r run, subtype string) bool {
	for _, l := range r.of("system") {
		if l["subtype"] == subtype {
			return true
		}
	}
	return false
}

// A fallback chain: the same prompt fails on one model and completes on
// the next, and the mock saw each model by name.
func TestClaudePrintPerModel(t *testing.T) {
	t.Parallel()
	mock := startMock(t)
	prompt := "Say hello\nmock: claude-a=r403 claude-b=text"
	a := claudeP(t, mock, 0, hangGuard, prompt, "claude-a")
	b := claudeP(t, mock, 0, hangGuard, prompt, "claude-b")
	if res := a.of("result"); a.exit != 1 || len(res) != 1 || res[0]["is_error"] != true {
		t.Errorf("claude-a: exit %d, want a failed result\n%s", a.exit, a.dump(mock))
	}
	if res := b.of("result"); b.exit != 0 || len(res) != 1 || str(res[0], "result") != mockmodel.HelloText {
		t.Errorf("claude-b: exit %d, want %q\n%s", b.exit, mockmodel.HelloText, b.dump(mock))
	}
	var got []string
	for _, q := range mock.Requests() {
		got = append(got, q.Model+"="+string(q.Scenario))
	}
	if strings.Join(got, " ") != "claude-a=r403 claude-b=text" {
		t.Errorf("requests %v", got)
	}
}
