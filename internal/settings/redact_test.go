package settings

import "testing"

// A password in a URL, or in any of a list of them, never reaches what is
// printed; a URL that does not parse is not printed at all.
func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://cp.example.com":                           "https://cp.example.com",
		"https://user:hunter2@cp.example.com/x":            "https://user:REDACTED@cp.example.com/x",
		"https://a.example.com,https://u:pw@b.example.com": "https://a.example.com,https://u:REDACTED@b.example.com",
		"https://token@cp.example.com":                     "https://token@cp.example.com",
		"postgres://u:pw@db/agent\x7f":                     "(a URL that does not parse)",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
