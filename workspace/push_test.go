package workspace

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// pushBed is a bed whose repository has a remote, origin: a bare
// repository, and pushes there.
func pushBed(t *testing.T) (*bed, string) {
	t.Helper()
	b := &bed{t: t, repo: newRepo(t), root: filepath.Join(t.TempDir(), "work")}
	remote := filepath.Join(t.TempDir(), "remote.git")
	git(t, t.TempDir(), "init", "-q", "--bare", remote)
	git(t, b.repo, "remote", "add", "origin", remote)
	git(t, b.repo, "push", "-q", "origin", "main")
	var err error
	if b.m, err = New(b.root, []Repo{{Name: "app", Path: b.repo, Push: "origin"}}); err != nil {
		t.Fatal(err)
	}
	return b, remote
}

// Push sends the branch the agent brought back, and only it, to the
// remote; again, nothing changes; a commit someone else pushed there
// since is not overwritten; a remote's credentials never show in an
// error.
func TestPush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, remote := pushBed(t)
	w := b.prepare("p", "main")
	write(t, w.Dir, "work.txt", "work\n")
	git(t, w.Dir, "add", "work.txt")
	git(t, w.Dir, "commit", "-q", "-m", "work")
	git(t, w.Dir, "tag", "a-tag")
	git(t, w.Dir, "branch", "other")
	head := b.bringBack("p")
	git(t, b.repo, "tag", "person-tag")
	to, commit, err := b.m.Push(ctx, "p")
	if err != nil || to != "origin" || commit != head {
		t.Fatalf("push: %q %q %v; want origin %s", to, commit, err, head)
	}
	if got := git(t, remote, "for-each-ref", "--format=%(refname) %(objectname)"); got != "refs/heads/agent/p "+head+"\nrefs/heads/main "+w.BaseCommit {
		t.Errorf("the remote holds:\n%s", got)
	}
	if _, _, err := b.m.Push(ctx, "p"); err != nil {
		t.Errorf("push again: %v", err)
	}
	// A person pushes a fix on the task's branch: the agent's next push
	// (a replay's work) does not overwrite it.
	other := filepath.Join(t.TempDir(), "other")
	git(t, t.TempDir(), "clone", "-q", remote, other)
	git(t, other, "checkout", "-q", "agent/p")
	git(t, other, "commit", "-q", "--allow-empty", "-m", "a person's fix")
	git(t, other, "push", "-q", "origin", "agent/p")
	fix := git(t, other, "rev-parse", "HEAD")
	write(t, w.Dir, "more.txt", "more\n")
	if _, err := b.m.Commit(ctx, "p", "more", Author{}); err != nil {
		t.Fatal(err)
	}
	b.bringBack("p")
	if _, _, err := b.m.Push(ctx, "p"); err == nil || !strings.Contains(err.Error(), "moved since the agent last pushed it; not overwritten") {
		t.Errorf("a push over a person's fix: %v", err)
	}
	if got := git(t, remote, "rev-parse", "agent/p"); got != fix {
		t.Errorf("the remote's branch at %s, want the person's fix %s", got, fix)
	}
	git(t, b.repo, "remote", "set-url", "origin", "https://someone:s3cret-token@127.0.0.1:1/app.git")
	_, _, err = b.m.Push(ctx, "p")
	if err == nil || strings.Contains(err.Error(), "s3cret-token") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a push that fails: %v; want an error of one line without the credentials", err)
	}
}

// A pull request asks to merge into the task's base when it is a
// branch, else into the remote's default branch.
func TestPullBase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, _ := pushBed(t)
	b.prepare("onmain", "main")
	if got, err := b.m.PullBase(ctx, "onmain"); got != "main" || err != nil {
		t.Errorf("base main: %q, %v", got, err)
	}
	b.prepare("onsha", git(t, b.repo, "rev-parse", "main"))
	if _, err := b.m.PullBase(ctx, "onsha"); err == nil {
		t.Error("a commit for base, and no default branch known: no error")
	}
	git(t, b.repo, "fetch", "-q", "origin")
	git(t, b.repo, "remote", "set-head", "origin", "main")
	if got, err := b.m.PullBase(ctx, "onsha"); got != "main" || err != nil {
		t.Errorf("base a commit: %q, %v; want the remote's default branch", got, err)
	}
	if err := b.m.CheckRemote(ctx, "app", "upstream"); err == nil || !strings.Contains(err.Error(), `has no remote "upstream"`) {
		t.Errorf("check a remote that is not there: %v", err)
	}
	if err := b.m.CheckRemote(ctx, "app", "--upload-pack=x"); err == nil {
		t.Error("an option for a remote's name was taken")
	}
}
