package runner

import (
	"context"
	"encoding/json"
	"testing"
)

// The line decoders of the executors' protocols take what a CLI writes:
// nothing it writes may panic the agent.

func FuzzCodexMessage(f *testing.F) {
	for _, seed := range []string{
		`{"id":1,"result":{"userAgent":"x"}}`,
		`{"id":2,"result":{"thread":{"id":"T"}}}`,
		`{"id":3,"result":{"turn":{"id":"U","status":"inProgress"}}}`,
		`{"method":"turn/started","params":{"turn":{"id":"U"}}}`,
		`{"method":"item/started","params":{"item":{"type":"commandExecution","command":"ls","id":"c"}}}`,
		`{"method":"item/agentMessage/delta","params":{"itemId":"m","delta":"Hel\nlo"}}`,
		`{"method":"item/completed","params":{"item":{"type":"fileChange","status":"completed","changes":[{"path":"/a","kind":{"type":"add"}}]}}}`,
		`{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m","text":"Hello"}}}`,
		`{"method":"error","params":{"error":{"message":"Reconnecting... 1/5","codexErrorInfo":{"responseStreamDisconnected":{"httpStatusCode":429}}},"willRetry":true}}`,
		`{"method":"turn/completed","params":{"turn":{"id":"U","status":"failed","error":{"message":"try again in 1.5s","codexErrorInfo":"rateLimitExceeded"}}}}`,
		`{"method":"item/commandExecution/requestApproval","id":0,"params":{"itemId":"call_1","command":"rm -rf /","reason":"r"}}`,
		`{"id":9,"error":{"code":-1,"message":"no"}}`,
		`{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m","text":""}}}`,
		`{"id":"x","method":"weird"}`,
		`[]`, `null`, `{`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s := &codexSession{cfg: CodexConfig{Approval: ApprovalAcceptAll}, pending: map[int64]string{1: "initialize", 2: "thread/start", 3: "turn/start"},
			streamed: map[string]int{}, partial: map[string]string{}, out: newSessionEmitter(func(Event) {}, "codex", 1)}
		var m codexMsg
		if json.Unmarshal([]byte(line), &m) != nil || (m.ID == nil && m.Method == "") {
			return
		}
		_ = s.handle(context.Background(), m)
		_ = s.handle(context.Background(), m) // twice: a repeated message
	})
}

func FuzzClaudeLine(f *testing.F) {
	for _, seed := range []string{
		`{"type":"system","subtype":"init","session_id":"S"}`,
		`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":2,"retry_delay_ms":1000,"error_status":429,"error":"rate_limit"}`,
		`{"type":"stream_event","event":{"type":"content_block_start","content_block":{"type":"tool_use","name":"Bash"}}}`,
		`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}}`,
		`{"type":"assistant","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error"}]},"error":"rate_limit"}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":false}]}}`,
		`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error"}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"done","permission_denials":[{"tool_name":"Bash","tool_input":{}}]}`,
		`{"type":"user","message":{"content":"plain"}}`,
		`not json`, `{}`, `{"type":1}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s := &claudeSession{tools: map[string]claudeTool{}, out: newSessionEmitter(func(Event) {}, "claude", 1)}
		_ = s.line(line)
		_ = s.line(line)
		s.out.close()
	})
}
