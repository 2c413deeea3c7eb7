package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// A completed task's push, tried again by a person on its agent (agent
// tasks push), reaches the control plane as the one late event it takes
// besides the completion: from the agent holding the task's lease, under
// it, changing the changes' push fields alone, across a restart too.
// Another agent's, another lease's, one for a task that changed no
// repository or that has not completed, one whose pull request is no
// http(s) address, are refused; one sent again is a duplicate.
func TestALatePushEventChangesThePushFieldsAlone(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnv(t, dir, clk)
	e.submit("fix it", "")
	c := e.claim("ag-1", "available", 1)[0]
	id := c.Task.ID
	changes := &state.Changes{Repo: "app", Branch: "agent/" + id, Base: "main", BaseCommit: "b0", Head: "h1",
		Commits: []state.Commit{{SHA: "h1", Subject: "fix it"}}, Files: 1, Insertions: 2,
		PushError: "push: remote origin: git push: could not read Username"}
	evs := runToCompletion(c)
	done := evs[len(evs)-1]
	var ce state.CompleteEvent
	if err := json.Unmarshal(done.Payload, &ce); err != nil {
		t.Fatal(err)
	}
	ce.Changes = changes
	evs[len(evs)-1] = ev(done.Key, state.EventComplete, c, ce)
	if got := statuses(e.send("ag-1", evs...)); strings.Contains(got, "rejected") {
		t.Fatalf("the task's run: %s", got)
	}

	pushed := state.PushEvent{Pushed: &state.Push{Remote: "origin", Branch: "agent/" + id, Commit: "h1", At: t0},
		PullRequest: "https://github.com/octo/app/pull/7"}
	bad := pushed
	bad.PullRequest = "javascript:alert(1)"
	otherLease := c
	otherLease.Lease.ID = "lease-of-another"
	res := e.send("ag-2", ev(id+":push:ag-2", state.EventPush, c, pushed))
	res = append(res, e.send("ag-1",
		ev(id+":push:lease", state.EventPush, otherLease, pushed),
		ev(id+":push:bad", state.EventPush, c, bad),
		ev(id+":push:1", state.EventPush, c, pushed),
		ev(id+":push:1", state.EventPush, c, pushed))...)
	if got := statuses(res); got != "rejected rejected rejected accepted duplicate" {
		t.Fatalf("push events: %s (%v)", got, res)
	}
	if res[0].Reason != api.ReasonLease || res[1].Reason != api.ReasonLease || !strings.Contains(string(res[2].Reason), "http(s) URL") {
		t.Errorf("reasons: %q, %q, %q", res[0].Reason, res[1].Reason, res[2].Reason)
	}
	check := func(e *env) {
		t.Helper()
		v, err := e.client.Task(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		ch := v.Result.Changes
		if v.Phase != state.PhaseCompleted || ch == nil || ch.PullRequest != pushed.PullRequest || ch.PushError != "" || ch.Pushed == nil ||
			*ch.Pushed != *pushed.Pushed || ch.Head != "h1" || len(ch.Commits) != 1 || ch.Insertions != 2 || v.Result.Summary != "done" {
			t.Errorf("the task after its push: %s, %+v", v.Phase, ch)
		}
	}
	check(e)
	e = e.restart(clk)
	check(e)

	// A task that has not completed, and one that changed no repository.
	e.submit("another", "")
	c2 := e.claim("ag-1", "available", 1)[0]
	res = e.send("ag-1", ev(c2.Task.ID+":push", state.EventPush, c2, pushed))
	all := runToCompletion(c2)
	res = append(res, e.send("ag-1", all...)...)
	res = append(res, e.send("ag-1", ev(c2.Task.ID+":push:late", state.EventPush, c2, pushed))...)
	if first, last := res[0], res[len(res)-1]; first.Status != api.StatusRejected || !strings.Contains(string(first.Reason), "completed task only") ||
		last.Status != api.StatusRejected || !strings.Contains(string(last.Reason), "no branch to push") {
		t.Errorf("a push of a running task: %s %s; of one with no changes: %s %s", first.Status, first.Reason, last.Status, last.Reason)
	}
}

// The notification of a task that completed on a repository says what
// it changed (its branch, the commits on it, their diff stat) and names
// its pull request; its summary and its commits' subjects are the task's
// words, quoted and said to be its, made inert, the commits bounded.
func TestTheCompletionNotificationNamesThePullRequest(t *testing.T) {
	t.Parallel()
	e := newNotifyEnv(t, t.TempDir(), &clock{now: t0})
	if _, err := e.client.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "fix the footer", Title: "fix the footer"}); err != nil {
		t.Fatal(err)
	}
	c := e.claim("ws-1", "available", 1)[0]
	evs := runToCompletion(c)
	done := evs[len(evs)-1]
	var ce state.CompleteEvent
	if err := json.Unmarshal(done.Payload, &ce); err != nil {
		t.Fatal(err)
	}
	var commits []state.Commit
	for i := range 12 {
		commits = append(commits, state.Commit{SHA: fmt.Sprintf("c%d", i), Subject: fmt.Sprintf("step %d", i)})
	}
	commits[0].Subject = "fix the footer\x1b[2J\u202e"
	ce.Summary = "Fixed the footer's \"year\"\nand its test"
	ce.Changes = &state.Changes{Repo: "app", Branch: "agent/" + c.Task.ID, Base: "main", BaseCommit: "b0", Head: "h1", Commits: commits,
		Files: 3, Insertions: 12, Deletions: 4,
		Pushed: &state.Push{Remote: "origin", Branch: "agent/" + c.Task.ID, Commit: "h1", At: t0}, PullRequest: "https://github.com/octo/app/pull/7"}
	evs[len(evs)-1] = ev(done.Key, state.EventComplete, c, ce)
	e.send("ws-1", evs...)
	n := e.oneNote(api.NotifyCompleted, "all", "done")
	want := `Task "fix the footer" completed after 1 attempt (agent ws-1); branch agent/` + c.Task.ID + `: 12 commits, +12 -4 in 3 files` +
		`; pull request: https://github.com/octo/app/pull/7; task ` + c.Task.ID + ` says: "Fixed the footer's \"year\" and its test"`
	if n.Text != want || n.Task.PullRequest != ce.Changes.PullRequest {
		t.Errorf("text %q, want %q (task %+v)", n.Text, want, n.Task)
	}
	if n.Said == nil || *n.Said != (api.NotifySaid{By: "task " + c.Task.ID, Text: `Fixed the footer's "year" and its test`}) || n.Task.Summary != n.Said.Text {
		t.Errorf("said %+v, summary %q", n.Said, n.Task.Summary)
	}
	ch := n.Task.Changes
	if ch == nil || ch.Branch != "agent/"+c.Task.ID || ch.Base != "main" || len(ch.Commits) != api.MaxNotifiedCommits || ch.CommitsMore != 2 ||
		ch.Files != 3 || ch.Insertions != 12 || ch.Deletions != 4 || ch.Uncommitted {
		t.Fatalf("changes %+v", ch)
	}
	if ch.Commits[0].SHA != "c0" || ch.Commits[0].Subject != `fix the footer\x1b[2J\u202e` || ch.Commits[9].Subject != "step 9" {
		t.Errorf("commits %+v", ch.Commits)
	}
}
