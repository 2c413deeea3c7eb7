package runner

import (
	"io"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	in := "short\r\n" + strings.Repeat("y", 25) + "\nlast without newline"
	lr := newLineReader(strings.NewReader(in), 10)
	var got []string
	for {
		l, err := lr.next()
		if err == io.EOF {
			break
		}
		got = append(got, l)
	}
	want := []string{"short", "yyyyyyyyyy …[line cut: 15 more bytes]", "last witho …[line cut: 10 more bytes]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

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
