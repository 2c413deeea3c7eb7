package mockmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/testkit"
)

func startTestMock(t *testing.T) *Server {
	t.Helper()
	m, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func post(t *testing.T, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// What the CLIs ask besides the model, and what the mock refuses.
func TestHTTPSurface(t *testing.T) {
	m := startTestMock(t)
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		bodyHas                  string
	}{
		{name: "Claude Code 2.1.197's reachability check", method: http.MethodHead, path: "/", status: 200},
		{name: "Claude Code 2.1.330's reachability check", method: http.MethodHead, path: "/api/hello", status: 200},
		{name: "an unknown scenario is a 400 naming it (openai)", method: http.MethodPost, path: "/v1/responses",
			body:   `{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"mock: r249"}]}]}`,
			status: 400, bodyHas: `unknown scenario \"r249\"`},
		{name: "an unknown scenario is a 400 naming it (anthropic)", method: http.MethodPost, path: "/v1/messages?beta=true",
			body: `{"model":"m","stream":true,"messages":[{"role":"user","content":"mock: r249"}]}`, status: 400, bodyHas: `unknown scenario \"r249\"`},
		{name: "shell needs the shell tool offered (openai)", method: http.MethodPost, path: "/v1/responses",
			body: `{"model":"m","stream":true,"tools":[{"type":"function","name":"shell"}],"input":"mock: shell"}`, status: 400, bodyHas: `exec_command`},
		{name: "write needs the Write tool offered (anthropic)", method: http.MethodPost, path: "/v1/messages",
			body: `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"mock: write"}]}`, status: 400, bodyHas: `Write`},
		{name: "edit updates the file named with apply_patch (openai)", method: http.MethodPost, path: "/v1/responses",
			body:   `{"model":"m","stream":true,"tools":[{"type":"custom","name":"apply_patch"}],"input":"mock: edit\nmock-file: a.txt"}`,
			status: 200, bodyHas: `*** Update File: a.txt\n@@\n-written by the mock model\n+edited by the mock model\n`},
		{name: "OpenCode's bash is called with its own name (anthropic)", method: http.MethodPost, path: "/v1/messages",
			body:   `{"model":"m","stream":false,"tools":[{"name":"bash"},{"name":"write"}],"messages":[{"role":"user","content":"mock: shell"}]}`,
			status: 200, bodyHas: `"name":"bash"`},
		{name: "OpenCode's write takes filePath (anthropic)", method: http.MethodPost, path: "/v1/messages",
			body:   `{"model":"m","stream":false,"tools":[{"name":"bash"},{"name":"write"}],"messages":[{"role":"user","content":"mock: write\nmock-file: /w/a.txt"}]}`,
			status: 200, bodyHas: `"filePath":"/w/a.txt"`},
		{name: "Gemini's stream is data-only events, usage on the last", method: http.MethodPost, path: "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
			body:   `{"contents":[{"role":"user","parts":[{"text":"Say hello"}]}]}`,
			status: 200, bodyHas: `"finishReason":"STOP","index":0}],"modelVersion":"gemini-x","responseId":"resp_mock_8","usageMetadata":{"candidatesTokenCount":7,"promptTokenCount":20,"totalTokenCount":27}}`},
		{name: "Gemini's shell is run_shell_command, in the workspace its first message states", method: http.MethodPost, path: "/v1beta/models/g:generateContent",
			body: `{"tools":[{"functionDeclarations":[{"name":"run_shell_command"},{"name":"write_file"}]}],` +
				`"contents":[{"role":"user","parts":[{"text":"- **Workspace Directories:**\n  - /w\n"},{"text":"mock: write"}]}]}`,
			status: 200, bodyHas: `"functionCall":{"args":{"content":"written by the mock model\n","file_path":"/w/mock_write.txt"},"name":"write_file"}`},
		{name: "Gemini's 429 says its retry delay", method: http.MethodPost, path: "/v1beta/models/g:streamGenerateContent?alt=sse",
			body: `{"contents":[{"role":"user","parts":[{"text":"mock: r429"}]}]}`, status: 429, bodyHas: `"retryDelay":"1s"`},
		{name: "after Gemini's function response, the final text", method: http.MethodPost, path: "/v1beta/models/g:generateContent",
			body: `{"contents":[{"role":"user","parts":[{"text":"mock: shell"}]},{"role":"model","parts":[{"functionCall":{"name":"run_shell_command"}}]},` +
				`{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{}}}]}]}`, status: 200, bodyHas: FinalText},
		{name: "edit needs the Edit tool offered (anthropic)", method: http.MethodPost, path: "/v1/messages",
			body: `{"model":"m","stream":true,"tools":[{"name":"Write"}],"messages":[{"role":"user","content":"mock: edit"}]}`, status: 400, bodyHas: `Edit`},
		{name: "edit calls Edit with the old and new line (anthropic)", method: http.MethodPost, path: "/v1/messages",
			body:   `{"model":"m","stream":false,"tools":[{"name":"Edit"}],"messages":[{"role":"user","content":"mock: edit\nmock-file: /w/a.txt"}]}`,
			status: 200, bodyHas: `"name":"Edit","input":{"file_path":"/w/a.txt","new_string":"edited by the mock model","old_string":"written by the mock model"}`},
		{name: "not JSON", method: http.MethodPost, path: "/v1/messages", body: `{`, status: 400},
		{name: "a 429 says when to retry", method: http.MethodPost, path: "/v1/messages",
			body: `{"model":"m","stream":true,"messages":[{"role":"user","content":"mock: r429"}]}`, status: 429, bodyHas: `"rate_limit_error"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, m.URL()+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status || !strings.Contains(string(b), c.bodyHas) {
				t.Errorf("%s %s: %d %s; want %d with %q", c.method, c.path, resp.StatusCode, b, c.status, c.bodyHas)
			}
			if c.status == 429 && resp.Header.Get("Retry-After") != "1" {
				t.Errorf("Retry-After %q, want 1", resp.Header.Get("Retry-After"))
			}
		})
	}
}

// A tool result after the user's text is the turn after a tool ran; a
// user text after a tool result is a new turn.
func TestToolResultsEndTheirTurnOnly(t *testing.T) {
	m := startTestMock(t)
	for _, c := range []struct {
		name, path, body string
		want             Scenario
	}{
		{name: "openai, after the tool", path: "/v1/responses", want: ScenarioFinal,
			body: `{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"mock: shell"}]},
				{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`},
		{name: "openai, a new turn", path: "/v1/responses", want: ScenarioText,
			body: `{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"mock: shell"}]},
				{"type":"custom_tool_call_output","call_id":"c1","output":"ok"},{"type":"message","role":"user","content":[{"type":"input_text","text":"mock: text"}]}]}`},
		{name: "anthropic, after the tool", path: "/v1/messages", want: ScenarioFinal,
			body: `{"model":"m","stream":false,"messages":[{"role":"user","content":"mock: shell"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"<system-reminder>x</system-reminder>"}]}]}`},
		{name: "anthropic, a follow-up in the tool result's message (a resumed session)", path: "/v1/messages", want: ScenarioText,
			body: `{"model":"m","stream":false,"messages":[{"role":"user","content":"mock: shell after=r500"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"Your previous turn was cut off."}]}]}`},
		{name: "anthropic, a new turn", path: "/v1/messages", want: ScenarioText,
			body: `{"model":"m","stream":false,"messages":[{"role":"user","content":"mock: shell"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]},
				{"role":"user","content":"mock: text"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := post(t, context.Background(), m.URL()+c.path, c.body)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			reqs := m.Requests()
			if got := reqs[len(reqs)-1]; got.Scenario != c.want || got.ToolResult != (c.want == ScenarioFinal) {
				t.Errorf("recorded %+v, want scenario %s", got, c.want)
			}
		})
	}
}

