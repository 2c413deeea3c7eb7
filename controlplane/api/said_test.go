package api

import (
	"strings"
	"testing"
)

// What an agent or a task chose reaches a notification on one line,
// bounded, every control or formatting character escaped; quoted, its
// own quotes cannot end the quote, even cut in the middle of an escape.
func TestSaidIsInertAndBounded(t *testing.T) {
	for _, c := range []struct {
		in, inert, quoted string
		n                 int
	}{
		{"plain words", "plain words", `"plain words"`, 50},
		{"two\n\tlines  apart", "two lines apart", `"two lines apart"`, 50},
		{"red\x1b[31m bell\a nul\x00 del\x7f", `red\x1b[31m bell\a nul\x00 del\x7f`, `"red\x1b[31m bell\a nul\x00 del\x7f"`, 50},
		{"rtl\u202eevil zw\u200bsp", `rtl\u202eevil zw\u200bsp`, `"rtl\u202eevil zw\u200bsp"`, 50},
		{`a "quote" and \ back`, `a "quote" and \ back`, `"a \"quote\" and \\ back"`, 50},
		{"0123456789", "01234…", `"01234…"`, 6},
		{"abc\x1bdef", `abc\x…`, `"abc\x…"`, 6}, // an escape cut in the middle
		{`ab"cdef`, `ab"…`, `"ab…"`, 4},         // \" cut after its backslash: the lone backslash dropped
		{"bad \xff byte", "bad \ufffd byte", `"bad \xff byte"`, 50},
		{"", "", `""`, 10},
	} {
		if got := Inert(c.in, c.n); got != c.inert {
			t.Errorf("Inert(%q, %d) = %q, want %q", c.in, c.n, got, c.inert)
		}
		got := Quoted(c.in, c.n)
		if got != c.quoted {
			t.Errorf("Quoted(%q, %d) = %q, want %q", c.in, c.n, got, c.quoted)
		}
		if inner := got[1 : len(got)-1]; strings.HasSuffix(strings.TrimRight(inner, "…"), `\`) && !strings.HasSuffix(inner, `\\`) {
			t.Errorf("Quoted(%q, %d) = %q ends in a lone backslash", c.in, c.n, got)
		}
	}
	if s := Said("agent a1", " \n "); s != nil {
		t.Errorf("Said of nothing: %+v", s)
	}
	if s := Said("agent a1", strings.Repeat("x", 500)); s == nil || len([]rune(s.Text)) != MaxSaidRunes {
		t.Errorf("Said of 500 runes: %+v", s)
	}
	for id, want := range map[string]string{"ws-1": "ws-1", "host.lan:7@x_y": "host.lan:7@x_y", "ws 1": `"ws 1"`, "a\x1b": `"a\x1b"`, "": `""`,
		strings.Repeat("a", 65): `"` + strings.Repeat("a", 63) + `…"`} {
		if got := Name(id); got != want {
			t.Errorf("Name(%q) = %q, want %q", id, got, want)
		}
	}
}
