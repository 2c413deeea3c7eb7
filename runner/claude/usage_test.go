package claude

import (
	"testing"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// Claude Code writes a message's usage on each line of the message (one
// per content block): it counts once. The result's usage is the run's
// own account, and wins when it says more.
func TestClaudeUsageCountsEachMessageOnce(t *testing.T) {
	var got []state.Usage
	s := &claudeSession{tools: map[string]claudeTool{}, out: cli.NewSessionEmitter(func(ev runner.Event) {
		if ev.Type == runner.EventUsage {
			got = append(got, ev.Usage())
		}
	}, "claude", 1)}
	for _, l := range []string{
		`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":20,"cache_read_input_tokens":100,"output_tokens":3},"content":[{"type":"text","text":"Let me look."}]}}`,
		`{"type":"assistant","message":{"id":"m1","usage":{"input_tokens":20,"cache_read_input_tokens":100,"output_tokens":3},"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":false}]}}`,
		`{"type":"assistant","message":{"id":"m2","usage":{"input_tokens":30,"output_tokens":5},"content":[{"type":"text","text":"Done."}]}}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"Done.","usage":{"input_tokens":50,"cache_read_input_tokens":100,"output_tokens":12}}`,
	} {
		if err := s.line(l); err != nil {
			t.Fatal(err)
		}
	}
	s.out.Close()
	want := []state.Usage{{InputTokens: 120, OutputTokens: 3, TotalTokens: 123}, {InputTokens: 150, OutputTokens: 8, TotalTokens: 158},
		{InputTokens: 150, OutputTokens: 12, TotalTokens: 162}}
	if len(got) != len(want) {
		t.Fatalf("usage events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("usage event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
