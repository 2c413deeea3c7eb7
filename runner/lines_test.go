package runner

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
