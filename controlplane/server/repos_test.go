package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// heartbeatWith has agent heartbeat, announcing repos.
func (e *env) heartbeatWith(agent string, repos ...string) {
	e.t.Helper()
	if _, err := e.agent(agent).Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: agent, Repos: repos}); err != nil {
		e.t.Fatal(err)
	}
}

// claimWith is a claim by agent announcing repos.
func (e *env) claimWith(agent string, repos ...string) []api.Claimed {
	e.t.Helper()
	resp, err := e.agent(agent).Claim(context.Background(), api.ClaimRequest{AgentID: agent, Max: 10, HealthGrade: health.Available, Repos: repos})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Tasks
}

// A task that names a repository goes only to an agent whose claim lists
// it: agent B, which does not serve it, never gets it, even before a task
// that names none; agent A, which does, gets it with its base.
func TestTasksGoOnlyToAnAgentThatServesTheirRepository(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.heartbeatWith("agent-a", "site", "infra")
	e.heartbeatWith("agent-b", "docs")
	repoTask, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "fix the footer", Repo: "site", Base: "release/2.1"})
	if err != nil {
		t.Fatal(err)
	}
	if repoTask.Repo != "site" || repoTask.Base != "release/2.1" {
		t.Fatalf("the task as submitted: repo %q base %q", repoTask.Repo, repoTask.Base)
	}
	plain := e.submit("anything", "any")
	got := e.claimWith("agent-b", "docs")
	if len(got) != 1 || got[0].Task.ID != plain.ID {
		t.Fatalf("agent-b's claim: %+v, want only the task that names no repository", got)
	}
	if got := e.claimWith("agent-b", "docs"); len(got) != 0 {
		t.Fatalf("agent-b claimed %s of repository %q", got[0].Task.ID, got[0].Task.Repo)
	}
	got = e.claimWith("agent-a", "site", "infra")
	if len(got) != 1 || got[0].Task.ID != repoTask.ID || got[0].Task.Repo != "site" || got[0].Task.Base != "release/2.1" {
		t.Fatalf("agent-a's claim: %+v", got)
	}
	agents, err := e.client.Agents(ctx)
	if err != nil || len(agents) != 2 || strings.Join(agents[0].Repos, ",") != "site,infra" || strings.Join(agents[1].Repos, ",") != "docs" {
		t.Fatalf("the agents: %+v %v", agents, err)
	}
}

// A task naming a repository no agent known to the control plane serves
// is refused (422) with the repositories that are served; a malformed
// repository or base, or a base without a repository, is a 400.
func TestSubmitRefusesAnUnservedOrMalformedRepository(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	submit := func(repo, base string) error {
		_, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "p", Repo: repo, Base: base})
		return err
	}
	if err := submit("site", ""); statusOf(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), `no agent serves repository "site" (served: none)`) {
		t.Fatalf("no agent yet: %v", err)
	}
	e.heartbeatWith("agent-b", "docs", "api")
	e.heartbeatWith("agent-c", "docs")
	if err := submit("site", ""); statusOf(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), `no agent serves repository "site" (served: api, docs)`) {
		t.Fatalf("unserved: %v", err)
	}
	for _, c := range []struct{ repo, base, says string }{
		{"", "main", "without repo"},
		{"../etc", "", "repository name"},
		{"-x", "", "repository name"},
		{strings.Repeat("r", api.MaxRepoNameBytes+1), "", "over 64 bytes"},
		{"docs", "--upload-pack=touch", "starts with '-'"},
		{"docs", "main\x1b[2J", "control character"},
		{"docs", strings.Repeat("b", api.MaxBaseBytes+1), "over 256 bytes"},
	} {
		err := submit(c.repo, c.base)
		if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), c.says) {
			t.Errorf("repo %q base %q: %v, want 400 saying %q", c.repo, c.base, err, c.says)
		}
	}
	if err := submit("docs", "v1.2.3"); err != nil {
		t.Fatalf("a served repository: %v", err)
	}
	// An agent announcing a malformed name is refused, in its heartbeat and
	// its claim alike.
	if _, err := e.agent("agent-d").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "agent-d", Repos: []string{"a b"}}); statusOf(err) != http.StatusBadRequest {
		t.Errorf("a heartbeat announcing %q: %v, want 400", "a b", err)
	}
	if _, err := e.agent("agent-d").Claim(ctx, api.ClaimRequest{AgentID: "agent-d", Max: 1, Repos: []string{""}}); statusOf(err) != http.StatusBadRequest {
		t.Errorf("a claim announcing an empty name: %v, want 400", err)
	}
}

// What a task changed in its repository travels in its completion and
// shows in the task's result, within the control plane's caps.
func TestChangesShowInTheTaskView(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.heartbeatWith("agent-a", "site")
	task, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "fix the footer", Repo: "site"})
	if err != nil {
		t.Fatal(err)
	}
	c := e.claimWith("agent-a", "site")[0]
	commits := make([]state.Commit, state.MaxChangesCommits+3)
	for i := range commits {
		commits[i] = state.Commit{SHA: "abc", Subject: "fix"}
	}
	commits[0].Subject = strings.Repeat("x", 1000)
	changes := &state.Changes{Repo: "site", Branch: "agent/" + task.ID, BaseCommit: "b0", Head: "h1", Commits: commits,
		Uncommitted: true, Files: 3, Insertions: 12, Deletions: 4}
	evs := runToCompletion(c)
	last := len(evs) - 1
	evs[last] = ev(task.ID+":complete", state.EventComplete, c, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "done", Changes: changes})
	if got := statuses(e.send("agent-a", evs...)); strings.Contains(got, "rejected") {
		t.Fatalf("run: %s", got)
	}
	v, err := e.client.Task(ctx, task.ID)
	if err != nil || v.Result == nil || v.Result.Changes == nil {
		t.Fatalf("the task: %v %+v", err, v.Result)
	}
	ch := v.Result.Changes
	if ch.Branch != "agent/"+task.ID || ch.Files != 3 || ch.Insertions != 12 || ch.Deletions != 4 || !ch.Uncommitted ||
		len(ch.Commits) != state.MaxChangesCommits || ch.CommitsCut != 3 || len([]rune(ch.Commits[0].Subject)) != maxSubjectRunes {
		t.Fatalf("changes: %+v", ch)
	}
}
