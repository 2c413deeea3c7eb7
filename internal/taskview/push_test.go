package taskview

import (
	"strings"
	"testing"

	"github.com/edgeagent/agent/state"
)

// Pushed says the branch and the pull request of a push that went, and
// nothing of one that failed; what the forge answered is shown inert.
func TestPushed(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	ch := &state.Changes{Pushed: &state.Push{Branch: "agent/t-1", Remote: "origin", Commit: "9e8d7c6b5a4f"}, PullRequest: "https://forge.example/pr/7\x1b[2J"}
	Pushed(&b, "t-1", ch)
	if want := "t-1: pushed agent/t-1 to origin (9e8d7c6)\nt-1: pull request https://forge.example/pr/7\\x1b[2J\n"; b.String() != want {
		t.Errorf("Pushed:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	ch.PushError = "rejected"
	Pushed(&b, "t-1", ch)
	Pushed(&b, "t-1", nil)
	if b.Len() != 0 {
		t.Errorf("a failed push said %q", b.String())
	}
}
