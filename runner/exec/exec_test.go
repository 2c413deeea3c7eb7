package exec

import (
	"testing"
)

func TestParseEvent(t *testing.T) {
	for line, ok := range map[string]bool{
		`{"type":"progress","message":"x","percent":5}`:             true,
		`{"type":"error","code":"rate_limit","retry_after_ms":300}`: true,
		`{"type":"bogus"}`: false,
		`{"no":"type"}`:    false,
		`{not json`:        false,
	} {
		if _, got := parseEvent(line); got != ok {
			t.Errorf("%s: %v", line, got)
		}
	}
	ev, _ := parseEvent(`{"type":"error","code":"rate_limit","message":"429","retry_after_ms":300}`)
	if ev.Code != "rate_limit" || ev.RetryAfterMS != 300 {
		t.Errorf("%+v", ev)
	}
}

// Nothing an exec child writes may panic the agent.

func FuzzExecEvent(f *testing.F) {
	for _, seed := range []string{
		`{"type":"phase","phase":"turn_started"}`,
		`{"type":"progress","message":"m","percent":50}`,
		`{"type":"error","code":"rate_limit","message":"429","retry_after_ms":300}`,
		`{"type":"result","summary":"s","data":{"a":1}}`,
		`{"type":"tool","name":"grep","stage":"call"}`,
		`{"type":"phase","phase":"completed"}`,
		`{"type":"progress","percent":"many"}`,
		`{}`, `{"type":"nope"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if ev, ok := parseEvent(line); ok && ev.Type == "" {
			t.Fatalf("an event without a type: %q", line)
		}
	})
}
