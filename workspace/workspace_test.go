package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgeagent/agent/state"
)

// bed is a manager serving one real repository, "app", under a work
// root of its own.
type bed struct {
	t    *testing.T
	repo string
	root string
	m    *Manager
}

func newBed(t *testing.T) *bed {
	t.Helper()
	b := &bed{t: t, repo: newRepo(t), root: filepath.Join(t.TempDir(), "work")}
	var err error
	if b.m, err = New(b.root, []Repo{{Name: "app", Path: b.repo}}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bed) prepare(id, base string) *Workspace {
	b.t.Helper()
	w, err := b.m.Prepare(context.Background(), id, "app", base)
	if err != nil {
		b.t.Fatal(err)
	}
	return w
}

// bringBack is what the agent does at the end of each of the task's
// attempts.
func (b *bed) bringBack(id string) string {
	b.t.Helper()
	head, err := b.m.BringBack(context.Background(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return head
}

func (b *bed) changes(id string) *state.Changes {
	b.t.Helper()
	c, err := b.m.Changes(context.Background(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return c
}

func (b *bed) info(id string) Info {
	b.t.Helper()
	i, err := b.m.Inspect(context.Background(), id)
	if err != nil {
		b.t.Fatal(err)
	}
	return i
}

// Two tasks on one repository each get a worktree on a branch of their
// own, made from the base; what each writes and commits, at the same
// time, stays in its own worktree and branch, and the repository's
// checkout and its branch do not move.
func TestTwoTasksOnOneRepositoryRunSideBySide(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	mainBefore := git(t, b.repo, "rev-parse", "main")
	wa, wb := b.prepare("task-a", ""), b.prepare("task-b", "main")
	for _, w := range []*Workspace{wa, wb} {
		if w.Dir != filepath.Join(b.root, w.TaskID) || w.Branch != "agent/"+w.TaskID || w.Base != "main" || w.BaseCommit != mainBefore {
			t.Errorf("workspace %+v: want dir ROOT/%s, branch agent/%s, base main at %s", w, w.TaskID, w.TaskID, mainBefore)
		}
		if got := git(t, w.Dir, "symbolic-ref", "--short", "HEAD"); got != w.Branch {
			t.Errorf("%s is on %s, want %s", w.Dir, got, w.Branch)
		}
		if got, err := os.ReadFile(filepath.Join(w.Dir, "README")); err != nil || string(got) != "one\ntwo\nthree\n" {
			t.Errorf("%s/README = %q, %v: want the base's", w.Dir, got, err)
		}
		if info, err := os.Stat(w.Dir); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("clone %s: %v, %v; want mode 0700", w.Dir, info.Mode(), err)
		}
		if info, err := os.Lstat(filepath.Join(w.Dir, ".git")); err != nil || !info.IsDir() {
			t.Errorf("the clone's git directory is not its own: %v, %v", info, err)
		}
		if got := git(t, w.Dir, "rev-parse", "--path-format=absolute", "--git-common-dir"); got != filepath.Join(w.Dir, ".git") {
			t.Errorf("the task's git uses %s, want its clone's own", got)
		}
		rec, err := os.Stat(b.m.recordPath(w.TaskID))
		if err != nil || rec.Mode().Perm() != 0o600 {
			t.Errorf("record of %s: %v; want mode 0600", w.TaskID, err)
		}
	}
	if info, err := os.Stat(filepath.Join(b.root, RecordsDir)); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("records directory: %v; want mode 0700", err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 2*5)
	for _, w := range []*Workspace{wa, wb} {
		wg.Go(func() {
			for i := range 5 {
				name := fmt.Sprintf("%s-%d.txt", w.TaskID, i)
				if err := os.WriteFile(filepath.Join(w.Dir, name), []byte(w.TaskID+"\n"), 0o600); err != nil {
					errs <- err
					return
				}
				for _, args := range [][]string{{"add", name}, {"commit", "-q", "-m", name}} {
					if out, err := gitErr(w.Dir, args...); err != nil {
						errs <- fmt.Errorf("%s: git %v: %v: %s", w.TaskID, args, err, out)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Nothing of the repository changed while they ran: no branch, no
	// worktree.
	if got := git(t, b.repo, "for-each-ref", "refs/heads/agent/"); got != "" {
		t.Errorf("the repository has branches of the tasks before the agent brought any back: %s", got)
	}
	if got := git(t, b.repo, "worktree", "list", "--porcelain"); strings.Count(got, "worktree ") != 1 {
		t.Errorf("the repository has worktrees: %s", got)
	}
	for _, pair := range [][2]*Workspace{{wa, wb}, {wb, wa}} {
		w, other := pair[0], pair[1]
		head := b.bringBack(w.TaskID)
		if got := git(t, b.repo, "show", w.Branch+":"+w.TaskID+"-4.txt"); got != w.TaskID || git(t, b.repo, "rev-parse", w.Branch) != head {
			t.Errorf("the repository's %s holds %q, want the task's last commit %s", w.Branch, got, head)
		}
		c := b.changes(w.TaskID)
		if len(c.Commits) != 5 || c.Files != 5 || c.Insertions != 5 || c.Deletions != 0 || c.Uncommitted {
			t.Errorf("changes of %s: %+v; want its 5 commits of one line each, nothing else", w.TaskID, c)
		}
		for _, cm := range c.Commits {
			if !strings.HasPrefix(cm.Subject, w.TaskID+"-") {
				t.Errorf("%s's branch holds %q", w.TaskID, cm.Subject)
			}
		}
		if _, err := os.Stat(filepath.Join(w.Dir, other.TaskID+"-0.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's file is in %s's worktree: %v", other.TaskID, w.TaskID, err)
		}
	}
	if got := git(t, b.repo, "rev-parse", "main"); got != mainBefore {
		t.Errorf("main moved from %s to %s", mainBefore, got)
	}
	if got := git(t, b.repo, "symbolic-ref", "--short", "HEAD"); got != "main" {
		t.Errorf("the checkout is on %s, want main", got)
	}
	if got := git(t, b.repo, "status", "--porcelain"); got != "" {
		t.Errorf("the checkout changed: %q", got)
	}
}

// The changes report counts exactly: commits since the base, oldest
// first; the diff stat of the worktree against the base, committed,
// uncommitted and untracked alike.
func TestChangesSaysWhatTheTaskDid(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	w := b.prepare("t1", "")
	if c := b.changes("t1"); len(c.Commits) != 0 || c.Files != 0 || c.Uncommitted || c.Head != w.BaseCommit {
		t.Errorf("fresh workspace: %+v; want nothing changed, head at the base", c)
	}
	// Commit 1: README's second line changed (+1 -1), new.txt of 2 lines.
	write(t, w.Dir, "README", "one\nTWO\nthree\n", "new.txt", "x\ny\n")
	git(t, w.Dir, "add", "-A")
	git(t, w.Dir, "commit", "-q", "-m", "change README, add new.txt")
	// Commit 2: old.txt (4 lines) removed.
	git(t, w.Dir, "rm", "-q", "old.txt")
	git(t, w.Dir, "commit", "-q", "-m", "remove old.txt")
	// Not committed: a line added to new.txt, an untracked file of 3
	// lines, a binary untracked file, and an ignored file (not counted).
	write(t, w.Dir, "new.txt", "x\ny\nz\n", "sub/untracked.go", "package a\n\nfunc f() {}", "bin.dat", "\x00\x01\x02", "debug.log", "ignored\n")

	c := b.changes("t1")
	head := git(t, w.Dir, "rev-parse", "HEAD")
	want := state.Changes{Repo: "app", Branch: "agent/t1", Base: "main", BaseCommit: w.BaseCommit, Head: head, Uncommitted: true,
		// README, new.txt, old.txt, sub/untracked.go, bin.dat
		Files: 5, Insertions: 1 + 3 + 3, Deletions: 1 + 4, Path: w.Dir}
	if c.Repo != want.Repo || c.Branch != want.Branch || c.Base != want.Base || c.BaseCommit != want.BaseCommit || c.Head != want.Head ||
		c.Uncommitted != want.Uncommitted || c.Files != want.Files || c.Insertions != want.Insertions || c.Deletions != want.Deletions || c.Path != want.Path {
		t.Errorf("changes:\n got %+v\nwant %+v", *c, want)
	}
	if len(c.Commits) != 2 || c.Commits[0].Subject != "change README, add new.txt" || c.Commits[1].Subject != "remove old.txt" ||
		c.Commits[1].SHA != head || c.CommitsCut != 0 {
		t.Errorf("commits %+v (cut %d); want the two, oldest first", c.Commits, c.CommitsCut)
	}
}

// A branch of more commits than a result lists: the oldest
// MaxChangesCommits, and how many more.
func TestChangesCutsTheCommitsItLists(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	w := b.prepare("many", "")
	n := state.MaxChangesCommits + 3
	for i := range n {
		git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", fmt.Sprintf("c%d", i))
	}
	c := b.changes("many")
	if len(c.Commits) != state.MaxChangesCommits || c.CommitsCut != 3 || c.Commits[0].Subject != "c0" {
		t.Errorf("%d commits listed, %d cut, first %q; want %d, 3, c0", len(c.Commits), c.CommitsCut, c.Commits[0].Subject, state.MaxChangesCommits)
	}
}

// A replay starts from a clean slate, and loses nothing: what the
// earlier attempt committed is brought back first, and what it left
// (its commits, and its changes no commit holds, committed on top by
// the agent; not its ignored files) kept on refs/agent/kept/ID/attempt-N;
// then the clone is made again at the base, every change, untracked and
// ignored file gone. The replay's own end brings back what it made, the
// base if nothing; the workspace is kept while the kept ref alone holds
// the earlier work, and its removal takes the ref with it.
func TestResetKeepsWhatTheAttemptLeftAndGoesBackToTheBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("r", "")
	write(t, w.Dir, "README", "changed\n")
	git(t, w.Dir, "commit", "-q", "-am", "work")
	work := git(t, w.Dir, "rev-parse", "HEAD")
	write(t, w.Dir, "old.txt", "dirty\n", "untracked/x", "x", "build.log", "ignored")
	git(t, w.Dir, "config", "alias.planted", "status")
	kept, err := b.m.Reset(ctx, "r", 1)
	if err != nil {
		t.Fatal(err)
	}
	if kept != "refs/agent/kept/r/attempt-1" {
		t.Fatalf("kept on %q, want refs/agent/kept/r/attempt-1", kept)
	}
	if got := git(t, b.repo, "rev-parse", "agent/r"); got != work {
		t.Errorf("the repository's branch at %s after the reset, want the earlier attempt's work %s", got, work)
	}
	// The kept commit: the files as the attempt left them, on its work,
	// by the agent.
	if got := git(t, b.repo, "rev-parse", kept+"^"); got != work {
		t.Errorf("the kept commit's parent is %s, want the attempt's commit %s", got, work)
	}
	if got := git(t, b.repo, "show", kept+":old.txt") + "|" + git(t, b.repo, "show", kept+":untracked/x"); got != "dirty|x" {
		t.Errorf("the kept commit holds old.txt|untracked/x = %q, want dirty|x", got)
	}
	if out, err := gitErr(b.repo, "cat-file", "-e", kept+":build.log"); err == nil {
		t.Errorf("the kept commit holds the ignored build.log: %s", out)
	}
	if got := git(t, b.repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", kept); !strings.HasPrefix(got, b.m.Author.String()+"|"+b.m.Author.String()+"|agent: what attempt 1 of task r left uncommitted") ||
		!strings.Contains(got, "Agent-Task: r") {
		t.Errorf("the kept commit: %q", got)
	}
	if got := git(t, w.Dir, "rev-parse", "agent/r"); got != w.BaseCommit {
		t.Errorf("the clone's branch at %s after the reset, want the base %s", got, w.BaseCommit)
	}
	if got := git(t, w.Dir, "status", "--porcelain", "--ignored"); got != "" {
		t.Errorf("clone after reset: %q, want clean", got)
	}
	if got, _ := os.ReadFile(filepath.Join(w.Dir, "README")); string(got) != "one\ntwo\nthree\n" {
		t.Errorf("README after reset: %q", got)
	}
	if out, err := gitErr(w.Dir, "config", "alias.planted"); err == nil {
		t.Errorf("the clone's config of before survived the reset: %s", out)
	}
	if head := b.bringBack("r"); head != w.BaseCommit {
		t.Errorf("the replay's end brought back %s, want the base %s", head, w.BaseCommit)
	}
	if got := git(t, b.repo, "rev-parse", "agent/r"); got != w.BaseCommit {
		t.Errorf("the repository's branch at %s after the replay, want the base %s", got, w.BaseCommit)
	}
	// The kept ref alone holds the work and the snapshot: two commits.
	i := b.info("r")
	if i.Commits != 2 || len(i.KeptRefs) != 1 || i.KeptRefs[0] != kept {
		t.Errorf("after the replay: %s, kept refs %v; want 2 commits kept on %s", i.State(), i.KeptRefs, kept)
	}
	if _, err := b.m.Remove(ctx, "r", false); !errors.Is(err, ErrKept) {
		t.Errorf("remove of a workspace whose kept ref alone holds work: %v, want it refused", err)
	}
	// A second replay, with nothing new: nothing more kept.
	if again, err := b.m.Reset(ctx, "r", 2); err != nil || again != "" {
		t.Errorf("a reset with nothing to keep kept %q (%v)", again, err)
	}
	if _, err := b.m.Remove(ctx, "r", true); err != nil {
		t.Fatal(err)
	}
	if out, err := gitErr(b.repo, "for-each-ref", "refs/agent/"); err != nil || out != "" {
		t.Errorf("refs left after removal: %q %v", out, err)
	}
}

// Remove never loses work unless forced: commits on no other branch, or
// uncommitted changes, keep the workspace, and say so; once merged, it
// goes, with its branch and the repository's record of it.
func TestRemoveKeepsWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("k", "")
	write(t, w.Dir, "feature.txt", "f\n")
	git(t, w.Dir, "add", "feature.txt")
	git(t, w.Dir, "commit", "-q", "-m", "feature")
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "more")
	write(t, w.Dir, "README", "dirty\n")
	b.bringBack("k")

	i, err := b.m.Remove(ctx, "k", false)
	if !errors.Is(err, ErrKept) || i.Commits != 2 || !i.Uncommitted {
		t.Fatalf("remove: %v, %+v; want ErrKept with 2 commits and uncommitted changes", err, i)
	}
	if want := "2 commits not on main, uncommitted changes"; !strings.Contains(err.Error(), want) || i.State() != "kept: "+want {
		t.Errorf("error %q, state %q; want them to say %q", err, i.State(), want)
	}
	git(t, w.Dir, "checkout", "-q", "--", "README")
	if _, err := b.m.Remove(ctx, "k", false); err == nil || !strings.Contains(err.Error(), "2 commits not on main") || strings.Contains(err.Error(), "uncommitted") {
		t.Errorf("remove with commits only: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "feature.txt")); err != nil {
		t.Fatalf("refused removal touched the worktree: %v", err)
	}
	// Merged into main, the commits are not lost with the branch.
	git(t, b.repo, "merge", "-q", "--ff-only", "agent/k")
	if i := b.info("k"); i.Kept() || i.State() != "clean" {
		t.Errorf("after merge: %+v (%s), want clean", i, i.State())
	}
	if _, err := b.m.Remove(ctx, "k", false); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{w.Dir, w.view()} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", dir, err)
		}
	}
	if out, err := gitErr(b.repo, "rev-parse", "--verify", "-q", "agent/k"); err == nil {
		t.Errorf("branch agent/k still there: %s", out)
	}
	if got := git(t, b.repo, "worktree", "list", "--porcelain"); strings.Contains(got, w.Dir) {
		t.Errorf("repository still lists the worktree: %s", got)
	}
	if _, err := b.m.Get("k"); !errors.Is(err, ErrNoWorkspace) {
		t.Errorf("record still there: %v", err)
	}
	if got := git(t, b.repo, "log", "-1", "--format=%s", "main"); got != "more" {
		t.Errorf("main's work lost: last commit %q", got)
	}
}

// A forced removal drops the work, and says what it dropped.
func TestRemoveForcedSaysWhatItDropped(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	w := b.prepare("f", "")
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "doomed")
	b.bringBack("f")
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "doomed too, in the clone only")
	write(t, w.Dir, "scratch", "s")
	i, err := b.m.Remove(context.Background(), "f", true)
	if err != nil || i.Commits != 2 || !i.Uncommitted {
		t.Fatalf("forced remove: %v, %+v; want it to report 2 commits and uncommitted changes", err, i)
	}
	if out, err := gitErr(b.repo, "rev-parse", "--verify", "-q", "agent/f"); err == nil {
		t.Errorf("branch still there: %s", out)
	}
	if _, err := os.Stat(w.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("worktree still there: %v", err)
	}
}

// A commit that is on another branch (pushed, say) is not lost with the
// task's branch.
func TestCommitsOnAnotherBranchAreNotLost(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	w := b.prepare("p", "")
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "saved")
	b.bringBack("p")
	if i := b.info("p"); i.Commits != 1 {
		t.Fatalf("before: %d commits to lose, want 1", i.Commits)
	}
	git(t, b.repo, "branch", "saved", "agent/p")
	if i := b.info("p"); i.Kept() {
		t.Errorf("with the commit on another branch: %s, want clean", i.State())
	}
}

// Prepare again (an agent restarting) gives the workspace as it is; a
// different repository or base for the same task is refused.
func TestPrepareIsIdempotent(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	other := newRepo(t)
	m, err := New(b.root, []Repo{{Name: "app", Path: b.repo}, {Name: "other", Path: other}})
	if err != nil {
		t.Fatal(err)
	}
	b.m = m
	w := b.prepare("i", "")
	write(t, w.Dir, "wip", "in progress\n")
	again := b.prepare("i", "")
	if *again != *w {
		t.Errorf("second prepare: %+v, want %+v", again, w)
	}
	if got, err := os.ReadFile(filepath.Join(w.Dir, "wip")); err != nil || string(got) != "in progress\n" {
		t.Errorf("work in progress after a second prepare: %q, %v", got, err)
	}
	if _, err := b.m.Prepare(context.Background(), "i", "app", "main"); err != nil {
		t.Errorf("prepare naming the base it was made from: %v", err)
	}
	if _, err := b.m.Prepare(context.Background(), "i", "other", ""); err == nil || !strings.Contains(err.Error(), `repository "app", not "other"`) {
		t.Errorf("prepare with another repository: %v", err)
	}
	git(t, b.repo, "tag", "v1")
	if _, err := b.m.Prepare(context.Background(), "i", "app", "v1"); err == nil || !strings.Contains(err.Error(), "made from main, not v1") {
		t.Errorf("prepare with another base: %v", err)
	}
}

// A task is made from the base it names: a tag, a branch, a commit.
func TestPrepareFromABase(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	first := git(t, b.repo, "rev-parse", "HEAD")
	git(t, b.repo, "tag", "v1")
	git(t, b.repo, "switch", "-q", "-c", "dev")
	git(t, b.repo, "commit", "-q", "--allow-empty", "-m", "on dev")
	dev := git(t, b.repo, "rev-parse", "HEAD")
	for _, c := range []struct{ id, base, name, commit string }{
		{"from-tag", "v1", "v1", first},
		{"from-main", "main", "main", first},
		{"from-head", "", "dev", dev},
		{"from-sha", first[:12], first[:12], first},
	} {
		w := b.prepare(c.id, c.base)
		if w.Base != c.name || w.BaseCommit != c.commit || git(t, w.Dir, "rev-parse", "HEAD") != c.commit {
			t.Errorf("%s: base %q at %s, want %q at %s", c.id, w.Base, w.BaseCommit, c.name, c.commit)
		}
	}
}

// A repository the agent does not serve, and a base it does not have,
// are refused clearly, leaving nothing behind.
func TestPrepareRefusesWhatItCannotServe(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	_, err := b.m.Prepare(context.Background(), "u", "nope", "")
	if !errors.Is(err, ErrNotServed) || !strings.HasSuffix(err.Error(), `repository "nope" is not served by this agent (it serves: app)`) {
		t.Errorf("unknown repository: %v", err)
	}
	_, err = b.m.Prepare(context.Background(), "u", "app", "no-such-branch")
	if err == nil || err.Error() != `base "no-such-branch" is not a branch, tag or commit of repository "app"` {
		t.Errorf("unknown base: %v", err)
	}
	_, err = b.m.Prepare(context.Background(), "u", "app", "--upload-pack=evil")
	if err == nil || !strings.Contains(err.Error(), "is not a branch, tag or commit") {
		t.Errorf("a base that looks like an option: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b.root, "u")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused prepare left %s: %v", filepath.Join(b.root, "u"), err)
	}
	if out, err := gitErr(b.repo, "rev-parse", "--verify", "-q", "agent/u"); err == nil {
		t.Errorf("a refused prepare left a branch: %s", out)
	}
	for _, id := range []string{"", "../x", ".hidden", "a/b"} {
		if _, err := b.m.Prepare(context.Background(), id, "app", ""); err == nil {
			t.Errorf("task id %q accepted", id)
		}
	}
}

// New checks the repositories: names, paths, duplicates.
func TestNewChecksTheRepositories(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	notRepo := t.TempDir()
	root := t.TempDir()
	for _, c := range []struct {
		repos []Repo
		want  string
	}{
		{[]Repo{{Name: "a b", Path: repo}}, `repository name "a b": want letters`},
		{[]Repo{{Name: "a", Path: repo}, {Name: "a", Path: repo}}, `repository "a" is named twice`},
		{[]Repo{{Name: "a"}}, `repository "a": no path`},
		{[]Repo{{Name: "a", Path: filepath.Join(notRepo, "missing")}}, `repository "a": stat `},
		{[]Repo{{Name: "a", Path: notRepo}}, `repository "a": ` + notRepo + ` is not a git repository`},
	} {
		_, err := New(root, c.repos)
		if !errors.Is(err, ErrBadRepo) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("New(%v): %v; want one line with %q", c.repos, err, c.want)
		}
	}
	m, err := New(root, []Repo{{Name: "b", Path: repo}, {Name: "a", Path: repo + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Serves("a") || !m.Serves("b") || m.Serves("c") || strings.Join(m.Names(), ",") != "b,a" {
		t.Errorf("serves a %v, b %v, c %v; names %v", m.Serves("a"), m.Serves("b"), m.Serves("c"), m.Names())
	}
}

// List finds every workspace with its size and what removing it would
// lose; DiskUsage adds up the sizes.
func TestListAndDiskUsage(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	clean := b.prepare("clean", "")
	committed := b.prepare("committed", "")
	dirty := b.prepare("dirty", "")
	git(t, committed.Dir, "commit", "-q", "--allow-empty", "-m", "x")
	write(t, dirty.Dir, "big", strings.Repeat("x", 100_000))
	list, err := b.m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Info{}
	for _, i := range list {
		got[i.TaskID] = i
	}
	if len(list) != 3 || got["clean"].State() != "clean" || got["committed"].State() != "kept: 1 commit not on main" ||
		got["dirty"].State() != "kept: uncommitted changes" {
		t.Errorf("list: %+v", list)
	}
	if got["dirty"].Bytes < 100_000 || got["clean"].Bytes <= 0 || got["clean"].Repo != "app" || got["clean"].Branch != "agent/clean" || got["clean"].Dir != clean.Dir {
		t.Errorf("list: %+v", got)
	}
	bytes, count := b.m.DiskUsage()
	if count != 3 || bytes != got["clean"].Bytes+got["committed"].Bytes+got["dirty"].Bytes {
		t.Errorf("disk usage %d bytes in %d, want the sum of %+v", bytes, count, list)
	}
	// A manager that serves nothing still lists and removes them.
	none, err := New(b.root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := none.List(context.Background()); err != nil || len(l) != 3 {
		t.Errorf("list without repositories: %d, %v", len(l), err)
	}
	if _, err := none.Remove(context.Background(), "clean", false); err != nil {
		t.Errorf("remove without repositories: %v", err)
	}
}

// The repository's branch moved after the agent brought the work back (a
// person reset it): the agent does not overwrite it, and the work it
// brought back still counts, so cleanup does not take the moved branch
// for saved work.
func TestABranchMovedInTheRepositoryIsNotOverwritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBed(t)
	w := b.prepare("victim", "")
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "the work")
	work := b.bringBack("victim")
	base := git(t, b.repo, "rev-parse", "main")
	git(t, b.repo, "update-ref", "refs/heads/agent/victim", base)
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "more work")
	if _, err := b.m.BringBack(ctx, "victim"); err == nil || !strings.Contains(err.Error(), "moved to "+base) {
		t.Errorf("bring back over a moved branch: %v", err)
	}
	if got := git(t, b.repo, "rev-parse", "agent/victim"); got != base {
		t.Errorf("the moved branch was overwritten: %s", got)
	}
	git(t, w.Dir, "reset", "-q", "--hard", base)
	if _, err := b.m.Remove(ctx, "victim", false); !errors.Is(err, ErrKept) || !strings.Contains(err.Error(), "1 commit not on main") {
		t.Fatalf("remove after the branch was moved: %v; want it kept", err)
	}
	if w, _ := b.m.Get("victim"); w.Brought != work {
		t.Errorf("the record says %q was brought back, want %s", w.Brought, work)
	}
}

// A Prepare (or a Reset) cut short by a crash, after the record and
// before the clone took its place, is finished by the next: the clone
// is put in place. A Prepare cut short before the record leaves nothing
// of the repository's, and is made again. A branch of the task's name
// already in the repository is never taken over.
func TestPrepareAfterACrashMidway(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	w := b.prepare("crashed", "")
	write(t, w.Dir, "wip", "w")
	if err := os.Rename(w.Dir, w.making()); err != nil {
		t.Fatal(err)
	}
	if again := b.prepare("crashed", ""); again.Dir != w.Dir {
		t.Fatalf("workspace %+v", again)
	}
	if got, err := os.ReadFile(filepath.Join(w.Dir, "wip")); err != nil || string(got) != "w" {
		t.Errorf("the clone was not put in place: %q, %v", got, err)
	}
	// Cut short before the record: a half-made clone aside.
	half := filepath.Join(b.root, RecordsDir, "half.new")
	write(t, half, "leftover", "x")
	w = b.prepare("half", "")
	if _, err := os.Stat(filepath.Join(w.Dir, "leftover")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a half-made clone's file is in the new one: %v", err)
	}

	git(t, b.repo, "branch", "agent/mine", "main")
	if _, err := b.m.Prepare(context.Background(), "mine", "app", ""); err == nil || !strings.Contains(err.Error(), "already has a branch agent/mine") {
		t.Errorf("prepare over a branch of the repository: %v", err)
	}
}

// The agent brings the task's branch back to the repository only when
// it moved: not while it is at the base, then at each new head, with a
// reflog entry saying whose work it is.
func TestBringBackWhenTheBranchMoved(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	w := b.prepare("bb", "")
	if head := b.bringBack("bb"); head != w.BaseCommit {
		t.Errorf("bring back at the base: %s", head)
	}
	if out, err := gitErr(b.repo, "rev-parse", "--verify", "-q", "refs/heads/agent/bb"); err == nil {
		t.Errorf("a branch at the base was brought back: %s", out)
	}
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "one")
	one := b.bringBack("bb")
	if got := git(t, b.repo, "rev-parse", "agent/bb"); got != one {
		t.Errorf("agent/bb at %s, want %s", got, one)
	}
	if got := git(t, b.repo, "reflog", "-1", "--format=%gs", "agent/bb"); got != "agent: the work of task bb" {
		t.Errorf("reflog says %q", got)
	}
	if again := b.bringBack("bb"); again != one || git(t, b.repo, "reflog", "--format=%gs", "agent/bb") != "agent: the work of task bb" {
		t.Errorf("bringing back an unmoved branch wrote again")
	}
}

// A repository a confined task could write (in /tmp, or in a hierarchy
// the operator lets tasks write) is refused, in one line naming it,
// unless it is also in a hierarchy denied to tasks.
func TestCheckOutOfReach(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	real, err := filepath.EvalSymlinks(b.repo)
	if err != nil {
		t.Fatal(err)
	}
	parent := filepath.Dir(filepath.Dir(real))
	for _, c := range []struct {
		writable, denied []string
		want             string
	}{
		{[]string{"/dev", "/nowhere"}, nil, ""},
		{[]string{"/dev", parent}, nil, `repository "app": ` + b.repo + " is in " + parent + ", which every confined task may write"},
		{[]string{parent}, []string{filepath.Dir(real)}, ""},
	} {
		err := b.m.CheckOutOfReach(c.writable, c.denied)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("writable %v, denied %v: %v", c.writable, c.denied, err)
		case c.want != "" && (!errors.Is(err, ErrBadRepo) || !strings.Contains(fmt.Sprint(err), c.want) || strings.Contains(fmt.Sprint(err), "\n")):
			t.Errorf("writable %v, denied %v: %v; want one line with %q", c.writable, c.denied, err, c.want)
		}
	}
}

// A repository of SHA-256 ids is served as one of SHA-1: the clone and
// the view are made with its object format, and its 64-digit ids read.
func TestASHA256Repository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	git(t, t.TempDir(), "init", "-q", "--object-format=sha256", "-b", "main", repo)
	write(t, repo, "README", "one\n")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "first")
	m, err := New(filepath.Join(t.TempDir(), "work"), []Repo{{Name: "app", Path: repo}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Prepare(ctx, "s", "app", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, w.Dir, "README", "two\n")
	git(t, w.Dir, "commit", "-q", "-am", "second")
	head, err := m.BringBack(ctx, "s")
	if err != nil || len(head) != 64 || git(t, repo, "rev-parse", "agent/s") != head {
		t.Fatalf("bring back: %q, %v", head, err)
	}
	if c, err := m.Changes(ctx, "s"); err != nil || len(c.Commits) != 1 || c.Files != 1 || c.Uncommitted {
		t.Errorf("changes: %+v, %v", c, err)
	}
	if _, err := m.Reset(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Remove(ctx, "s", true); err != nil {
		t.Fatal(err)
	}
	if out, err := gitErr(repo, "rev-parse", "--verify", "-q", "agent/s"); err == nil {
		t.Errorf("branch left: %s", out)
	}
}

// A shallow repository (cloned with --depth) is served: its clone and
// the view know where its history ends, and the work comes back.
func TestAShallowRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	full := newRepo(t)
	git(t, full, "commit", "-q", "--allow-empty", "-m", "second")
	shallow := filepath.Join(t.TempDir(), "shallow")
	git(t, t.TempDir(), "clone", "-q", "--depth", "1", "file://"+full, shallow)
	m, err := New(filepath.Join(t.TempDir(), "work"), []Repo{{Name: "app", Path: shallow}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Prepare(ctx, "sh", "app", "")
	if err != nil {
		t.Fatal(err)
	}
	git(t, w.Dir, "commit", "-q", "--allow-empty", "-m", "work")
	if got := git(t, w.Dir, "rev-list", "--count", "HEAD"); got != "2" {
		t.Errorf("the clone sees %s commits, want 2 (the shallow one and the work)", got)
	}
	head, err := m.BringBack(ctx, "sh")
	if err != nil || git(t, shallow, "rev-parse", "agent/sh") != head {
		t.Fatalf("bring back: %q, %v", head, err)
	}
	if i, err := m.Inspect(ctx, "sh"); err != nil || i.Commits != 1 || i.Err != "" {
		t.Errorf("inspect: %+v, %v", i, err)
	}
}
