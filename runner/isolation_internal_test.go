package runner

import (
	"slices"
	"testing"
)

// The person's credentials are denied to every attempt but where its own
// CLI keeps its state: a Codex attempt reads Codex's login (it is that
// CLI), not Claude Code's; an attempt with no CLI state reads neither.
// The agent's own files stay denied whatever the CLI keeps.
func TestAnAttemptsCLIStateKeepsItsOwnLoginOnly(t *testing.T) {
	iso := &Isolation{Deny: []string{"/h/.local/state/agent"}, Credentials: []string{"/h/.codex/auth.json", "/h/.claude/.credentials.json", "/h/.ssh"},
		Allow: []string{"/h/.ssh/deploy"}}
	var spec AttemptSpec
	iso.confine(&spec, "/h/.local/state/agent/work", "/h/.local/state/agent/work/t-1")
	if !slices.Contains(spec.Confine.Read, "/h/.ssh/deploy") {
		t.Errorf("the allowed key is not readable: %v", spec.Confine.Read)
	}
	for _, c := range []struct {
		state  []string
		denied []string
		read   []string
	}{
		{nil, []string{"/h/.codex/auth.json", "/h/.claude/.credentials.json", "/h/.ssh"}, nil},
		{[]string{"/h/.codex"}, []string{"/h/.claude/.credentials.json", "/h/.ssh"}, []string{"/h/.codex/auth.json"}},
		{[]string{"/h/.claude"}, []string{"/h/.codex/auth.json", "/h/.ssh"}, []string{"/h/.claude/.credentials.json"}},
		{[]string{"/h/.local/state/agent"}, []string{"/h/.local/state/agent"}, nil},
	} {
		p := spec.Confinement(c.state...)
		for _, d := range append(c.denied, "/h/.local/state/agent", "/h/.local/state/agent/work") {
			if !slices.Contains(p.Deny, d) {
				t.Errorf("CLI state %v: %s is not denied: %v", c.state, d, p.Deny)
			}
		}
		for _, r := range c.read {
			if slices.Contains(p.Deny, r) {
				t.Errorf("CLI state %v: its own %s is denied", c.state, r)
			}
		}
	}
	if spec.Confinement("/h/.codex"); len(spec.Confine.Deny) != 2 {
		t.Errorf("Confinement changed the spec's own policy: %v", spec.Confine.Deny)
	}
	var unconfined AttemptSpec
	if p := unconfined.Confinement("/h/.codex"); p != nil {
		t.Errorf("an unconfined attempt got a policy: %+v", p)
	}
}
