package codex

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
)

// The protocol's line decoder takes what the CLI writes: nothing it
// writes may panic the agent.

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
		s := &codexSession{cfg: Config{Approval: runner.ApprovalAcceptAll}, pending: map[int64]string{1: "initialize", 2: "thread/start", 3: "turn/start"},
			streamed: map[string]int{}, partial: map[string]string{}, out: cli.NewSessionEmitter(func(runner.Event) {}, "codex", 1)}
		var m codexMsg
		if json.Unmarshal([]byte(line), &m) != nil || (m.ID == nil && m.Method == "") {
			return
		}
		_ = s.handle(context.Background(), m)
		_ = s.handle(context.Background(), m) // twice: a repeated message
	})
}
