package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/edgeagent/agent/internal/landlock"
)

// A task may write anything in its clone: its config (a filter its
// .gitattributes asks for, a file system monitor, a pager, an external
// diff, a hooks directory), its hooks. The manager's git calls read none
// of it: nothing runs, and the reports are the real ones.
func TestATasksConfigAndHooksDoNotRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("evil", "")
	write(t, w.Dir, ".gitattributes", "* filter=evil diff=evil\n", "new", "n\n")
	git(t, w.Dir, "add", "new")
	git(t, w.Dir, "commit", "-q", "-m", "task's commit")
	write(t, w.Dir, "README", "changed\n")
	marker := filepath.Join(t.TempDir(), "ran")
	script := "sh -c 'touch " + marker + "; cat'"
	for _, kv := range [][2]string{{"filter.evil.clean", script}, {"filter.evil.smudge", script}, {"filter.evil.process", "touch " + marker},
		{"filter.evil.required", "true"}, {"core.fsmonitor", "touch " + marker}, {"diff.external", "touch " + marker},
		{"diff.evil.textconv", "touch " + marker}, {"diff.evil.command", "touch " + marker}, {"core.pager", "touch " + marker},
		{"core.hooksPath", filepath.Join(w.Dir, ".git", "hooks")}, {"core.alternateRefsCommand", "touch " + marker},
		{"uploadpack.packObjectsHook", "touch " + marker}, {"core.sshCommand", "touch " + marker}} {
		git(t, w.Dir, "config", kv[0], kv[1])
	}
	for _, hook := range []string{"pre-commit", "post-commit", "post-checkout", "reference-transaction", "pre-auto-gc", "post-index-change", "fsmonitor-watchman"} {
		write(t, filepath.Join(w.Dir, ".git", "hooks"), hook, "#!/bin/sh\ntouch "+marker+"\n")
		if err := os.Chmod(filepath.Join(w.Dir, ".git", "hooks", hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	head := b.bringBack("evil")
	c := b.changes("evil")
	// new committed; .gitattributes added (1 line), README changed (+1 -3).
	if c.Head != head || len(c.Commits) != 1 || c.Files != 3 || c.Insertions != 3 || c.Deletions != 3 || !c.Uncommitted {
		t.Errorf("changes of a hostile clone: %+v; want 1 commit, 3 files, +3 -3, uncommitted", c)
	}
	if i := b.info("evil"); !i.Uncommitted || i.Commits != 1 || i.Err != "" {
		t.Errorf("inspect: %+v", i)
	}
	// The agent's diff and commit of what the task left: the files as
	// they are, no filter of the task's run on them.
	if d, err := b.m.Diff(ctx, "evil"); err != nil || d.Files != 3 || !strings.Contains(d.Patch, "+changed\n") {
		t.Errorf("diff of a hostile clone: %+v, %v", d, err)
	}
	committed, err := b.m.Commit(ctx, "evil", "the attempt's work", Author{})
	if err != nil || committed == "" {
		t.Fatalf("commit in a hostile clone: %q, %v", committed, err)
	}
	if got := git(t, b.repo, "--git-dir", filepath.Join(w.Dir, ".git"), "cat-file", "blob", committed+":README"); got != "changed" {
		t.Errorf("the agent committed README as %q", got)
	}
	if _, err := b.m.Reset(ctx, "evil", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Remove(ctx, "evil", true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the task's config or hooks ran a program: %v", err)
	}
}

// The task makes its branch a symbolic ref to the repository's main (or
// to its own): the manager does not follow it. Nothing is brought back,
// the reports say why, a reset and a removal leave main where it is.
func TestASymbolicBranchIsNotFollowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("link", "")
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "work")
	b.bringBack("link")
	git(t, b.repo, "commit", "-q", "--allow-empty", "-m", "the person's newer work")
	mainBefore := git(t, b.repo, "rev-parse", "main")
	git(t, w.Dir, "branch", "main")
	git(t, w.Dir, "symbolic-ref", "refs/heads/agent/link", "refs/heads/main")
	_, err := b.m.BringBack(ctx, "link")
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), `branch agent/link is a symbolic ref (to "refs/heads/main")`) {
		t.Errorf("bring back of a symbolic branch: %v", err)
	}
	if _, err := b.m.Changes(ctx, "link"); err == nil || !strings.Contains(err.Error(), "symbolic ref") {
		t.Errorf("changes of a symbolic branch: %v", err)
	}
	if i := b.info("link"); i.Commits != 1 {
		t.Errorf("inspect: %+v; want the commit brought back counted", i)
	}
	if _, err := b.m.Reset(ctx, "link", 1); err != nil {
		t.Errorf("reset: %v", err)
	}
	git(t, w.Dir, "symbolic-ref", "refs/heads/agent/link", "refs/heads/main")
	if _, err := b.m.Remove(ctx, "link", true); err != nil {
		t.Fatal(err)
	}
	if got := git(t, b.repo, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main is at %s, want %s", got, mainBefore)
	}
	if out, err := gitErr(b.repo, "rev-parse", "--verify", "-q", "refs/heads/agent/link"); err == nil {
		t.Errorf("the task's branch outlived the removal: %s", out)
	}
}

