package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/shellword"
	"github.com/edgeagent/agent/state"
)

// inProcessCP starts a control plane in this process and writes a
// person's token to a file for the commands; it returns the control plane
// and the flags that reach it.
func inProcessCP(t *testing.T) (*servertest.ControlPlane, []string) {
	t.Helper()
	const tok = "op-continue-0123456789abcdef0123456789"
	cp := servertest.Start(t, servertest.Options{Server: server.Options{OperatorTokens: []string{tok}}})
	file := filepath.Join(t.TempDir(), "operator-token")
	must(t, os.WriteFile(file, []byte(tok+"\n"), 0o600))
	return cp, []string{"--control-plane", cp.URL, "--token-file", file}
}

// endWithSession has agent claim the next task (announcing repos) and end
// its attempt 1 failed after an agent restart, its session kept, having
// changed what changes says.
func endWithSession(t *testing.T, agent *controlplane.Client, agentID string, repos []string, changes *state.Changes) string {
	t.Helper()
	c := servertest.Claim(t, agent, agentID, repos...)
	a := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: time.Now(), SessionID: "sess-7f3a",
		SessionPath: "/home/agent/.codex/sessions/rollout-7f3a.jsonl"}
	failed := a
	failed.Status, failed.CompletedAt = state.AttemptFailed, time.Now()
	failed.Error = &state.Error{Code: state.CodeAgentRestart, Message: "the agent restarted"}
	failed.Retry = &state.RetryDecision{Gate: state.GateSideEffect, Decision: state.DecisionStopped}
	servertest.Send(t, agent, agentID, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}, a, state.PhaseEvent{Phase: state.PhaseTurnStarted},
		failed, state.PhaseEvent{Phase: state.PhaseFailed},
		state.CompleteEvent{Status: state.PhaseFailed, Attempts: []state.Attempt{failed}, Changes: changes})
	return c.Task.ID
}

// tasks continue queues a task that ended with a session for the agent
// that keeps it, and says so; tasks show (local and --remote) says how to
// continue it and what it changed; a task that cannot be continued is one
// line and exit 1.
func TestTasksContinue(t *testing.T) {
	t.Parallel()
	cp, cpArgs := inProcessCP(t)
	agent := cp.Agent(t, "vm-7")
	if _, err := agent.Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "vm-7", Repos: []string{"site"}}); err != nil {
		t.Fatal(err)
	}
	r := runAgent(t, append([]string{"submit", "--prompt", "Fix the footer", "--repo", "site", "--base", "release/2.1"}, cpArgs...)...)
	if r.code != 0 {
		t.Fatalf("submit: %+v", r)
	}
	changes := &state.Changes{Repo: "site", Branch: "agent/t-x", Base: "release/2.1", BaseCommit: "3f9c2e1d0a", Head: "9e8d",
		Commits: []state.Commit{{SHA: "9e8d", Subject: "fix the footer"}, {SHA: "1a2b", Subject: "add a test"}}, Uncommitted: true,
		Files: 3, Insertions: 12, Deletions: 4}
	id := endWithSession(t, agent, "vm-7", []string{"site"}, changes)
	if id != strings.TrimSpace(r.stdout) {
		t.Fatalf("claimed %s, submitted %s", id, r.stdout)
	}

	// Shown locally, as the agent keeps the task, and at the control plane.
	dataDir := t.TempDir()
	store, err := state.OpenStore(filepath.Join(dataDir, "tasks"))
	must(t, err)
	v, err := cp.Operator.Task(context.Background(), id)
	must(t, err)
	must(t, store.Save(v.Task()))
	// The hint names the binary as invoked and the control plane as the
	// command knew it: placeholders, said as such, where it did not.
	bin := shellword.Quote(os.Args[0])
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"tasks", "show", id, "--data-dir", dataDir}, " --control-plane URL --token-file FILE\n          (with URL the control plane's address; FILE a file holding a person's token (the control plane's operator-token))"},
		{append([]string{"tasks", "show", id, "--remote"}, cpArgs...), " " + strings.Join(cpArgs, " ")},
	} {
		args := c.args
		r := runAgent(t, args...)
		for _, want := range []string{
			"repo:     site at release/2.1",
			"continue: resume attempt 1's session with: " + bin + " tasks continue " + id + c.hint,
			"changes:  branch agent/t-x from release/2.1 (3f9c2e1)",
			"          2 commits: fix the footer; add a test",
			"          +12 -4 in 3 files, uncommitted changes",
		} {
			if r.code != 0 || !strings.Contains(r.stdout, want+"\n") {
				t.Errorf("%v lacks %q:\n%s%s", args[:3], want, r.stdout, r.stderr)
			}
		}
	}

	r = runAgent(t, append([]string{"tasks", "continue", id}, cpArgs...)...)
	if want := id + ": queued again for attempt 2, continuing attempt 1's session on agent vm-7\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("tasks continue: %+v, want %q", r, want)
	}
	if v, _ := cp.Operator.Task(context.Background(), id); v.PersonRetry == nil || !v.PersonRetry.Continue || v.PersonRetry.Agent != "vm-7" {
		t.Fatalf("at the control plane: %+v", v.PersonRetry)
	}

	t.Run("a task queued again is refused", func(t *testing.T) {
		r := runAgent(t, append([]string{"tasks", "continue", id}, cpArgs...)...)
		wantOneLineError(t, r, 1, "409 Conflict: task "+id+" is queued: it has not ended")
	})
	t.Run("an unknown task is refused", func(t *testing.T) {
		r := runAgent(t, append([]string{"tasks", "continue", "t-nosuchtask"}, cpArgs...)...)
		wantOneLineError(t, r, 1, "404")
	})
	t.Run("the help tells continue from retry", func(t *testing.T) {
		r := runAgent(t, "tasks", "continue", "--help")
		for _, want := range []string{"resumes the session", "agent that keeps", "replays the prompt from the start", "reset to its base", "queued limit"} {
			if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), want) {
				t.Errorf("help lacks %q:\n%s", want, r.stdout)
			}
		}
	})
}

