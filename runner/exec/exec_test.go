package exec

import (
	"strings"
	"testing"
	"time"
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

// A usage limit says when it resets, as a time or a wait; a time that is
// not RFC 3339 leaves the reset unknown (the backoff applies) and the
// error says so, still an error.
func TestParseUsageLimit(t *testing.T) {
	now := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	ev, ok := parseEvent(`{"type":"error","code":"usage_limit","message":"limit","resets_at":"2026-11-27T22:00:05Z"}`)
	if !ok || ev.Code != "usage_limit" || ev.ResetIn(now) != 5*time.Second {
		t.Errorf("resets_at: %+v, resets in %s", ev, ev.ResetIn(now))
	}
	ev, ok = parseEvent(`{"type":"error","code":"usage_limit","retry_after_s":2.5}`)
	if !ok || ev.ResetIn(now) != 2500*time.Millisecond {
		t.Errorf("retry_after_s: %+v, resets in %s", ev, ev.ResetIn(now))
	}
	ev, ok = parseEvent(`{"type":"error","code":"usage_limit","message":"limit","resets_at":"tomorrow"}`)
	if !ok || ev.Type != "error" || ev.ResetIn(now) != 0 || !strings.Contains(ev.Message, `resets_at "tomorrow" is not an RFC 3339 time`) {
		t.Errorf("a bad resets_at: ok %v, %+v", ok, ev)
	}
	ev, _ = parseEvent(`{"type":"error","code":"usage_limit","resets_at":"2026-11-27T21:00:00Z"}`)
	if ev.ResetIn(now) != 0 {
		t.Errorf("a reset past resets in %s", ev.ResetIn(now))
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
		`{"type":"error","code":"usage_limit","resets_at":"2026-11-27T22:00:05Z","retry_after_s":1e308}`,
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