// The task points its clone's alternates at objects it could not reach
// (another repository of the person's), and its branch at a commit that
// is only there: the manager writes the alternates anew before it reads,
// so the commit is not found, and nothing of there comes back. A link or
// a special file among its objects (a FIFO would block a reader
// forever) is refused, not read; so is a git directory the task made a
// link to another.
func TestTheClonesObjectsAreCheckedBeforeTheyAreRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	private := newRepo(t)
	git(t, private, "commit", "-q", "--allow-empty", "-m", "the person's private work")
	secret := git(t, private, "rev-parse", "HEAD")

	w := b.prepare("alt", "")
	alternates := filepath.Join(w.Dir, ".git", "objects", "info", "alternates")
	write(t, filepath.Dir(alternates), "alternates", filepath.Join(private, ".git", "objects")+"\n")
	write(t, filepath.Join(w.Dir, ".git", "refs", "heads", "agent"), "alt", secret+"\n")
	if _, err := b.m.BringBack(ctx, "alt"); err == nil || !strings.Contains(err.Error(), "not a commit its clone holds") {
		t.Errorf("bring back of a commit through the task's alternates: %v", err)
	}
	if got, _ := os.ReadFile(alternates); string(got) != filepath.Join(b.repo, ".git", "objects")+"\n" {
		t.Errorf("the clone's alternates: %q, want the repository's objects alone", got)
	}
	if out, err := gitErr(b.repo, "cat-file", "-e", secret); err == nil {
		t.Errorf("the private commit reached the repository: %s", out)
	}

	for _, c := range []struct {
		name  string
		plant func(w *Workspace)
		want  string
	}{
		{"a linked pack directory", func(w *Workspace) {
			pack := filepath.Join(w.Dir, ".git", "objects", "pack")
			must(t, os.RemoveAll(pack))
			must(t, os.Symlink(filepath.Join(private, ".git", "objects", "pack"), pack))
		}, "objects/pack, which is not a file or a directory"},
		{"a FIFO as a loose object", func(w *Workspace) {
			dir := filepath.Join(w.Dir, ".git", "objects", w.BaseCommit[:2])
			must(t, os.MkdirAll(dir, 0o755))
			must(t, syscall.Mkfifo(filepath.Join(dir, strings.Repeat("0", 38)), 0o644))
		}, "which is not a file or a directory"},
		{"a linked git directory", func(w *Workspace) {
			gitDir := filepath.Join(w.Dir, ".git")
			must(t, os.Rename(gitDir, gitDir+".moved"))
			must(t, os.Symlink(filepath.Join(private, ".git"), gitDir))
		}, "is not a directory (a link or a file the task made)"},
		{"an info file in place of its directory", func(w *Workspace) {
			info := filepath.Join(w.Dir, ".git", "objects", "info")
			must(t, os.RemoveAll(info))
			write(t, filepath.Dir(info), "info", "not a directory")
		}, "the task's object directory: "},
		{"a .git file", func(w *Workspace) {
			gitDir := filepath.Join(w.Dir, ".git")
			must(t, os.RemoveAll(gitDir))
			write(t, w.Dir, ".git", "gitdir: "+filepath.Join(private, ".git")+"\n")
		}, "is not a directory (a link or a file the task made)"},
	} {
		id := strings.ReplaceAll(c.name, " ", "-")
		w := b.prepare(id, "")
		git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "work")
		c.plant(w)
		if _, err := b.m.BringBack(ctx, id); err == nil || !errors.As(err, new(*RefusedError)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: bring back: %v; want it refused, saying %q", c.name, err, c.want)
		}
		if i := b.info(id); !i.Kept() || !strings.Contains(i.Err, c.want) {
			t.Errorf("%s: inspect: %+v; want it kept, saying why", c.name, i)
		}
		// A replay starts from a clone made anew.
		if _, err := b.m.Reset(ctx, id, 1); err != nil {
			t.Errorf("%s: reset: %v", c.name, err)
		}
		if head := b.bringBack(id); head != w.BaseCommit {
			t.Errorf("%s: after the reset the branch is at %s", c.name, head)
		}
	}
	if got := git(t, private, "rev-parse", "HEAD"); got != secret {
		t.Errorf("the private repository changed: %s", got)
	}
}

