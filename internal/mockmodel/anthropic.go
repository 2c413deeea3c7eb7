package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// antRequest is what the mock reads of a Messages API request.
type antRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"` // a string, or a list of text blocks
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string, or a list of blocks
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// conversation returns the conversation's texts, oldest first, and
// whether the last user message carries a tool result: this request is
// the model turn after a tool ran.
func (q *antRequest) conversation() (msgs []Message, toolResult bool) {
	for _, m := range q.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			continue
		}
		if m.Role == "user" {
			toolResult = false
		}
		for _, b := range contentParts(m.Content) {
			switch b.Type {
			case "text":
				// Claude Code sends a resumed session's follow-up in the
				// message of the last tool's result, after it: the
				// user's words, not the tool's. A reminder it adds there
				// is neither.
				if strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
					continue
				}
				msgs = append(msgs, Message{Role: Role(m.Role), Text: b.Text})
				toolResult = false
			case "tool_result":
				toolResult = true
				msgs = append(msgs, Message{Role: RoleTool})
			}
		}
	}
	return msgs, toolResult
}

// cwd is the working directory Claude Code states in its prompt: "Primary
// working directory: /path" in 2.1.330 (in a system message), "Working
// directory: /path" in older versions (in the system prompt).
func (q *antRequest) cwd() string {
	var texts []string
	for _, b := range contentParts(q.System) {
		texts = append(texts, b.Text)
	}
	for _, m := range q.Messages {
		for _, b := range contentParts(m.Content) {
			texts = append(texts, b.Text)
		}
	}
	for _, t := range texts {
		for _, l := range strings.Split(t, "\n") {
			if i := strings.Index(strings.ToLower(l), "working directory:"); i >= 0 {
				if dir := strings.TrimSpace(l[i+len("working directory:"):]); filepath.IsAbs(dir) {
					return dir
				}
			}
		}
	}
	return ""
}

func (q *antRequest) tools() []string {
	var names []string
	for _, t := range q.Tools {
		names = append(names, t.Name)
	}
	return names
}

// antBlock is a content block of the mock's answer.
type antBlock struct {
	Type  string         `json:"type"`
	Text  string         `json:"text,omitempty"`
	ID    string         `json:"id,omitempty"`
	Name  string         `json:"name,omitempty"`
	Input map[string]any `json:"input,omitempty"`
}

