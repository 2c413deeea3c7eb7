package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/forge"
	"github.com/edgeagent/agent/internal/forge/forgetest"
	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// A completed task's branch is pushed to its repository's remote and its
// pull request opened on the forge with the task's title, summary, link
// and diffstat, the forge having the branch by then; what became of both
// is on the changes. A missing token, a forge that refuses, a branch
// with no commit: said on the changes, the push done where it could be.
func TestDeliverPushesAndOpensThePullRequest(t *testing.T) {
	ctx := context.Background()
	repo := gittest.NewRepo(t)
	remote := filepath.Join(t.TempDir(), "remote.git")
	gittest.Git(t, t.TempDir(), "init", "-q", "--bare", remote)
	gittest.Git(t, repo, "remote", "add", "origin", remote)
	gittest.Git(t, repo, "push", "-q", "origin", "main")
	fake := forgetest.Start(t, forge.GitHub, "octo/app", "ghp_deliver0123456789")
	fake.HasBranch = func(name string) bool {
		return exec.Command("git", "--git-dir", remote, "rev-parse", "--verify", "-q", "refs/heads/"+name).Run() == nil
	}
	m, err := workspace.New(filepath.Join(t.TempDir(), "work"), []workspace.Repo{{Name: "app", Path: repo, Push: "origin"}})
	if err != nil {
		t.Fatal(err)
	}
	d := &delivery{m: m, pulls: map[string]PullRequest{"app": {Forge: forge.GitHub, API: fake.API(), Project: "octo/app", TokenEnv: "TEST_FORGE_TOKEN"}},
		link: func(id string) string { return taskLink("https://cp.example.com/", id) }}

	run := func(id string, change bool) (*state.Task, *state.Changes) {
		t.Helper()
		w, err := m.Prepare(ctx, id, "app", "main")
		if err != nil {
			t.Fatal(err)
		}
		if change {
			if err := os.WriteFile(filepath.Join(w.Dir, "footer.html"), []byte("<footer>2026</footer>\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Commit(ctx, id, "Fix the footer\n", workspace.Author{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.BringBack(ctx, id); err != nil {
			t.Fatal(err)
		}
		ch, err := m.Changes(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		task := state.NewTask(id, "Fix the footer\nso that it says the year", time.Now())
		task.Repo, task.Result = "app", &state.Result{Summary: "The footer says 2026.", Changes: ch}
		return task, ch
	}

	task, ch := run("t-no-token", true)
	d.deliver(ctx, task, ch)
	if ch.Pushed == nil || ch.Pushed.Remote != "origin" || ch.Pushed.Commit != ch.Head || !strings.Contains(ch.PushError, "TEST_FORGE_TOKEN is not set in the agent's environment") || ch.PullRequest != "" {
		t.Errorf("without a token: %+v, pushed %+v", ch, ch.Pushed)
	}
	t.Setenv("TEST_FORGE_TOKEN", "ghp_deliver0123456789")
	task, ch = run("t-1", true)
	d.deliver(ctx, task, ch)
	if ch.PushError != "" || ch.PullRequest != fake.Address() || ch.Pushed == nil {
		t.Fatalf("deliver: %+v", ch)
	}
	if got := gittest.Git(t, remote, "rev-parse", "agent/t-1"); got != ch.Head {
		t.Errorf("the remote's agent/t-1 at %s, want %s", got, ch.Head)
	}
	made := fake.Made()
	if len(made) != 1 {
		t.Fatalf("the forge got %d requests", len(made))
	}
	body, _ := made[0]["body"].(string)
	if made[0]["title"] != "Fix the footer" || made[0]["head"] != "agent/t-1" || made[0]["base"] != "main" ||
		!strings.HasPrefix(body, "The footer says 2026.\n\n[Task t-1](https://cp.example.com/tasks/t-1), branch `agent/t-1` from main.") ||
		!strings.Contains(body, "+1 −0 in 1 file:\n\n```\n footer.html | 1 +\n 1 file changed, 1 insertion(+)\n```\n") {
		t.Errorf("the request the forge got: %v", made[0])
	}
	// The forge refuses (a wrong token): said on the task, the push done.
	t.Setenv("TEST_FORGE_TOKEN", "wrong")
	task, ch = run("t-2", true)
	d.deliver(ctx, task, ch)
	if ch.Pushed == nil || !strings.Contains(ch.PushError, "pull request: the forge refused") || strings.Contains(ch.PushError, "wrong") {
		t.Errorf("a forge that refuses: %+v", ch)
	}
	task, ch = run("t-3", false)
	d.deliver(ctx, task, ch)
	if ch.Pushed != nil || !strings.Contains(ch.PushError, "nothing to push") {
		t.Errorf("a branch with no commit: %+v", ch)
	}
}
