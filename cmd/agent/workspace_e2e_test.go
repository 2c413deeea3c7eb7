package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// commit is a shell line that commits file with content in the task's
// worktree, as a task's CLI would.
func commit(file, content string) string {
	return "@sh echo " + content + " > " + file + " && git add " + file +
		" && git -c user.name=Task -c user.email=task@example.com commit -q -m 'add " + file + "'"
}

// Two tasks on one repository, through the whole system: each runs in a
// worktree of its own on a branch of its own, confined as the agent
// confines every task; neither sees the other's work nor touches the
// main checkout; the control plane shows what each changed; the
// workspaces stay while they hold commits; and a repository nobody serves
// is refused at submit.
func TestE2ETwoTasksOnOneRepositorySideBySide(t *testing.T) {
	t.Parallel()
	repo := gittest.NewRepo(t)
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--repo", "site="+repo, "--max-concurrent", "2")
	testkit.WaitFor(t, "the agent to announce its repository", func() bool {
		r := runAgent(t, "submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", "probe", "--repo", "nowhere")
		return r.code != 0 && strings.Contains(r.stderr, `no agent serves repository "nowhere" (served: site)`)
	})
	gate := filepath.Join(t.TempDir(), "go-on")
	ids := map[string]string{}
	for _, name := range []string{"a", "b"} {
		other := map[string]string{"a": "b", "b": "a"}[name]
		prompt := commit(name+".txt", name) + "\n@wait-file " + gate + "\n@sh test ! -e " + other + ".txt\n@output done"
		r := runAgent(t, "submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", prompt, "--repo", "site", "--base", "main")
		if r.code != 0 {
			t.Fatalf("submit: %+v", r)
		}
		ids[name] = strings.TrimSpace(r.stdout)
	}
	// Both have committed before either goes on: they ran side by side.
	testkit.WaitFor(t, "both tasks to commit", func() bool {
		for _, id := range ids {
			if v := c.task(t, id); len(v.Attempts) == 0 || !v.Attempts[0].Facts.ToolCall {
				return false
			}
		}
		return true
	})
	must(t, os.WriteFile(gate, nil, 0o600))
	for name, id := range ids {
		v := c.waitDone(t, id)
		if v.Phase != state.PhaseCompleted {
			t.Fatalf("task %s: %s (%s)", name, v.Phase, v.PhaseReason)
		}
		ch := v.Result.Changes
		if ch == nil || ch.Repo != "site" || ch.Branch != "agent/"+id || ch.Base != "main" || len(ch.Commits) != 1 ||
			ch.Commits[0].Subject != "add "+name+".txt" || ch.Files != 1 || ch.Uncommitted {
			t.Errorf("task %s changed %+v", name, ch)
		}
		if got := gittest.Git(t, repo, "show", "agent/"+id+":"+name+".txt"); got != name {
			t.Errorf("branch agent/%s holds %q", id, got)
		}
		show := runAgent(t, "tasks", "show", id, "--remote", "--control-plane", c.url(), "--token-file", c.operatorFile)
		if !strings.Contains(show.stdout, "agent/"+id) || !strings.Contains(show.stdout, "add "+name+".txt") {
			t.Errorf("tasks show does not say what task %s changed:\n%s", name, show.stdout)
		}
	}
	if got := gittest.Git(t, repo, "status", "--porcelain"); got != "" {
		t.Errorf("the main checkout changed: %s", got)
	}
	if got := gittest.Git(t, repo, "rev-list", "--count", "main"); got != "1" {
		t.Errorf("main has %s commits, want 1", got)
	}
	ls := runAgent(t, "workspaces", "ls", "--data-dir", dataDir)
	for _, id := range ids {
		if !strings.Contains(ls.stdout, id) || strings.Count(ls.stdout, "kept: 1 commit") != 2 {
			t.Errorf("workspaces ls does not keep %s:\n%s", id, ls.stdout)
		}
	}
}

// A task submitted onto a repository whose checkout holds uncommitted
// changes says so, through the whole system: tasks show, on the agent's
// machine and from the control plane, and the task's log name the commit
// it starts from; the task does not see the changes, and the checkout
// keeps them.
func TestE2EADirtyCheckoutIsSaid(t *testing.T) {
	t.Parallel()
	repo := gittest.NewRepo(t)
	head := gittest.Git(t, repo, "rev-parse", "HEAD")
	must(t, os.WriteFile(filepath.Join(repo, "README"), []byte("the person's edit\n"), 0o600))
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--repo", "app="+repo)
	// Submitted as soon as the agent serves the repository.
	var id string
	testkit.WaitFor(t, "the agent to serve app", func() bool {
		r := runAgent(t, "submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", "@sh grep -qx one README\n@output done", "--repo", "app")
		id = strings.TrimSpace(r.stdout)
		return r.code == 0
	})
	if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
		t.Fatalf("task %s (%s)", v.Phase, v.PhaseReason)
	}
	want := "checkout: the checkout of app has uncommitted changes (1 file changed); this task starts from main at " + head[:7] + " and does not see them"
	for _, where := range [][]string{{"--data-dir", dataDir}, {"--remote", "--control-plane", c.url(), "--token-file", c.operatorFile}} {
		show := runAgent(t, append([]string{"tasks", "show", id}, where...)...)
		if show.code != 0 || !strings.Contains(show.stdout, want) {
			t.Errorf("tasks show %v does not say %q:\n%+v", where, want, show)
		}
	}
	logs := runAgent(t, "tasks", "logs", id, "--data-dir", dataDir)
	if !strings.Contains(logs.stdout, strings.TrimPrefix(want, "checkout: ")) {
		t.Errorf("tasks logs does not say the checkout is dirty:\n%s", logs.stdout)
	}
	if got := gittest.Git(t, repo, "status", "--porcelain"); got != "M README" {
		t.Errorf("the checkout's status: %q", got)
	}
}

