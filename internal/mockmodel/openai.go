package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// oaiRequest is what the mock reads of a Responses API request.
type oaiRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"` // a string, or a list of items
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// conversation returns the conversation's texts, oldest first, and
// whether a tool result came after the last user message: this request is
// the model turn after a tool ran.
func (q *oaiRequest) conversation() (msgs []Message, toolResult bool) {
	var prompt string
	if json.Unmarshal(q.Input, &prompt) == nil {
		return []Message{{Role: RoleUser, Text: prompt}}, false
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(q.Input, &items)
	for _, it := range items {
		switch {
		case (it.Type == "message" || it.Type == "") && (it.Role == "user" || it.Role == "assistant"):
			for _, p := range contentParts(it.Content) {
				if p.Type == "input_text" || p.Type == "output_text" || p.Type == "text" {
					msgs = append(msgs, Message{Role: Role(it.Role), Text: p.Text})
				}
			}
			if it.Role == "user" {
				toolResult = false
			}
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			toolResult = true
			msgs = append(msgs, Message{Role: RoleTool})
		}
	}
	return msgs, toolResult
}

func (q *oaiRequest) tools() []string {
	var names []string
	for _, t := range q.Tools {
		if t.Name != "" {
			names = append(names, t.Name)
		}
	}
	return names
}

// openai answers POST /v1/responses as the OpenAI Responses API does,
// streaming (Codex always streams).
func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	var q oaiRequest
	if err := decode(r, &q); err != nil {
		jsonError(w, http.StatusBadRequest, "", oaiError("invalid_request_error", "invalid_json", err.Error()))
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
	n := s.record(Request{API: APIOpenAI, Model: q.Model, Scenario: sc, ToolResult: toolResult, Stream: q.Stream, Conversation: msgs, Key: requestKey(r)})
	if err != nil {
		jsonError(w, http.StatusBadRequest, "", oaiError("invalid_request_error", "mock_scenario", err.Error()))
		return
	}
	switch sc {
	case ScenarioRateLimit:
		jsonError(w, http.StatusTooManyRequests, "1", oaiError("requests", "rate_limit_exceeded",
			"Rate limit reached for gpt-5.5 in organization org-mock on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 1s."))
		return
	case ScenarioUsageLimit:
		// As ChatGPT's backend answers Codex: 429 usage_limit_reached
		// with when it resets, and the rate-limit headers.
		in := int64(max(time.Until(resets).Round(time.Second), time.Second) / time.Second)
		h := w.Header()
		h.Set("X-Codex-Primary-Used-Percent", "100.0")
		h.Set("X-Codex-Primary-Window-Minutes", "300")
		h.Set("X-Codex-Primary-Reset-At", strconv.FormatInt(resets.Unix(), 10))
		h.Set("X-Codex-Primary-Reset-After-Seconds", strconv.FormatInt(in, 10))
		jsonError(w, http.StatusTooManyRequests, "", map[string]any{"error": map[string]any{
			"type": "usage_limit_reached", "message": "The usage limit has been reached", "plan_type": "plus",
			"resets_at": resets.Unix(), "resets_in_seconds": in}})
		return
	case ScenarioQuota:
		jsonError(w, http.StatusTooManyRequests, "", oaiError("insufficient_quota", "insufficient_quota",
			"You exceeded your current quota, please check your plan and billing details."))
		return
	case ScenarioUnauthorized:
		jsonError(w, http.StatusUnauthorized, "", oaiError("invalid_request_error", "invalid_api_key", "Incorrect API key provided: dummy."))
		return
	case ScenarioForbidden:
		jsonError(w, http.StatusForbidden, "", oaiError("invalid_request_error", "unsupported_country_region_territory",
			"Country, region, or territory not supported"))
		return
	case ScenarioServerError:
		jsonError(w, http.StatusInternalServerError, "", oaiError("server_error", "server_error",
			"The server had an error while processing your request. Sorry about that!"))
		return
	case ScenarioOverloaded:
		jsonError(w, http.StatusServiceUnavailable, "", oaiError("server_error", "server_is_overloaded",
			"The server is overloaded. Please try again later."))
		return
	case ScenarioHangHeaders:
		s.wait(r)
		return
	}

	// The tool call, checked against the tools offered before anything is
	// sent, so that a renamed tool is a clear 400.
	var call func(*oaiStream)
	switch sc {
	case ScenarioShell, ScenarioEscalate:
		if err := hasTool(q.tools(), "exec_command"); err != nil {
			jsonError(w, http.StatusBadRequest, "", oaiError("invalid_request_error", "mock_tool", err.Error()))
			return
		}
		args := map[string]any{"cmd": d.commandOr()}
		if sc == ScenarioEscalate {
			args["sandbox_permissions"] = "require_escalated"
			args["justification"] = "The mock model needs to run this command outside the sandbox."
		}
		b, _ := json.Marshal(args)
		call = func(o *oaiStream) { o.functionCall("exec_command", string(b)) }
	case ScenarioWrite, ScenarioEdit:
		if err := hasTool(q.tools(), "apply_patch"); err != nil {
			jsonError(w, http.StatusBadRequest, "", oaiError("invalid_request_error", "mock_tool", err.Error()))
			return
		}
		file := d.file
		if file == "" {
			file = PatchFile
		}
		patch := "*** Begin Patch\n*** Add File: " + file + "\n+" + WrittenContent + "*** End Patch\n"
		if sc == ScenarioEdit {
			patch = "*** Begin Patch\n*** Update File: " + file + "\n@@\n-" + WrittenContent + "+" + EditedContent + "*** End Patch\n"
		}
		call = func(o *oaiStream) { o.customToolCall("apply_patch", patch) }
	}

	var e *sse
	if sc == ScenarioCut {
		if e, err = startCutSSE(w); err != nil {
			panic(http.ErrAbortHandler)
		}
	} else {
		e = startSSE(w)
	}
	o := &oaiStream{e: e, n: n, resp: map[string]any{
		"id": fmt.Sprintf("resp_mock_%d", n), "object": "response", "created_at": time.Now().Unix(),
		"status": "in_progress", "model": q.Model, "output": []any{}, "error": nil, "usage": nil,
	}}
	o.event("response.created", map[string]any{"response": o.snapshot()})
	o.event("response.in_progress", map[string]any{"response": o.snapshot()})
	switch sc {
	case ScenarioHang:
		s.wait(r)
		return
	case ScenarioCut:
		o.message("Partial answer that never ", false)
		s.cut(e)
		return
	case ScenarioContext:
		o.resp["status"] = "failed"
		o.resp["error"] = map[string]any{"code": "context_length_exceeded",
			"message": "Your input exceeds the context window of this model. Please adjust your input and try again."}
		o.event("response.failed", map[string]any{"response": o.snapshot()})
		return
	case ScenarioShell, ScenarioEscalate, ScenarioWrite, ScenarioEdit:
		call(o)
	case ScenarioFinal:
		o.message(FinalText, true)
	default:
		o.message(HelloText, true)
	}
	o.resp["status"] = "completed"
	o.resp["usage"] = map[string]any{
		"input_tokens": 20, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 7, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 27,
	}
	o.event("response.completed", map[string]any{"response": o.snapshot()})
}

// oaiStream writes one Responses API stream: every event numbered, every
// output item announced, streamed and done, as the real API does.
type oaiStream struct {
	e      *sse
	n      int // the request's number, for ids
	seq    int
	resp   map[string]any // the response object, as response.* events carry it
	output []any
}

func (o *oaiStream) event(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = o.seq
	o.seq++
	o.e.send(typ, fields)
}

func (o *oaiStream) snapshot() map[string]any {
	r := make(map[string]any, len(o.resp)+1)
	for k, v := range o.resp {
		r[k] = v
	}
	r["output"] = append([]any{}, o.output...)
	return r
}

// message streams an assistant message; a message that is not complete
// stops after its deltas (the cut scenario).
func (o *oaiStream) message(text string, complete bool) {
	idx, id := len(o.output), fmt.Sprintf("msg_mock_%d_%d", o.n, len(o.output))
	o.event("response.output_item.added", map[string]any{"output_index": idx,
		"item": map[string]any{"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
	o.event("response.content_part.added", map[string]any{"item_id": id, "output_index": idx, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	for _, c := range chunks(text, 9) {
		o.event("response.output_text.delta", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "delta": c, "logprobs": []any{}})
	}
	if !complete {
		return
	}
	part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
	o.event("response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "text": text, "logprobs": []any{}})
	o.event("response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": 0, "part": part})
	item := map[string]any{"id": id, "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
	o.output = append(o.output, item)
	o.event("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// functionCall streams a call of a function tool with JSON arguments.
func (o *oaiStream) functionCall(name, args string) {
	idx, id, callID := len(o.output), fmt.Sprintf("fc_mock_%d_%d", o.n, len(o.output)), fmt.Sprintf("call_mock_%d", o.n)
	o.event("response.output_item.added", map[string]any{"output_index": idx,
		"item": map[string]any{"id": id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": callID, "name": name}})
	for _, c := range chunks(args, 24) {
		o.event("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": idx, "delta": c})
	}
	o.event("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx, "arguments": args})
	item := map[string]any{"id": id, "type": "function_call", "status": "completed", "arguments": args, "call_id": callID, "name": name}
	o.output = append(o.output, item)
	o.event("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// customToolCall streams a call of a freeform (custom) tool: its input is
// plain text, not JSON.
func (o *oaiStream) customToolCall(name, input string) {
	idx, id, callID := len(o.output), fmt.Sprintf("ctc_mock_%d_%d", o.n, len(o.output)), fmt.Sprintf("call_mock_%d", o.n)
	o.event("response.output_item.added", map[string]any{"output_index": idx,
		"item": map[string]any{"id": id, "type": "custom_tool_call", "status": "in_progress", "call_id": callID, "name": name, "input": ""}})
	for _, c := range chunks(input, 24) {
		o.event("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": idx, "delta": c})
	}
	o.event("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": idx, "input": input})
	item := map[string]any{"id": id, "type": "custom_tool_call", "status": "completed", "call_id": callID, "name": name, "input": input}
	o.output = append(o.output, item)
	o.event("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// oaiError is the OpenAI error body.
func oaiError(typ, code, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
}
