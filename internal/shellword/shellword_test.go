package shellword

import (
	"os/exec"
	"testing"
)

// TestAShellReadsTheQuotedWordBack: sh, given each quoted word, prints
// it back exactly.
func TestAShellReadsTheQuotedWordBack(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"bin/agent", "bin/agent"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"", "''"},
		{"my data", "'my data'"},
		{"it's", `'it'\''s'`},
		{"$HOME;rm", "'$HOME;rm'"},
		{"a*b", "'a*b'"},
	} {
		got := Quote(c.in)
		if got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
		out, err := exec.Command("sh", "-c", "printf %s "+got).Output()
		if err != nil || string(out) != c.in {
			t.Errorf("sh read %s as %q (%v), want %q", got, out, err, c.in)
		}
	}
}
