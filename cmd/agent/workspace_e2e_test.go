package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/gittest"
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
	repo := gittest.NewRepo(t)
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--repo", "site="+repo, "--max-concurrent", "2")
	waitFor(t, 30*time.Second, "the agent to announce its repository", func() bool {
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
	waitFor(t, time.Minute, "both tasks to commit", func() bool {
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
