package taskview

import (
	"fmt"
	"io"

	"github.com/edgeagent/agent/state"
)

// Pushed says what agent tasks push of task id brought about, a line each
// (the branch pushed, the pull request opened), nothing when ch says the
// push failed or did not happen.
func Pushed(w io.Writer, id string, ch *state.Changes) {
	if ch == nil || ch.PushError != "" || ch.Pushed == nil {
		return
	}
	fmt.Fprintf(w, "%s: pushed %s to %s (%s)\n", Visible(id), Visible(ch.Pushed.Branch), Visible(ch.Pushed.Remote), Visible(ShortCommit(ch.Pushed.Commit)))
	if ch.PullRequest != "" {
		fmt.Fprintf(w, "%s: pull request %s\n", Visible(id), Visible(ch.PullRequest))
	}
}

// ShortCommit is the start of a commit's id, as git shows it.
func ShortCommit(s string) string { return s[:min(len(s), 7)] }