// anthropic answers POST /v1/messages as the Anthropic Messages API does:
// streamed, or as one JSON message when the request does not stream
// (Claude Code's fallback after a broken stream).
func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	var q antRequest
	if err := decode(r, &q); err != nil {
		antFail(w, http.StatusBadRequest, "", "invalid_request_error", err.Error())
		return
	}
	msgs, toolResult := q.conversation()
	d := parseDirectives(msgs)
	sc, err := d.scenario(q.Model, toolResult)
	var resets time.Time
	if sc == ScenarioUsageLimit {
		var reached bool
		if resets, reached = s.usageLimit(); !reached {
			sc = ScenarioText // the limit reset
		}
	}
	n := s.record(Request{API: APIAnthropic, Model: q.Model, Scenario: sc, ToolResult: toolResult, Stream: q.Stream, Conversation: msgs, Key: requestKey(r)})
	w.Header().Set("Request-Id", "req_mock_"+strconv.Itoa(n))
	if err != nil {
		antFail(w, http.StatusBadRequest, "", "invalid_request_error", err.Error())
		return
	}
	switch sc {
	case ScenarioRateLimit:
		antFail(w, http.StatusTooManyRequests, "1", "rate_limit_error",
			"This request would exceed the rate limit for your organization of 50 requests per minute. Please try again later.")
		return
	case ScenarioUsageLimit:
		// As Anthropic answers a subscription over its limit: 429 with the
		// unified rate-limit headers saying it is rejected until when.
		in := int64(max(time.Until(resets).Round(time.Second), time.Second) / time.Second)
		h := w.Header()
		h.Set("Anthropic-Ratelimit-Unified-Status", "rejected")
		h.Set("Anthropic-Ratelimit-Unified-Reset", strconv.FormatInt(resets.Unix(), 10))
		h.Set("Anthropic-Ratelimit-Unified-5h-Status", "rejected")
		h.Set("Anthropic-Ratelimit-Unified-5h-Reset", strconv.FormatInt(resets.Unix(), 10))
		h.Set("Anthropic-Ratelimit-Unified-Representative-Claim", "five_hour")
		antFail(w, http.StatusTooManyRequests, strconv.FormatInt(in, 10), "rate_limit_error",
			"This request would exceed your account's rate limit. Please try again later.")
		return
	case ScenarioQuota:
		antFail(w, http.StatusBadRequest, "", "invalid_request_error",
			"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")
		return
	case ScenarioUnauthorized:
		antFail(w, http.StatusUnauthorized, "", "authentication_error", "invalid x-api-key")
		return
	case ScenarioForbidden:
		antFail(w, http.StatusForbidden, "", "permission_error", "Your API key does not have permission to use the specified resource.")
		return
	case ScenarioServerError:
		antFail(w, http.StatusInternalServerError, "", "api_error", "Internal server error")
		return
	case ScenarioOverloaded:
		antFail(w, 529, "", "overloaded_error", "Overloaded")
		return
	case ScenarioContext:
		antFail(w, http.StatusBadRequest, "", "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
		return
	case ScenarioHangHeaders:
		s.wait(r)
		return
	}

	blocks, stop := []antBlock{{Type: "text", Text: HelloText}}, "end_turn"
	tools := antToolsFor(q.tools())
	switch sc {
	case ScenarioShell, ScenarioEscalate: // Bash has no escalation: the same call
		if err := hasTool(q.tools(), tools.shell); err != nil {
			antFail(w, http.StatusBadRequest, "", "invalid_request_error", err.Error())
			return
		}
		blocks, stop = []antBlock{{Type: "tool_use", ID: fmt.Sprintf("toolu_mock_%d", n), Name: tools.shell,
			Input: map[string]any{"command": d.commandOr(), "description": "Run the mock model's command"}}}, "tool_use"
	case ScenarioWrite, ScenarioEdit:
		tool := tools.write
		if sc == ScenarioEdit {
			tool = tools.edit
		}
		if err := hasTool(q.tools(), tool); err != nil {
			antFail(w, http.StatusBadRequest, "", "invalid_request_error", err.Error())
			return
		}
		path := d.file
		if path == "" {
			path = WriteFile
		}
		if dir := q.cwd(); !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		blocks, stop = []antBlock{{Type: "tool_use", ID: fmt.Sprintf("toolu_mock_%d", n), Name: tool,
			Input: map[string]any{tools.path: path, tools.content: WrittenContent}}}, "tool_use"
		if sc == ScenarioEdit {
			blocks[0].Input = map[string]any{tools.path: path,
				tools.old: strings.TrimSuffix(WrittenContent, "\n"), tools.new: strings.TrimSuffix(EditedContent, "\n")}
		}
	case ScenarioFinal:
		blocks = []antBlock{{Type: "text", Text: FinalText}}
	}
	id := fmt.Sprintf("msg_mock_%d", n)
	if !q.Stream {
		if sc == ScenarioHang {
			s.wait(r)
			return
		}
		// cut answers here too: a broken stream's fallback gets the text.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": q.Model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": antUsage(7)})
		return
	}
	var e *sse
	if sc == ScenarioCut {
		if e, err = startCutSSE(w); err != nil {
			panic(http.ErrAbortHandler)
		}
	} else {
		e = startSSE(w)
	}
	e.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": q.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": antUsage(1)}})
	switch sc {
	case ScenarioHang:
		s.wait(r)
		return
	case ScenarioCut:
		e.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "Partial "}})
		s.cut(e)
		return
	}
	e.send("ping", map[string]any{"type": "ping"})
	for i, b := range blocks {
		switch b.Type {
		case "text":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, c := range chunks(b.Text, 9) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": c}})
			}
		case "tool_use":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			in, _ := json.Marshal(b.Input)
			for _, c := range append([]string{""}, chunks(string(in), 24)...) { // the API starts with an empty delta
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": c}})
			}
		}
		e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 7}})
	e.send("message_stop", map[string]any{"type": "message_stop"})
}

func antUsage(output int) map[string]any {
	return map[string]any{"input_tokens": 20, "output_tokens": output, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

// antFail answers an error as the Anthropic API does.
func antFail(w http.ResponseWriter, status int, retryAfter, typ, msg string) {
	jsonError(w, status, retryAfter, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// antTools names the tools of a CLI that speaks the Messages API, and
// their arguments: Claude Code's (Bash, Write, Edit) or OpenCode's
// (bash, write, edit).
type antTools struct {
	shell, write, edit      string
	path, content, old, new string
}

var (
	claudeTools   = antTools{shell: "Bash", write: "Write", edit: "Edit", path: "file_path", content: "content", old: "old_string", new: "new_string"}
	opencodeTools = antTools{shell: "bash", write: "write", edit: "edit", path: "filePath", content: "content", old: "oldString", new: "newString"}
)

// antToolsFor tells the CLI by the tools it offers: OpenCode's are in
// lower case. Neither set offered: Claude Code's, so that the scenario's
// check names what is missing.
func antToolsFor(offered []string) antTools {
	if hasTool(offered, claudeTools.shell) != nil && hasTool(offered, opencodeTools.shell) == nil {
		return opencodeTools
	}
	return claudeTools
}
