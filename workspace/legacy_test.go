package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// legacyWorkspace makes task id's workspace as an agent from before
// clones made it: a git worktree of the repository on its branch
// agent/ID, and the record that agent wrote.
func (b *bed) legacyWorkspace(id string) (dir, adminDir string) {
	b.t.Helper()
	t := b.t
	dir = filepath.Join(b.root, id)
	git(t, b.repo, "worktree", "add", "-q", "-b", "agent/"+id, dir, "main")
	adminDir = git(t, dir, "rev-parse", "--path-format=absolute", "--git-dir")
	common := git(t, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	record := `{
  "task_id": "` + id + `",
  "repo": "app",
  "repo_path": "` + b.repo + `",
  "dir": "` + dir + `",
  "branch": "agent/` + id + `",
  "base": "main",
  "base_commit": "` + git(t, b.repo, "rev-parse", "main") + `",
  "created_at": "` + time.Now().UTC().Format(time.RFC3339Nano) + `",
  "common_dir": "` + common + `",
  "admin_dir": "` + adminDir + `"
}
`
	write(t, filepath.Join(b.root, RecordsDir), id+".json", record)
	return dir, adminDir
}

// A workspace an earlier agent made, a git worktree, is listed and
// removed safely, also after its task left a symbolic ref (to main)
// where its branch is: the removal deletes the link, never main. Before
// its task runs again it is made a clone in place: the files as they
// were, what was committed on the branch, what was not still not; the
// repository keeps no worktree of it.
func TestAWorktreeOfAnEarlierAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	oldDir, oldAdmin := b.legacyWorkspace("old")
	write(t, oldDir, "feature.txt", "f\n")
	git(t, oldDir, "add", "feature.txt")
	git(t, oldDir, "commit", "-q", "-m", "feature")
	work := git(t, oldDir, "rev-parse", "HEAD")
	write(t, oldDir, "wip.txt", "in progress\n")
	attackedDir, attackedAdmin := b.legacyWorkspace("attacked")
	git(t, attackedDir, "commit", "-q", "--allow-empty", "-m", "the person's newer work, on main")
	git(t, b.repo, "update-ref", "refs/heads/main", git(t, attackedDir, "rev-parse", "HEAD"))
	mainNow := git(t, b.repo, "rev-parse", "main")
	git(t, b.repo, "symbolic-ref", "refs/heads/agent/attacked", "refs/heads/main")

	list, err := b.m.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	got := map[string]Info{}
	for _, i := range list {
		got[i.TaskID] = i
	}
	if i := got["old"]; i.Commits != 1 || !i.Uncommitted || i.Err != "" || i.BranchHead != work {
		t.Errorf("the earlier agent's workspace: %+v; want its commit and its uncommitted file", i)
	}
	if i := got["attacked"]; !i.Kept() || !strings.Contains(i.Err, "symbolic ref to refs/heads/main") {
		t.Errorf("the attacked workspace: %+v; want it kept, saying its branch is a link", i)
	}
	if _, err := b.m.Remove(ctx, "attacked", false); !errors.Is(err, ErrKept) {
		t.Errorf("remove the attacked workspace unforced: %v", err)
	}
	if _, err := b.m.Remove(ctx, "attacked", true); err != nil {
		t.Fatal(err)
	}
	if got, err := gitErr(b.repo, "rev-parse", "--verify", "-q", "refs/heads/main"); err != nil || got != mainNow {
		t.Errorf("main after removing the attacked workspace: %q, %v; want %s", got, err, mainNow)
	}
	if out, err := gitErr(b.repo, "rev-parse", "--verify", "-q", "refs/heads/agent/attacked"); err == nil {
		t.Errorf("the link is still there: %s", out)
	}
	for _, p := range []string{attackedDir, attackedAdmin} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", p, err)
		}
	}

	w := b.prepare("old", "")
	if w.legacy() || w.Brought != work {
		t.Errorf("after prepare: %+v; want a clone, its branch's head brought back", w)
	}
	if info, err := os.Lstat(filepath.Join(oldDir, ".git")); err != nil || !info.IsDir() {
		t.Errorf("the workspace's git directory: %v, %v; want a directory of its own", info, err)
	}
	if _, err := os.Stat(oldAdmin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worktree's git directory is still in the repository: %v", err)
	}
	if got := git(t, b.repo, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
		t.Errorf("the repository still has worktrees: %s", got)
	}
	if got := git(t, oldDir, "status", "--porcelain"); got != "?? wip.txt" {
		t.Errorf("the clone's status: %q; want the file in progress, untracked as before", got)
	}
	c := b.changes("old")
	if c.Head != work || len(c.Commits) != 1 || !c.Uncommitted {
		t.Errorf("changes: %+v", c)
	}
	git(t, oldDir, "add", "wip.txt")
	git(t, oldDir, "commit", "-q", "-m", "finished")
	head := b.bringBack("old")
	if got := git(t, b.repo, "rev-parse", "agent/old"); got != head || head == work {
		t.Errorf("the repository's agent/old at %s, want %s", got, head)
	}
}
