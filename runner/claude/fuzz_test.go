package claude

import (
	"testing"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
)

// The protocol's line decoder takes what the CLI writes: nothing it
// writes may panic the agent.

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
		s := &claudeSession{tools: map[string]claudeTool{}, out: cli.NewSessionEmitter(func(runner.Event) {}, "claude", 1)}
		_ = s.line(line)
		_ = s.line(line)
		s.out.Close()
	})
}
