package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The agent commits what an attempt left: every change, deletion and
// untracked file (not an ignored one) on top of the task's own commits,
// by the agent, with its message; the clone's branch and index follow,
// so that the task's git sees its work committed and nothing staged; it
// comes back to the repository as any commit of the task's. Nothing
// left: no commit.
func TestCommitCommitsWhatTheAttemptLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	b.m.Author = Author{Name: "Agent Smith", Email: "agent@example.org"}
	w := b.prepare("c", "")
	write(t, w.Dir, "mine.txt", "the task's own commit\n")
	git(t, w.Dir, "add", "mine.txt")
	git(t, w.Dir, "commit", "-q", "-m", "the task's commit")
	own := git(t, w.Dir, "rev-parse", "HEAD")
	write(t, w.Dir, "README", "changed\n", "dir/new.txt", "new\n", "build.log", "ignored\n")
	must(t, os.Remove(filepath.Join(w.Dir, "old.txt")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(w.Dir, "link")))

	head, err := b.m.Commit(ctx, "c", "Fix the footer\n\nDone.\n\nAgent-Task: c\n", Author{})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, w.Dir, "rev-parse", "agent/c"); got != head || head == own {
		t.Fatalf("the clone's branch at %s, want the agent's commit %s (not %s)", got, head, own)
	}
	if got := git(t, w.Dir, "rev-parse", head+"^"); got != own {
		t.Errorf("the agent's commit's parent is %s, want the task's %s", got, own)
	}
	if got := git(t, w.Dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", head); got != "Agent Smith <agent@example.org>|Agent Smith <agent@example.org>|Fix the footer\n\nDone.\n\nAgent-Task: c" {
		t.Errorf("the agent's commit: %q", got)
	}
	if got := git(t, w.Dir, "show", "--name-status", "--format=", head); got != "M\tREADME\nA\tdir/new.txt\nA\tlink\nD\told.txt" {
		t.Errorf("the agent's commit changes:\n%s", got)
	}
	if got := git(t, w.Dir, "cat-file", "-p", head+":link"); got != "/etc/passwd" {
		t.Errorf("the link was committed as %q, want the link itself", got)
	}
	// The task's git: its work committed, nothing staged or changed.
	if got := git(t, w.Dir, "status", "--porcelain"); got != "" {
		t.Errorf("the clone's status after the commit: %q", got)
	}
	if got := b.bringBack("c"); got != head {
		t.Errorf("brought back %s, want %s", got, head)
	}
	if c := b.changes("c"); len(c.Commits) != 2 || c.Uncommitted || c.Head != head {
		t.Errorf("changes after the commit: %+v", c)
	}
	if again, err := b.m.Commit(ctx, "c", "again", Author{}); err != nil || again != "" {
		t.Errorf("a commit with nothing left: %q, %v", again, err)
	}
}

// What the agent's commit leaves out: a repository the task made inside
// its clone (its commits are nowhere to fetch), and a FIFO (which would
// block a reader). A detached HEAD keeps its index: only the branch
// moves.
func TestCommitLeavesOutNestedRepositoriesAndSpecialFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("n", "")
	git(t, w.Dir, "init", "-q", "nested")
	write(t, w.Dir, "nested/inner.txt", "inner\n", "kept.txt", "kept\n")
	git(t, filepath.Join(w.Dir, "nested"), "add", "inner.txt")
	git(t, filepath.Join(w.Dir, "nested"), "commit", "-q", "-m", "nested")
	must(t, syscall.Mkfifo(filepath.Join(w.Dir, "fifo"), 0o600))
	git(t, w.Dir, "checkout", "-q", "--detach")
	head, err := b.m.Commit(ctx, "n", "work", Author{})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, w.Dir, "ls-tree", "-r", "--name-only", head); got != ".gitignore\nREADME\nkept.txt\nold.txt" {
		t.Errorf("the agent's commit holds:\n%s", got)
	}
	if got := git(t, w.Dir, "rev-parse", "HEAD"); got != w.BaseCommit {
		t.Errorf("the detached HEAD moved to %s", got)
	}
	if got := git(t, w.Dir, "status", "--porcelain"); !strings.Contains(got, "?? kept.txt") {
		t.Errorf("the clone's index changed under a detached HEAD: %q", got)
	}
}

// The task leaves a link where the clone's index is, and where the
// agent writes its ref beside the branch: the agent replaces the link,
// never writes through it.
func TestCommitWritesNoFileThroughALink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("l", "")
	victim := filepath.Join(t.TempDir(), "victim")
	write(t, filepath.Dir(victim), "victim", "the person's file\n")
	index := filepath.Join(w.Dir, ".git", "index")
	must(t, os.Remove(index))
	must(t, os.Symlink(victim, index))
	must(t, os.Symlink(victim, filepath.Join(w.Dir, ".git", "agent-write.tmp")))
	write(t, w.Dir, "work.txt", "work\n")
	head, err := b.m.Commit(ctx, "l", "work", Author{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "the person's file\n" {
		t.Errorf("the file a link named was written: %q", got)
	}
	if info, err := os.Lstat(index); err != nil || !info.Mode().IsRegular() {
		t.Errorf("the clone's index: %v, %v; want a file of its own", info, err)
	}
	if got := git(t, w.Dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("the clone's HEAD at %s, want %s", got, head)
	}
}

// The diff of the task's work against its base: committed or not,
// untracked files added, binary files named and not carried, with its
// stat; cut at a line's end past MaxDiffBytes, its size whole.
func TestDiff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("d", "")
	write(t, w.Dir, "README", "one\nTWO\nthree\n")
	git(t, w.Dir, "commit", "-q", "-am", "two")
	write(t, w.Dir, "new.txt", "new\n", "blob.bin", "\x00\x01binary")
	d, err := b.m.Diff(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if d.Files != 3 || d.Insertions != 2 || d.Deletions != 1 || d.Cut || d.Bytes != int64(len(d.Patch)) || d.Head != git(t, w.Dir, "rev-parse", "HEAD") ||
		d.BaseCommit != w.BaseCommit || d.Branch != "agent/d" || d.Repo != "app" {
		t.Errorf("diff %+v", d)
	}
	for _, want := range []string{"diff --git a/README b/README\n", "-two\n+TWO\n", "diff --git a/new.txt b/new.txt\nnew file mode 100644\n",
		"+new\n", "Binary files /dev/null and b/blob.bin differ\n"} {
		if !strings.Contains(d.Patch, want) {
			t.Errorf("the patch lacks %q:\n%s", want, d.Patch)
		}
	}
	if strings.Contains(d.Patch, "\x01binary") {
		t.Error("the patch carries the binary file")
	}
	// Nothing of it was committed or staged by the diff.
	if got := git(t, w.Dir, "status", "--porcelain"); got != "?? blob.bin\n?? new.txt" && got != "?? blob.bin\n?? new.txt\n" {
		t.Errorf("the clone's status after a diff: %q", got)
	}
	var big strings.Builder
	for big.Len() < 600<<10 {
		big.WriteString("a line of the big file, long enough to fill it soon\n")
	}
	write(t, w.Dir, "big.txt", big.String())
	d, err = b.m.Diff(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Cut || len(d.Patch) > 512<<10 || !strings.HasSuffix(d.Patch, "\n") || d.Bytes <= 600<<10 || d.Files != 4 {
		t.Errorf("a big diff: cut %v, %d of %d bytes kept, %d files", d.Cut, len(d.Patch), d.Bytes, d.Files)
	}
}
