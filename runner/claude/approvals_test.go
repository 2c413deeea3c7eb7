package claude

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// asker is a person answering by a fixed decision, keeping the questions.
type asker struct {
	mu     sync.Mutex
	asked  []state.ApprovalRequest
	answer runner.Approval
}

func (a *asker) ask(_ context.Context, req state.ApprovalRequest) runner.Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, req)
	return a.answer
}

func (a *asker) questions() []state.ApprovalRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]state.ApprovalRequest(nil), a.asked...)
}

// events keeps what the ask server said.
type events struct {
	mu  sync.Mutex
	evs []runner.Event
}

func (e *events) add(ev runner.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) all() []runner.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]runner.Event(nil), e.evs...)
}

func startTestAskServer(t *testing.T, policy runner.ApprovalPolicy, a *asker) (*askServer, *events) {
	t.Helper()
	spec := runner.AttemptSpec{ServeDir: t.TempDir(), Ask: a.ask}
	s, err := newAskServer(context.Background(), spec, policy, []string{"/bin/agent", "claude-approval-mcp"}, nil, "/work")
	if err != nil {
		t.Fatal(err)
	}
	evs := &events{}
	s.start(evs.add)
	t.Cleanup(s.close)
	return s, evs
}

// mcpClient drives ServeMCP as Claude Code does, over pipes.
type mcpClient struct {
	in   io.WriteCloser
	out  *bufio.Reader
	done chan error
}

func startMCP(t *testing.T, dir string) *mcpClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &mcpClient{in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := ServeMCP(inR, outW, dir)
		outW.Close()
		c.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-c.done; err != nil {
			t.Errorf("ServeMCP: %v", err)
		}
	})
	return c
}

func (c *mcpClient) call(t *testing.T, msg string) map[string]any {
	t.Helper()
	if _, err := io.WriteString(c.in, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	return m
}

// The MCP server answers what Claude Code 2.1.330 sends, in its order,
// and relays a tool call to the agent: the question the agent sees says
// what the call would do, and Claude Code gets the decision it expects.
func TestPermissionPromptToolOverMCP(t *testing.T) {
	for _, c := range []struct {
		name     string
		answer   runner.Approval
		behavior string
	}{
		{"accepted", runner.ApprovalAccept, "allow"},
		{"declined", runner.ApprovalDecline, "deny"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &asker{answer: c.answer}
			s, _ := startTestAskServer(t, runner.ApprovalAsk, a)
			m := startMCP(t, s.dir)
			if r := m.call(t, `{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{}}`); r["error"] == nil {
				t.Errorf("server/discover answered %v, want method not found", r)
			}
			r := m.call(t, `{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}},"jsonrpc":"2.0","id":0}`)
			if res, _ := r["result"].(map[string]any); res["protocolVersion"] != "2025-11-25" || res["capabilities"] == nil {
				t.Errorf("initialize answered %v", r)
			}
			if _, err := io.WriteString(m.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
				t.Fatal(err)
			}
			r = m.call(t, `{"method":"tools/list","jsonrpc":"2.0","id":1}`)
			if b, _ := json.Marshal(r); !strings.Contains(string(b), `"name":"approve"`) {
				t.Errorf("tools/list answered %s", b)
			}
			r = m.call(t, `{"method":"tools/call","params":{"name":"approve","arguments":{"tool_name":"Bash","input":{"command":"rm -rf build","description":"Clean"},"tool_use_id":"toolu_1"}},"jsonrpc":"2.0","id":2}`)
			res, _ := r["result"].(map[string]any)
			content, _ := res["content"].([]any)
			if len(content) != 1 {
				t.Fatalf("tools/call answered %v", r)
			}
			var decision map[string]any
			if err := json.Unmarshal([]byte(content[0].(map[string]any)["text"].(string)), &decision); err != nil || decision["behavior"] != c.behavior {
				t.Fatalf("decision %v (%v), want %s", decision, err, c.behavior)
			}
			if c.behavior == "allow" {
				if in, _ := decision["updatedInput"].(map[string]any); in["command"] != "rm -rf build" {
					t.Errorf("updatedInput %v, want the call's own input", decision["updatedInput"])
				}
			} else if msg, _ := decision["message"].(string); !strings.Contains(msg, "declined") {
				t.Errorf("the model is told %q", msg)
			}
			q := a.questions()
			if len(q) != 1 || q[0].ID != "toolu_1" || q[0].Kind != state.ApprovalCommand || q[0].Tool != "Bash" ||
				q[0].Command != "rm -rf build" || q[0].Cwd != "/work" || q[0].Reason != "Clean" {
				t.Errorf("the agent was asked %+v", q)
			}
			if !s.answered("toolu_1") {
				t.Error("the call is not known as answered: Claude Code's denial would be counted twice")
			}
		})
	}
}