// Issue 34's attack on the person's repository, through the whole
// system, the task confined as the agent confines it: it commits, makes
// its branch a symbolic ref to main, tries to move main and delete the
// branch of a task before it, and fails. The person commits on main and
// retries it: the replay, the report, the workspace's removal and
// retention follow no link: main keeps the person's commit, the other
// task's branch holds its work.
func TestE2EATaskCannotMoveThePersonsBranches(t *testing.T) {
	t.Parallel()
	repo := gittest.NewRepo(t)
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--repo", "site="+repo)
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	testkit.WaitFor(t, "the agent to announce its repository", func() bool {
		r := runAgent(t, append([]string{"submit", "--prompt", "probe", "--repo", "nowhere"}, cpArgs...)...)
		return r.code != 0 && strings.Contains(r.stderr, `(served: site)`)
	})
	submitTo := func(prompt string) string {
		r := runAgent(t, append([]string{"submit", "--prompt", prompt, "--repo", "site"}, cpArgs...)...)
		if r.code != 0 {
			t.Fatalf("submit: %+v", r)
		}
		return strings.TrimSpace(r.stdout)
	}
	first := submitTo(commit("first.txt", "first") + "\n@output done")
	if v := c.waitDone(t, first); v.Phase != state.PhaseCompleted {
		t.Fatalf("the first task: %s (%s)", v.Phase, v.PhaseReason)
	}
	firstHead := gittest.Git(t, repo, "rev-parse", "agent/"+first)
	base := gittest.Git(t, repo, "rev-parse", "main")
	gitDir := filepath.Join(repo, ".git")
	attack := strings.Join([]string{
		"@no-session",
		commit("evil.txt", "evil"),
		`@sh printf 'ref: refs/heads/main\n' > "$(git rev-parse --path-format=absolute --git-common-dir)/$(git symbolic-ref HEAD)"`,
		"@sh git -C " + repo + " update-ref refs/heads/main HEAD || true",
		"@sh git -C " + repo + " update-ref -d refs/heads/agent/" + first + " || true",
		"@sh printf 'ref: refs/heads/main\\n' > " + filepath.Join(gitDir, "refs", "heads", "agent", first) + " || true",
		"@fail network",
		"@output done",
	}, "\n")
	id := submitTo(attack)
	if v := c.waitDone(t, id); v.Phase != state.PhaseRecoverableFailed {
		t.Fatalf("the attacking task: %s (%s)", v.Phase, v.PhaseReason)
	}
	waitLocalPhase(t, dataDir, id, state.PhaseRecoverableFailed)
	gittest.Git(t, repo, "commit", "-q", "--allow-empty", "-m", "the person's newer work")
	newer := gittest.Git(t, repo, "rev-parse", "main")
	if r := runAgent(t, append([]string{"tasks", "retry", id}, cpArgs...)...); r.code != 0 {
		t.Fatalf("tasks retry: %+v", r)
	}
	v := c.waitPhase(t, id, "completed", func(p state.Phase) bool { return p == state.PhaseCompleted })
	if len(v.Attempts) != 2 || v.Attempts[1].Continues != 0 {
		t.Fatalf("attempts: %+v", v.Attempts)
	}
	waitLocalPhase(t, dataDir, id, state.PhaseCompleted)
	check := func(when string) {
		t.Helper()
		if got := gittest.Git(t, repo, "rev-parse", "main"); got != newer {
			t.Errorf("%s: main is at %s, want the person's %s (base %s)", when, got, newer, base)
		}
		if got := gittest.Git(t, repo, "rev-parse", "agent/"+first); got != firstHead {
			t.Errorf("%s: the first task's branch is at %s, want %s", when, got, firstHead)
		}
		for _, l := range strings.Split(gittest.Git(t, repo, "for-each-ref", "--format=%(refname) -> %(symref)", "refs/heads/"), "\n") {
			if !strings.HasSuffix(strings.TrimSpace(l), " ->") {
				t.Errorf("%s: a branch of the repository is a symbolic ref: %s", when, l)
			}
		}
	}
	check("after the replay")
	ls := runAgent(t, "workspaces", "ls", "--data-dir", dataDir)
	if !regexp.MustCompile(`(?m)^` + id + `\s+site\s+agent/` + id + `\s+.*kept: cannot tell what it holds \(the task's branch agent/` + id + ` is a symbolic ref`).MatchString(ls.stdout) {
		t.Errorf("workspaces ls does not say the attacking task's branch is a link:\n%s%s", ls.stdout, ls.stderr)
	}
	if r := runAgent(t, "workspaces", "rm", id, "--force", "--data-dir", dataDir); r.code != 0 {
		t.Errorf("workspaces rm --force: %+v", r)
	}
	check("after the workspace's removal")
}
