package server

import (
	"fmt"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// What a completion's notification says of the task's result: its
// summary, quoted as the task's words, and what it changed in its
// repository (branch, commits, diff stat). The branch and the figures
// are the agent's report; the summary and the commits' subjects are the
// task's words, never written as the control plane's.

// completed fills nt with what completed task t produced.
func completed(t *state.Task, nt *api.NotifiedTask) {
	if t.Result == nil {
		return
	}
	nt.Summary = api.Inert(t.Result.Summary, api.MaxNotifiedSummaryRunes)
	c := t.Result.Changes
	if c == nil {
		return
	}
	nt.PullRequest = c.PullRequest
	nc := &api.NotifiedChanges{Branch: api.Inert(c.Branch, maxRefRunes), Base: api.Inert(c.Base, maxRefRunes), Commits: []state.Commit{},
		CommitsMore: max(c.CommitsCut, 0), Files: c.Files, Insertions: c.Insertions, Deletions: c.Deletions, Uncommitted: c.Uncommitted}
	for i, cm := range c.Commits {
		if i == api.MaxNotifiedCommits {
			nc.CommitsMore += len(c.Commits) - i
			break
		}
		nc.Commits = append(nc.Commits, state.Commit{SHA: api.Inert(cm.SHA, 64), Subject: api.Inert(cm.Subject, maxSubjectRunes)})
	}
	nt.Changes = nc
}

// completedText is what a completion's line says after the task's name
// and the attempts: what it changed, its pull request, and its summary,
// quoted as its words (with them, as Said).
func completedText(t *state.Task, nt *api.NotifiedTask) (string, *api.NotifySaid) {
	s := ""
	if c := nt.Changes; c != nil {
		branch := c.Branch
		if branch != "agent/"+t.ID {
			branch = api.Quoted(c.Branch, maxRefRunes) // not the name the agent gives it: the agent's words
		}
		n := len(c.Commits) + c.CommitsMore
		s += fmt.Sprintf("; branch %s: %d commit%s, +%d -%d in %d file%s", branch, n, plural(n), c.Insertions, c.Deletions, c.Files, plural(c.Files))
		if c.Uncommitted {
			s += ", uncommitted"
		}
	}
	if nt.PullRequest != "" {
		s += "; pull request: " + nt.PullRequest
	}
	by := "task " + t.ID
	said := api.Said(by, nt.Summary)
	if said != nil {
		s += "; " + by + " says: " + api.Quoted(nt.Summary, api.MaxSaidRunes)
	}
	return s, said
}