// What each tool's question shows: a Write's whole content, an Edit's
// old and new text, a MultiEdit's edits, any other tool's input.
func TestPermissionPromptQuestions(t *testing.T) {
	s, _ := startTestAskServer(t, runner.ApprovalAsk, &asker{})
	for _, c := range []struct {
		tool, input string
		want        state.ApprovalRequest
	}{
		{"Write", `{"file_path":"/w/a.txt","content":"one\ntwo\n"}`, state.ApprovalRequest{Kind: state.ApprovalFileChange, Paths: []string{"/w/a.txt"},
			Diff: "--- /w/a.txt\n+++ /w/a.txt\n@@ -0,0 +1,2 @@ the whole file, as written\n+one\n+two\n"}},
		{"Edit", `{"file_path":"/w/a.txt","old_string":"one","new_string":"uno\ndos","replace_all":true}`, state.ApprovalRequest{Kind: state.ApprovalFileChange,
			Paths: []string{"/w/a.txt"}, Diff: "--- /w/a.txt\n+++ /w/a.txt\n@@ @@\n-one\n+uno\n+dos\n", Reason: "every occurrence is replaced"}},
		{"MultiEdit", `{"file_path":"/w/b.go","edits":[{"old_string":"a","new_string":"b"},{"old_string":"c","new_string":"d"}]}`,
			state.ApprovalRequest{Kind: state.ApprovalFileChange, Paths: []string{"/w/b.go"}, Diff: "--- /w/b.go\n+++ /w/b.go\n@@ @@\n-a\n+b\n@@ @@\n-c\n+d\n"}},
		{"WebFetch", `{"url":"https://example.com/x", "prompt":"read it"}`, state.ApprovalRequest{Kind: state.ApprovalTool,
			Input: `{"prompt":"read it","url":"https://example.com/x"}`}},
	} {
		got := s.request(askQuestion{ToolName: c.tool, Input: json.RawMessage(c.input), ToolUseID: "toolu_" + c.tool})
		c.want.ID, c.want.Tool = "toolu_"+c.tool, c.tool
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(c.want)
		if string(gb) != string(wb) {
			t.Errorf("%s: question\n %s\nwant\n %s", c.tool, gb, wb)
		}
	}
	// A tool_use_id that is not fit to name a question, or one used
	// already, gets a name of the agent's.
	for _, id := range []string{"", "toolu_Write", "a b", strings.Repeat("x", 101)} {
		if got := s.request(askQuestion{ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`), ToolUseID: id}); !strings.HasPrefix(got.ID, "claude-ask-") {
			t.Errorf("tool_use_id %q named the question %q", id, got.ID)
		}
	}
}

// Anyone may connect to the socket (Landlock does not guard a Unix
// socket's path): without the attempt's token nothing is asked, and a
// question with it is asked once, one at a time.
func TestAskSocketNeedsTheAttemptsToken(t *testing.T) {
	a := &asker{answer: runner.ApprovalAccept}
	s, evs := startTestAskServer(t, runner.ApprovalAsk, a)
	ask := func(q askQuestion) (askAnswer, error) {
		m := &mcpServerState{dir: s.dir}
		return m.ask(q)
	}
	for _, token := range []string{"", "0000", s.token + "0"} {
		if ans, err := ask(askQuestion{Token: token, ToolName: "Bash", Input: json.RawMessage(`{"command":"id"}`)}); err == nil {
			t.Errorf("token %q: answered %+v, want no answer", token, ans)
		}
	}
	if q := a.questions(); len(q) != 0 {
		t.Fatalf("asked %+v without the token", q)
	}
	refused := 0
	for _, ev := range evs.all() {
		if strings.Contains(ev.Message, "without the attempt's token") {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("%d refusals said, want 3: %+v", refused, evs.all())
	}
	// Not JSON, then a line past the bound: no answer, nothing asked.
	for _, body := range []string{"not json\n", strings.Repeat("x", maxAskLine+10) + "\n"} {
		c, err := net.Dial("unix", filepath.Join(s.dir, askSocket))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, body)
		if b, _ := io.ReadAll(c); len(b) != 0 {
			t.Errorf("answered %q to a bad question", b)
		}
		c.Close()
	}
	ans, err := ask(askQuestion{Token: s.token, ToolName: "Bash", Input: json.RawMessage(`{"command":"id"}`)})
	if err != nil || !ans.Allow || len(a.questions()) != 1 {
		t.Errorf("with the token: %+v %v, asked %d", ans, err, len(a.questions()))
	}
	// The token is the attempt's alone: 0600 in its own directory.
	if fi, err := os.Stat(filepath.Join(s.dir, askToken)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v", fi, err)
	}
}

// A policy answers without asking: accept allows, decline denies and
// is a denied call.
func TestPermissionPromptByPolicy(t *testing.T) {
	for _, c := range []struct {
		policy runner.ApprovalPolicy
		allow  bool
	}{{runner.ApprovalAcceptAll, true}, {runner.ApprovalDeclineAll, false}} {
		a := &asker{answer: runner.ApprovalAccept}
		s, evs := startTestAskServer(t, c.policy, a)
		m := &mcpServerState{dir: s.dir}
		ans, err := m.ask(askQuestion{Token: s.token, ToolName: "Bash", Input: json.RawMessage(`{"command":"make"}`), ToolUseID: "t1"})
		if err != nil || ans.Allow != c.allow || len(a.questions()) != 0 {
			t.Errorf("%s: %+v %v, asked %d", c.policy, ans, err, len(a.questions()))
		}
		denied := 0
		for _, ev := range evs.all() {
			if ev.Type == runner.EventDenied && ev.Name == "Bash" && ev.Description == "run make in /work" {
				denied++
			}
		}
		if want := map[bool]int{true: 0, false: 1}[c.allow]; denied != want {
			t.Errorf("%s: %d denied calls, want %d: %+v", c.policy, denied, want, evs.all())
		}
	}
}
