package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeagent/agent/internal/landlock"
)

// A task may rewrite its worktree's .git file and the worktree's own git
// directory to lead git to a repository it made, whose config runs a
// program (a clean filter its .gitattributes asks for). The manager's
// git calls follow none of it: nothing runs, the report is the real
// one, and a reset moves the task's branch, never the one the task
// pointed HEAD at.
func TestAHostileWorktreeIsNotFollowed(t *testing.T) {
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("evil", "")
	mainBefore := git(t, b.repo, "rev-parse", "main")
	marker := filepath.Join(t.TempDir(), "ran")
	// The task's own repository, with a filter that leaves a mark.
	trap := filepath.Join(t.TempDir(), "trap")
	git(t, t.TempDir(), "init", "-q", trap)
	script := "sh -c 'touch " + marker + "; cat'"
	for _, kv := range [][2]string{{"filter.evil.clean", script}, {"filter.evil.smudge", script}, {"core.fsmonitor", "touch " + marker},
		{"diff.external", "touch " + marker}, {"core.pager", "touch " + marker}} {
		git(t, trap, "config", kv[0], kv[1])
	}
	write(t, w.Dir, ".gitattributes", "* filter=evil\n", "README", "changed\n", "new", "n\n")
	// Through the worktree's .git file and through the git directory's
	// commondir, and HEAD pointed at main.
	write(t, w.Dir, ".git", "gitdir: "+filepath.Join(trap, ".git")+"\n")
	write(t, w.AdminDir, "commondir", filepath.Join(trap, ".git")+"\n", "HEAD", "ref: refs/heads/main\n")

	c, err := b.m.Changes(ctx, "evil")
	if err != nil {
		t.Fatal(err)
	}
	// .gitattributes and new added (1 line each), README changed (+1 -3).
	if c.Files != 3 || c.Insertions != 3 || c.Deletions != 3 || !c.Uncommitted {
		t.Errorf("changes of a hostile worktree: %+v; want 3 files, +3 -3, uncommitted", c)
	}
	if i := b.info("evil"); !i.Uncommitted || i.Err != "" {
		t.Errorf("inspect: %+v", i)
	}
	if err := b.m.Reset(ctx, "evil"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the task's config ran a program: %v", err)
	}
	if got := git(t, b.repo, "rev-parse", "main"); got != mainBefore {
		t.Errorf("reset moved main, which the task pointed HEAD at: %s, was %s", got, mainBefore)
	}
	// The reset also tied the worktree back to its repository.
	if got := git(t, w.Dir, "symbolic-ref", "--short", "HEAD"); got != "agent/evil" {
		t.Errorf("after reset the worktree is on %q", got)
	}
	if got := git(t, w.Dir, "status", "--porcelain"); got != "" {
		t.Errorf("after reset: %q", got)
	}
	if _, err := b.m.Remove(ctx, "evil", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the task's config ran a program: %v", err)
	}
}

// What Writable names is enough for git to add and commit in the
// worktree under Landlock, and nothing else of the repository can be
// changed: not another branch, not the config, not the hooks.
func TestWritableIsEnoughToCommitAndNoMore(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Fatal("no Landlock on this kernel: these machines have it (ABI 7); the test cannot run without")
	}
	b := newBed(t)
	b.prepare("conf", "")
	refDir := filepath.Join(b.repo, ".git", "refs", "heads", "agent")
	// A pack of the refs removes the directory of the agent's branches;
	// prepare (again, at the next attempt) makes it.
	git(t, b.repo, "pack-refs", "--all", "--prune")
	if _, err := os.Stat(refDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pack-refs left %s: %v", refDir, err)
	}
	w := b.prepare("conf", "")
	write(t, w.Dir, "work.txt", "done\n")
	tmp := t.TempDir()
	writable := append(w.Writable(), tmp)
	for _, args := range [][]string{{"add", "work.txt"}, {"commit", "-q", "-m", "confined work"}, {"commit", "-q", "--amend", "-m", "confined work, amended"}} {
		if out, err := confinedGit(t, w.Dir, writable, args...); err != nil {
			t.Fatalf("confined git %v: %v: %s", args, err, out)
		}
	}
	if c := b.changes("conf"); len(c.Commits) != 1 || c.Commits[0].Subject != "confined work, amended" || c.Uncommitted {
		t.Errorf("after a confined commit: %+v", c)
	}
	mainBefore := git(t, b.repo, "rev-parse", "main")
	for _, c := range []struct {
		what string
		args []string
	}{
		{"move main", []string{"update-ref", "refs/heads/main", "HEAD"}},
		{"make a branch outside agent/", []string{"branch", "other"}},
		{"change the config", []string{"config", "core.hooksPath", "/tmp"}},
	} {
		if out, err := confinedGit(t, w.Dir, writable, c.args...); err == nil {
			t.Errorf("a confined task could %s: %s", c.what, out)
		}
	}
	hooks := filepath.Join(w.CommonDir, "hooks", "pre-commit")
	if out, err := confinedShell(t, w.Dir, writable, "echo evil > "+hooks); err == nil {
		t.Errorf("a confined task could write a hook: %s", out)
	}
	if got := git(t, b.repo, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved")
	}
}

// confinedShell runs a shell command confined as confinedGit does git,
// through git's own "!" alias, which runs it with sh.
func confinedShell(t *testing.T, dir string, write []string, command string) (string, error) {
	t.Helper()
	return confinedGit(t, dir, write, "-c", "alias.x=!"+command, "x")
}
