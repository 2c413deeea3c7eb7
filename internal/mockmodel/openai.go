package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// openai answers POST /v1/responses as the OpenAI Responses API does,
// streaming.
func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	var model string
	var stream bool
	p, _, err := readPrompt(r, &model, &stream)
	if err != nil {
		jsonError(w, http.StatusBadRequest, "", oaiError("invalid_request_error", "bad_request", err.Error()))
		return
	}
	scenario := p.scenario
	n := s.record(Request{API: "openai", Model: model, Scenario: scenario, ToolResult: p.toolResult, Stream: stream})
	respID := fmt.Sprintf("resp_%d", n)
	switch scenario {
	case "r429":
		jsonError(w, http.StatusTooManyRequests, "1", oaiError("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 1s."))
		return
	case "quota":
		jsonError(w, http.StatusTooManyRequests, "", oaiError("insufficient_quota", "insufficient_quota", "You exceeded your current quota, please check your plan and billing details."))
		return
	case "r401":
		jsonError(w, http.StatusUnauthorized, "", oaiError("invalid_request_error", "invalid_api_key", "Incorrect API key provided."))
		return
	case "r403":
		jsonError(w, http.StatusForbidden, "", oaiError("invalid_request_error", "unsupported_country_region_territory", "Country, region, or territory not supported."))
		return
	case "r500":
		jsonError(w, http.StatusInternalServerError, "", oaiError("server_error", "server_error", "The server had an error while processing your request."))
		return
	case "overloaded":
		jsonError(w, http.StatusServiceUnavailable, "", oaiError("server_error", "server_is_overloaded", "The server is overloaded. Please try again later."))
		return
	case "hang_headers":
		s.wait(r)
		return
	}
	e := startSSE(w)
	e.send("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "status": "in_progress"}})
	switch scenario {
	case "hang":
		s.wait(r)
		return
	case "context":
		e.send("response.failed", map[string]any{"type": "response.failed", "response": map[string]any{"id": respID, "status": "failed",
			"error": map[string]any{"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}})
		return
	case "cut":
		oaiText(e, fmt.Sprintf("msg_%d", n), "Partial answer that never ends", false)
		cut(w)
		return
	case "shell", "escalate":
		cmd := p.command
		if cmd == "" {
			cmd = defaultCommand
		}
		args := map[string]any{"cmd": cmd}
		if scenario == "escalate" {
			args["sandbox_permissions"] = "require_escalated"
			args["justification"] = "The mock model needs to run this outside the sandbox."
		}
		b, _ := json.Marshal(args)
		e.send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0,
			"item": map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", n), "call_id": fmt.Sprintf("call_%d", n), "name": "exec_command", "arguments": string(b)}})
	case "write":
		patch := "*** Begin Patch\n*** Add File: mock_patch.txt\n+written by the mock model\n*** End Patch\n"
		e.send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0,
			"item": map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_%d", n), "call_id": fmt.Sprintf("call_%d", n), "name": "apply_patch", "input": patch}})
	case "final":
		oaiText(e, fmt.Sprintf("msg_%d", n), finalText, true)
	default:
		oaiText(e, fmt.Sprintf("msg_%d", n), helloText, true)
	}
	e.send("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": respID, "status": "completed",
		"usage": map[string]any{"input_tokens": 20, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 7, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 27}}})
}

// oaiText streams an assistant message; done sends its completed item.
func oaiText(e *sse, id, text string, done bool) {
	e.send("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0,
		"item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}})
	for _, c := range chunks(text) {
		e.send("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": id, "output_index": 0, "content_index": 0, "delta": c})
	}
	if done {
		e.send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0,
			"item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}})
	}
}

func oaiError(typ, code, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg, "param": nil}}
}