// submit --repo --base names the task's repository and base; a repository
// no agent serves is refused by the control plane, with those served, and
// a malformed name or ref, or a base without a repository, is a usage
// error before the control plane is asked.
func TestSubmitRepoAndBase(t *testing.T) {
	t.Parallel()
	cp, cpArgs := inProcessCP(t)
	agent := cp.Agent(t, "vm-8")
	if _, err := agent.Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "vm-8", Repos: []string{"site", "infra"}}); err != nil {
		t.Fatal(err)
	}
	r := runAgent(t, append([]string{"submit", "--prompt", "p", "--repo", "infra", "--base", "v1.2.3", "--no-commit", "--json"}, cpArgs...)...)
	var v api.TaskView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Repo != "infra" || v.Base != "v1.2.3" || !v.NoCommit {
		t.Fatalf("submit --json: %v %+v", err, r)
	}
	// The agent's own repositories (the repo setting, from the
	// environment or the config file) are not submit's --repo.
	cfg := filepath.Join(t.TempDir(), "agent.toml")
	must(t, os.WriteFile(cfg, []byte("[[repo]]\nname = \"docs\"\npath = \"/srv/docs\"\n"), 0o600))
	r = runAgentEnv(t, []string{"AGENT_REPO=docs=/srv/docs", "AGENT_CONFIG=" + cfg}, append([]string{"submit", "--prompt", "p", "--repo", "site", "--json"}, cpArgs...)...)
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Repo != "site" {
		t.Fatalf("submit --repo site beside the repo setting: %v %+v", err, r)
	}
	r = runAgent(t, append([]string{"submit", "--prompt", "p", "--repo", "docs"}, cpArgs...)...)
	wantOneLineError(t, r, 1, `422 Unprocessable Entity: no agent serves repository "docs" (served: infra, site)`)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--base", "main"}, "--base needs --repo"},
		{[]string{"--no-commit"}, "--no-commit needs --repo"},
		{[]string{"--repo", "../etc"}, "--repo: repository name"},
		{[]string{"--repo", "site", "--base", "--upload-pack=x"}, "--base: base \"--upload-pack=x\" starts with '-'"},
	} {
		r := runAgent(t, append(append([]string{"submit", "--prompt", "p"}, c.args...), cpArgs...)...)
		wantOneLineError(t, r, 2, c.says)
	}
}
