package claude

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ServeMCP serves the permission prompt tool to Claude Code: an MCP
// server over stdio (JSON-RPC 2.0, one message a line) with one tool,
// approve, which Claude Code calls with the tool call it would otherwise
// have denied ({tool_name, input, tool_use_id}). Each call is relayed to
// the agent over the Unix socket in dir, with the token kept there, and
// the agent's answer is given back as Claude Code expects it: a text
// content holding {"behavior":"allow","updatedInput":…} or
// {"behavior":"deny","message":…}. It returns when stdin ends.
//
// Claude Code 2.1.330 first sends server/discover (answered: no such
// method), then initialize, notifications/initialized, tools/list and
// tools/call.
//
// A question the agent does not answer because it is not there (no
// socket, or the connection ends before the answer: the agent stopped or
// was killed; the attempt goes on under its keeper) is asked again, every
// few seconds at most, until an agent answers it: the agent's next life
// serves the socket again with the same token. Only when the token is no
// longer there (the agent that closed the socket ended the attempt) or
// stdin ends is it declined.
func ServeMCP(stdin io.Reader, stdout io.Writer, dir string) error {
	token, err := os.ReadFile(filepath.Join(dir, askToken))
	if err != nil {
		return fmt.Errorf("claude approval server: %w", err)
	}
	ended := make(chan struct{})
	m := &mcpServerState{out: stdout, dir: dir, token: string(token), ended: ended}
	r := bufio.NewReaderSize(stdin, 64<<10)
	var calls sync.WaitGroup
	defer calls.Wait()
	defer close(ended)
	for {
		line, err := readLine(r, maxAskLine)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claude approval server: %w", err)
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(line, &msg) != nil {
			m.reply(nil, nil, &rpcError{Code: -32700, Message: "parse error"})
			continue
		}
		if len(msg.ID) == 0 || string(msg.ID) == "null" {
			continue // a notification: nothing to answer
		}
		switch msg.Method {
		case "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(msg.Params, &p)
			if p.ProtocolVersion == "" {
				p.ProtocolVersion = "2025-06-18"
			}
			m.reply(msg.ID, map[string]any{"protocolVersion": p.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": mcpServer, "version": "1"}}, nil)
		case "ping":
			m.reply(msg.ID, map[string]any{}, nil)
		case "tools/list":
			m.reply(msg.ID, map[string]any{"tools": []any{map[string]any{
				"name":        mcpTool,
				"description": "Asks the person the agent answers to whether a tool call may run.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
					"tool_name": map[string]any{"type": "string"}, "input": map[string]any{"type": "object"},
					"tool_use_id": map[string]any{"type": "string"}}, "required": []string{"tool_name", "input"}},
			}}}, nil)
		case "tools/call":
			// Answered when the agent has: other messages are answered
			// meanwhile.
			calls.Add(1)
			go func(id, params json.RawMessage) {
				defer calls.Done()
				m.call(id, params)
			}(msg.ID, msg.Params)
		default:
			m.reply(msg.ID, nil, &rpcError{Code: -32601, Message: "method not found: " + msg.Method})
		}
	}
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// mcpServerState is one server's stdout and where it reaches the agent.
type mcpServerState struct {
	mu    sync.Mutex
	out   io.Writer
	dir   string
	token string
	ended <-chan struct{} // stdin ended: Claude Code is gone
}

// askRetryMax is the longest wait between asks of a question while the
// agent is away: the agent's next life hears it this soon after it
// serves the socket.
const askRetryMax = 2 * time.Second

// errAgentGone is a question the agent was not there to answer.
var errAgentGone = errors.New("the agent is not there")

func (m *mcpServerState) reply(id json.RawMessage, result any, e *rpcError) {
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if id == nil {
		msg["id"] = nil
	}
	if e != nil {
		msg["error"] = e
	} else {
		msg["result"] = result
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.out.Write(append(b, '\n'))
}

// call relays one tools/call to the agent and answers Claude Code.
func (m *mcpServerState) call(id, params json.RawMessage) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			ToolName  string          `json:"tool_name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
		} `json:"arguments"`
	}
	if json.Unmarshal(params, &p) != nil || p.Name != mcpTool {
		m.reply(id, nil, &rpcError{Code: -32602, Message: "unknown tool"})
		return
	}
	input := p.Arguments.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	decision := map[string]any{"behavior": "deny", "message": "The agent could not be asked; the call is declined."}
	ans, err := m.relay(askQuestion{Token: m.token, ToolName: p.Arguments.ToolName, Input: input, ToolUseID: p.Arguments.ToolUseID})
	switch {
	case err != nil:
		decision["message"] = "The agent could not be asked (" + err.Error() + "); the call is declined."
	case ans.Allow:
		decision = map[string]any{"behavior": "allow", "updatedInput": input}
	case ans.Message != "":
		decision["message"] = ans.Message
	}
	text, _ := json.Marshal(decision)
	m.reply(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}}, nil)
}

// relay asks q until an agent answers it (see ServeMCP).
func (m *mcpServerState) relay(q askQuestion) (askAnswer, error) {
	wait := 100 * time.Millisecond
	for {
		ans, err := m.ask(q)
		if !errors.Is(err, errAgentGone) {
			return ans, err
		}
		// The token gone is the attempt over: nobody will answer.
		if t, rerr := os.ReadFile(filepath.Join(m.dir, askToken)); rerr != nil || string(t) != m.token {
			return askAnswer{}, err
		}
		t := time.NewTimer(wait)
		select {
		case <-m.ended:
			t.Stop()
			return askAnswer{}, err
		case <-t.C:
		}
		wait = min(2*wait, askRetryMax)
	}
}

// ask puts one question to the agent over the socket and waits for its
// answer, as long as the agent takes. The agent not there, or gone before
// it answered, is errAgentGone.
func (m *mcpServerState) ask(q askQuestion) (askAnswer, error) {
	c, err := dialIn(m.dir, askSocket)
	if err != nil {
		return askAnswer{}, fmt.Errorf("%w: %w", errAgentGone, err)
	}
	defer c.Close()
	b, err := json.Marshal(q)
	if err != nil {
		return askAnswer{}, err
	}
	_ = c.SetWriteDeadline(time.Now().Add(askReadTimeout))
	if _, err := c.Write(append(b, '\n')); err != nil {
		return askAnswer{}, fmt.Errorf("%w: %w", errAgentGone, err)
	}
	line, err := readLine(bufio.NewReader(c), 64<<10)
	if err != nil {
		return askAnswer{}, fmt.Errorf("%w: no answer: %w", errAgentGone, err)
	}
	var a askAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		return askAnswer{}, err
	}
	return a, nil
}

// dialIn connects to the Unix socket name in dir: from within dir, so a
// long path is no matter.
func dialIn(dir, name string) (net.Conn, error) {
	path := filepath.Join(dir, name)
	if len(path) < 100 {
		return net.Dial("unix", path)
	}
	if err := os.Chdir(dir); err != nil {
		return nil, err
	}
	return net.Dial("unix", name)
}