// Each request's conversation is recorded, the user's texts and the
// model's earlier answers in order, on both APIs; a follow-up after an
// answer is a new turn, which the earlier turn's "mock:" line does not
// choose.
func TestTheConversationIsRecorded(t *testing.T) {
	m := startTestMock(t)
	want := []Message{{RoleUser, "first\nmock: hang"}, {RoleAssistant, "the answer"}, {RoleUser, "go on"}}
	for _, c := range []struct{ name, path, body string }{
		{name: "openai", path: "/v1/responses",
			body: `{"model":"m","stream":true,"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"first\nmock: hang"}]},
				{"type":"message","role":"assistant","content":[{"type":"output_text","text":"the answer"}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"go on"}]}]}`},
		{name: "anthropic", path: "/v1/messages",
			body: `{"model":"m","stream":false,"system":"rules","messages":[{"role":"user","content":"first\nmock: hang"},
				{"role":"assistant","content":[{"type":"text","text":"the answer"}]},{"role":"user","content":[{"type":"text","text":"go on"}]}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := post(t, context.Background(), m.URL()+c.path, c.body)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			reqs := m.Requests()
			got := reqs[len(reqs)-1]
			if fmt.Sprint(got.Conversation) != fmt.Sprint(want) {
				t.Errorf("conversation %v, want %v", got.Conversation, want)
			}
			if got.Scenario != ScenarioText {
				t.Errorf("the follow-up got %s, want text", got.Scenario)
			}
			if !got.Said(RoleAssistant, "answer") || got.Said(RoleUser, "answer") || !got.Said(RoleUser, "go on") {
				t.Errorf("Said does not tell who said what: %v", got.Conversation)
			}
		})
	}
}

// Claude Code re-asks without streaming after a broken stream: that
// answer is a whole JSON message.
func TestNonStreamingAnswerIsOneMessage(t *testing.T) {
	m := startTestMock(t)
	resp, err := post(t, context.Background(), m.URL()+"/v1/messages?beta=true", `{"model":"claude-x","stream":false,"messages":[{"role":"user","content":"hi\nmock: cut"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(msg.Content) != 1 || msg.Content[0].Text != HelloText || msg.StopReason != "end_turn" {
		t.Errorf("%d %+v", resp.StatusCode, msg)
	}
}

// Close ends requests that hang, before and after the headers, at once:
// no test waits on a hung mock and no handler outlives it (goleak).
func TestCloseEndsHangingRequests(t *testing.T) {
	for _, sc := range []Scenario{ScenarioHang, ScenarioHangHeaders} {
		t.Run(string(sc), func(t *testing.T) {
			m, err := Start()
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				resp, err := post(t, context.Background(), m.OpenAIBaseURL()+"/responses", `{"model":"m","stream":true,"input":"mock: `+string(sc)+`"}`)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				done <- err
			}()
			testkit.WaitFor(t, "the request", func() bool { return len(m.Requests()) > 0 })
			closed := make(chan struct{})
			go func() { m.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(30 * time.Second): // a hang guard, not a timing
				t.Fatal("Close did not return while a request hung")
			}
			if err := <-done; err == nil {
				t.Error("the hanging request ended cleanly; want the connection dropped")
			}
		})
	}
}

// A client that gives up ends a hanging handler too.
func TestClientGoingAwayEndsAHang(t *testing.T) {
	m := startTestMock(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := post(t, ctx, m.URL()+"/v1/messages", `{"model":"m","stream":true,"messages":[{"role":"user","content":"mock: hang_headers"}]}`)
		done <- err
	}()
	testkit.WaitFor(t, "the request", func() bool { return len(m.Requests()) > 0 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}
