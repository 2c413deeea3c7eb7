package mockmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
)

// gemRequest is what the mock reads of a Gemini API request
// (generateContent, streamGenerateContent).
type gemRequest struct {
	Contents []struct {
		Role  string    `json:"role"`
		Parts []gemPart `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []gemPart `json:"parts"`
	} `json:"systemInstruction"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

// gemPart is a part of a Gemini message: text (a thought, when Thought),
// a function call, or a function's response.
type gemPart struct {
	Text             string          `json:"text,omitempty"`
	Thought          bool            `json:"thought,omitempty"`
	FunctionCall     json.RawMessage `json:"functionCall,omitempty"`
	FunctionResponse json.RawMessage `json:"functionResponse,omitempty"`
}

// conversation returns the conversation's texts, oldest first (the
// model's role is "model"), and whether a function's response came after
// the last user text: the model turn after a tool ran.
func (q *gemRequest) conversation() (msgs []Message, toolResult bool) {
	for _, c := range q.Contents {
		role := RoleUser
		if c.Role == "model" {
			role = RoleAssistant
		}
		for _, p := range c.Parts {
			switch {
			case len(p.FunctionResponse) > 0:
				toolResult = true
				msgs = append(msgs, Message{Role: RoleTool})
			case p.Text != "" && !p.Thought:
				msgs = append(msgs, Message{Role: role, Text: p.Text})
				if role == RoleUser {
					toolResult = false
				}
			}
		}
	}
	return msgs, toolResult
}

func (q *gemRequest) tools() []string {
	var names []string
	for _, t := range q.Tools {
		for _, f := range t.FunctionDeclarations {
			names = append(names, f.Name)
		}
	}
	return names
}

// cwd is the workspace directory Gemini CLI states in its first message:
// "- **Workspace Directories:**" and under it "  - /path".
func (q *gemRequest) cwd() string {
	for _, c := range q.Contents {
		for _, p := range c.Parts {
			lines := strings.Split(p.Text, "\n")
			for i, l := range lines {
				if strings.Contains(l, "Workspace Directories:") && i+1 < len(lines) {
					if dir := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i+1]), "-")); filepath.IsAbs(dir) {
						return dir
					}
				}
			}
		}
	}
	return ""
}

// gemini answers POST /v1beta/models/MODEL:generateContent and
// :streamGenerateContent (?alt=sse) as the Gemini API does.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	stream := method == "streamGenerateContent"
	if !stream && method != "generateContent" {
		gemFail(w, http.StatusNotFound, "NOT_FOUND", "mock: no method "+method)
		return
	}
	var q gemRequest
	if err := decode(r, &q); err != nil {
		gemFail(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	msgs, toolResult := q.conversation()
	d := parseDirectives(msgs)
	sc, err := d.scenario(model, toolResult)
	n := s.record(Request{API: APIGemini, Model: model, Scenario: sc, ToolResult: toolResult, Stream: stream, Conversation: msgs, Key: requestKey(r)})
	if err != nil {
		gemFail(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	switch sc {
	case ScenarioRateLimit:
		w.Header().Set("Retry-After", "1")
		gemFailDetails(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).",
			map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"})
		return
	case ScenarioQuota:
		gemFailDetails(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
			"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
			map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
				"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
				"quotaId":     "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "quotaDimensions": map[string]any{"model": model, "location": "global"}, "quotaValue": "50"}}})
		return
	case ScenarioUnauthorized:
		gemFail(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	case ScenarioForbidden:
		gemFail(w, http.StatusForbidden, "PERMISSION_DENIED", "Permission denied: Consumer 'api_key:dummy' has been suspended.")
		return
	case ScenarioServerError:
		gemFail(w, http.StatusInternalServerError, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting")
		return
	case ScenarioOverloaded:
		gemFail(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The model is overloaded. Please try again later.")
		return
	case ScenarioContext:
		gemFail(w, http.StatusBadRequest, "INVALID_ARGUMENT", "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).")
		return
	case ScenarioHangHeaders:
		s.wait(r)
		return
	}

	var call map[string]any
	switch sc {
	case ScenarioShell, ScenarioEscalate:
		if err := hasTool(q.tools(), "run_shell_command"); err != nil {
			gemFail(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
			return
		}
		call = map[string]any{"name": "run_shell_command", "args": map[string]any{"command": d.commandOr(), "description": "Run the mock model's command"}}
	case ScenarioWrite, ScenarioEdit:
		tool := "write_file"
		if sc == ScenarioEdit {
			tool = "replace"
		}
		if err := hasTool(q.tools(), tool); err != nil {
			gemFail(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
			return
		}
		path := d.file
		if path == "" {
			path = WriteFile
		}
		if dir := q.cwd(); !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		args := map[string]any{"file_path": path, "content": WrittenContent}
		if sc == ScenarioEdit {
			args = map[string]any{"file_path": path, "old_string": strings.TrimSuffix(WrittenContent, "\n"),
				"new_string": strings.TrimSuffix(EditedContent, "\n"), "instruction": "Replace the mock model's line."}
		}
		call = map[string]any{"name": tool, "args": args}
	}
	text := HelloText
	if sc == ScenarioFinal {
		text = FinalText
	}
	usage := map[string]any{"promptTokenCount": 20, "candidatesTokenCount": 7, "totalTokenCount": 27}
	chunk := func(parts []map[string]any, finish bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		c := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": fmt.Sprintf("resp_mock_%d", n)}
		if finish {
			cand["finishReason"] = "STOP"
			c["usageMetadata"] = usage
		} else {
			// A chunk before the last may carry the usage so far (the
			// prompt's), so a cut stream has some: Gemini CLI records
			// it with the part it takes for an answer.
			c["usageMetadata"] = map[string]any{"promptTokenCount": 20, "totalTokenCount": 20}
		}
		return c
	}
	if !stream {
		if sc == ScenarioHang {
			s.wait(r)
			return
		}
		parts := []map[string]any{{"text": text}}
		if call != nil {
			parts = []map[string]any{{"functionCall": call}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(chunk(parts, true))
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
	switch sc {
	case ScenarioHang:
		e.data(chunk([]map[string]any{{"text": ""}}, false))
		s.wait(r)
		return
	case ScenarioCut:
		e.data(chunk([]map[string]any{{"text": "Partial "}}, false))
		s.cut(e)
		return
	}
	if call != nil {
		e.data(chunk([]map[string]any{{"functionCall": call}}, true))
		return
	}
	parts := chunks(text, 9)
	for i, c := range parts {
		e.data(chunk([]map[string]any{{"text": c}}, i == len(parts)-1))
	}
}

// gemFail answers an error as the Gemini API does.
func gemFail(w http.ResponseWriter, status int, code, msg string) {
	gemFailDetails(w, status, code, msg)
}

func gemFailDetails(w http.ResponseWriter, status int, code, msg string, details ...any) {
	body := map[string]any{"code": status, "message": msg, "status": code}
	if len(details) > 0 {
		body["details"] = details
	}
	jsonError(w, status, w.Header().Get("Retry-After"), map[string]any{"error": body})
}
