package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
)

// anthropic answers POST /v1/messages as the Anthropic Messages API does:
// streaming, or as one JSON message when the request does not stream.
func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	var model string
	var stream bool
	p, _, err := readPrompt(r, &model, &stream)
	if err != nil {
		jsonError(w, http.StatusBadRequest, "", antError("invalid_request_error", err.Error()))
		return
	}
	scenario := p.scenario
	n := s.record(Request{API: "anthropic", Model: model, Scenario: scenario, ToolResult: p.toolResult, Stream: stream})
	switch scenario {
	case "r429":
		jsonError(w, http.StatusTooManyRequests, "1", antError("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"))
		return
	case "quota":
		jsonError(w, http.StatusBadRequest, "", antError("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."))
		return
	case "r401":
		jsonError(w, http.StatusUnauthorized, "", antError("authentication_error", "invalid x-api-key"))
		return
	case "r403":
		jsonError(w, http.StatusForbidden, "", antError("permission_error", "Your API key does not have permission to use the specified resource."))
		return
	case "r500":
		jsonError(w, http.StatusInternalServerError, "", antError("api_error", "Internal server error"))
		return
	case "overloaded":
		jsonError(w, 529, "", antError("overloaded_error", "Overloaded"))
		return
	case "context":
		jsonError(w, http.StatusBadRequest, "", antError("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"))
		return
	case "hang_headers":
		s.wait(r)
		return
	}
	id := fmt.Sprintf("msg_%d", n)
	var blocks []map[string]any
	stop := "end_turn"
	switch scenario {
	case "shell":
		cmd := p.command
		if cmd == "" {
			cmd = defaultCommand
		}
		blocks = []map[string]any{{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": "Bash", "input": map[string]any{"command": cmd, "description": "Run the mock command"}}}
		stop = "tool_use"
	case "write":
		path := "mock_write.txt"
		if p.cwd != "" {
			path = filepath.Join(p.cwd, path)
		}
		blocks = []map[string]any{{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", n), "name": "Write", "input": map[string]any{"file_path": path, "content": "written by the mock model\n"}}}
		stop = "tool_use"
	case "final":
		blocks = []map[string]any{{"type": "text", "text": finalText}}
	default:
		blocks = []map[string]any{{"type": "text", "text": helloText}}
	}
	usage := map[string]any{"input_tokens": 20, "output_tokens": 7, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !stream {
		if scenario == "hang" {
			s.wait(r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	e := startSSE(w)
	e.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 20, "output_tokens": 1}}})
	switch scenario {
	case "hang":
		s.wait(r)
		return
	case "cut":
		e.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "Partial "}})
		cut(w)
		return
	}
	for i, b := range blocks {
		switch b["type"] {
		case "text":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, c := range chunks(b["text"].(string)) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": c}})
			}
		case "tool_use":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 7}})
	e.send("message_stop", map[string]any{"type": "message_stop"})
}

func antError(typ, msg string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
}