// What Writable names is enough for git to add, commit, amend, branch,
// pack and collect in the clone under Landlock, and for the agent to
// bring the work back; nothing of the repository can be changed: not a
// branch, not the config, not the hooks, not the objects.
func TestWritableIsEnoughToCommitAndNoMore(t *testing.T) {
	t.Parallel()
	if landlock.ABI() == 0 {
		t.Fatal("no Landlock on this kernel: these machines have it (ABI 7); the test cannot run without")
	}
	b := newBed(t)
	w := b.prepare("conf", "")
	if got := w.Writable(); len(got) != 1 || got[0] != w.Dir {
		t.Errorf("writable %v, want the clone alone", got)
	}
	write(t, w.Dir, "work.txt", "done\n")
	tmp := t.TempDir()
	writable := append(w.Writable(), tmp)
	for _, args := range [][]string{{"add", "work.txt"}, {"commit", "-q", "-m", "confined work"}, {"commit", "-q", "--amend", "-m", "confined work, amended"},
		{"branch", "scratch"}, {"gc", "-q", "--prune=now"}, {"pack-refs", "--all", "--prune"}} {
		if out, err := confinedGit(t, w.Dir, writable, args...); err != nil {
			t.Fatalf("confined git %v: %v: %s", args, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(w.Dir, ".git", "refs", "heads", "agent", "conf")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the branch is not packed: %v", err)
	}
	head := b.bringBack("conf")
	if c := b.changes("conf"); len(c.Commits) != 1 || c.Commits[0].Subject != "confined work, amended" || c.Uncommitted || c.Head != head {
		t.Errorf("after a confined commit: %+v", c)
	}
	if got := git(t, b.repo, "log", "-1", "--format=%s", "agent/conf"); got != "confined work, amended" {
		t.Errorf("the repository's agent/conf says %q", got)
	}
	mainBefore := git(t, b.repo, "rev-parse", "main")
	gitDir := filepath.Join(b.repo, ".git")
	write(t, w.Dir, "fresh.txt", "no object has this yet\n")
	for _, c := range []struct {
		what string
		args []string
	}{
		{"move main", []string{"-C", b.repo, "update-ref", "refs/heads/main", head}},
		{"move its branch in the repository", []string{"-C", b.repo, "update-ref", "refs/heads/agent/conf", mainBefore}},
		{"make a branch", []string{"-C", b.repo, "branch", "other"}},
		{"change the config", []string{"-C", b.repo, "config", "core.hooksPath", "/tmp"}},
		{"write an object", []string{"-C", b.repo, "hash-object", "-w", filepath.Join(w.Dir, "fresh.txt")}},
	} {
		if out, err := confinedGit(t, w.Dir, writable, c.args...); err == nil {
			t.Errorf("a confined task could %s: %s", c.what, out)
		}
	}
	for _, p := range []string{filepath.Join(gitDir, "hooks", "pre-commit"), filepath.Join(gitDir, "refs", "heads", "agent", "conf"),
		filepath.Join(gitDir, "objects", "info", "alternates")} {
		if out, err := confinedShell(t, w.Dir, writable, "echo evil > "+p); err == nil {
			t.Errorf("a confined task could write %s: %s", p, out)
		}
	}
	if got := git(t, b.repo, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved")
	}
	if got := git(t, b.repo, "rev-parse", "agent/conf"); got != head {
		t.Errorf("agent/conf moved")
	}
}

// confinedShell runs a shell command confined as confinedGit does git,
// through git's own "!" alias, which runs it with sh.
func confinedShell(t *testing.T, dir string, write []string, command string) (string, error) {
	t.Helper()
	return confinedGit(t, dir, write, "-c", "alias.x=!"+command, "x")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
