package taskview

import "testing"

func TestVisibleEscapesWhatATerminalWouldObey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"plain", "Fix the login test", "Fix the login test"},
		{"unicode", "résumé ✓", "résumé ✓"},
		{"escape sequence", "\x1b[2J\x1b]0;pwned\x07title", `\x1b[2J\x1b]0;pwned\atitle`},
		{"newline and tab", "a\nb\tc", `a\nb\tc`},
		{"carriage return", "ok\rFAIL", `ok\rFAIL`},
		{"C1 control", "a\u009bb", `a\u009bb`},
		{"bidi override", "abc\u202edcba", `abc\u202edcba`},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
		{"a real replacement character stays", "a\uFFFDb", "a\uFFFDb"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Visible(c.in); got != c.want {
				t.Errorf("Visible(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
