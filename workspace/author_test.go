package workspace

import (
	"strings"
	"testing"
)

func TestParseAuthor(t *testing.T) {
	for s, want := range map[string]Author{
		"":                             {},
		"  ":                           {},
		"Agent Smith <agent@corp.com>": {Name: "Agent Smith", Email: "agent@corp.com"},
		`"Smith, A." <a@corp.com>`:     {Name: "Smith, A.", Email: "a@corp.com"},
	} {
		if got, err := ParseAuthor(s); err != nil || got != want {
			t.Errorf("ParseAuthor(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"agent", "<agent@corp.com>", "Agent <not an address>", "Agent <a@corp.com>\nX: y"} {
		if _, err := ParseAuthor(s); err == nil || !strings.Contains(err.Error(), "want NAME <EMAIL>") {
			t.Errorf("ParseAuthor(%q): %v; want it refused", s, err)
		}
	}
}
