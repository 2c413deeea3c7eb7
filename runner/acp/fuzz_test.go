package acp

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
)

// What an agent reports takes the session's own paths (its updates, its
// permission requests): nothing it writes may panic the agent.

func FuzzSessionUpdate(f *testing.F) {
	for _, seed := range []string{
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hel\nlo"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text","text":"a"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"bash","kind":"execute","status":"pending","rawInput":{"cwd":"/w"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"in_progress","rawInput":{"command":["ls","-l"]}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed","content":[{"type":"diff","path":"/w/f","oldText":null,"newText":"x"}]}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"u","kind":"edit","status":"failed","locations":[{"path":"/w/g"}]}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[{"content":"do","priority":"high","status":"pending"}]}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":20,"size":1000,"cost":{"amount":0.1,"currency":"USD"}}}`,
		`{"sessionId":"other","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"not ours"}}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"something_new"}}`,
		`{}`, `null`, `[]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s := fuzzSession()
		var n sdk.SessionNotification
		if json.Unmarshal([]byte(line), &n) != nil {
			return
		}
		_ = s.SessionUpdate(context.Background(), n)
		var p sdk.RequestPermissionRequest
		if json.Unmarshal([]byte(line), &p) == nil {
			_, _ = s.RequestPermission(context.Background(), p)
		}
		var r runner.Exit
		s.conclude(&turnResult{resp: &sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}}, &r)
	})
}

func fuzzSession() *session {
	x := &Executor{cfg: Config{Kind: "acp", Approval: runner.ApprovalAcceptAll}}
	s := newSession(x, runner.AttemptSpec{}, "/w", nil, cli.NewSessionEmitter(func(runner.Event) {}, "acp", 1))
	s.id = "s"
	s.askCtx = context.Background()
	return s
}
