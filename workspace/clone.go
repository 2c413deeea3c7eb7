package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// objectFormat is the init option for a repository whose ids have n hex
// digits.
func objectFormat(n int) string {
	if n == 64 {
		return "--object-format=sha256"
	}
	return "--object-format=sha1"
}

// makeClone makes a clone of w's repository in dir, on w's branch at
// commit: a git directory of its own, dir/.git, whose objects borrow the
// repository's (its alternates file names them; nothing is copied), and,
// when checkout, the commit's files. Nothing of the task has run in it:
// git may run there as the manager's.
func (w *Workspace) makeClone(ctx context.Context, dir, commit string, checkout bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	// Git's own init, not GIT_DIR's: the clone is not bare. No template:
	// no hooks, whatever init.templateDir says.
	if _, err := runGit(ctx, gitDirs{dir: filepath.Dir(dir)}, "init", "--quiet", "--template=", objectFormat(w.oidLen()),
		"--initial-branch="+w.Branch, "--", dir); err != nil {
		return err
	}
	git := filepath.Join(dir, ".git")
	if err := os.MkdirAll(filepath.Join(git, "objects", "info"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(git, "objects", "info", "alternates"), []byte(w.repoObjects()+"\n"), 0o644); err != nil {
		return err
	}
	// A shallow repository's history ends where its shallow file says:
	// the clone's must too, or git looks for parents nobody has.
	if b, err := os.ReadFile(filepath.Join(w.CommonDir, "shallow")); err == nil {
		if err := os.WriteFile(filepath.Join(git, "shallow"), b, 0o644); err != nil {
			return err
		}
	}
	d := gitDirs{dir: dir, gitDir: git, workTree: dir}
	// Commits made in the clone are by whom the repository says, as they
	// were in a worktree of it.
	for _, key := range []string{"user.name", "user.email"} {
		if v, err := runGit(ctx, w.repoDirs(), "config", "--file", filepath.Join(w.CommonDir, "config"), "--get", key); err == nil && strings.TrimSpace(v) != "" {
			if _, err := runGit(ctx, d, "config", "--file", filepath.Join(git, "config"), key, strings.TrimSpace(v)); err != nil {
				return err
			}
		}
	}
	if _, err := runGit(ctx, d, "update-ref", "--no-deref", w.ref(), commit); err != nil {
		return err
	}
	if checkout {
		_, err := runGit(ctx, d, "reset", "--quiet", "--hard", "--no-recurse-submodules")
		return err
	}
	_, err := runGit(ctx, d, "read-tree", commit)
	return err
}

// viewConfig is the config of the manager's view of a task's work:
// nothing runs (no hook, no file system monitor), no cache beside the
// task's objects is read (commit graph, multi-pack index, bitmaps), no
// reflog is kept and nothing is collected on its own. The git that
// sends the task's objects to the repository (upload-pack, in the
// view) reads this config and no other repository's.
const viewConfig = `[core]
	bare = false
	hooksPath = /dev/null
	fsmonitor = false
	commitGraph = false
	multiPackIndex = false
	logAllRefUpdates = false
[pack]
	useBitmaps = false
[gc]
	auto = 0
[maintenance]
	auto = false
`

// makeView makes (again) the manager's view of w's work: a git directory
// out of every task's reach whose objects borrow the repository's and,
// for a clone, the clone's.
func (w *Workspace) makeView(ctx context.Context) error {
	view := w.view()
	if err := os.RemoveAll(view); err != nil {
		return err
	}
	if _, err := runGit(ctx, gitDirs{dir: filepath.Dir(view), gitDir: view}, "init", "--quiet", "--template=", objectFormat(w.oidLen()), "--initial-branch=head"); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(view, "config"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(viewConfig)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	alternates := w.repoObjects() + "\n"
	if !w.legacy() {
		alternates += w.cloneObjects() + "\n"
	}
	if err := os.MkdirAll(filepath.Join(view, "objects", "info"), 0o700); err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(w.CommonDir, "shallow")); err == nil {
		if err := os.WriteFile(filepath.Join(view, "shallow"), b, 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(view, "objects", "info", "alternates"), []byte(alternates), 0o600)
}

// ensureView makes the view if it is not there (a workspace of an
// earlier agent's).
func (w *Workspace) ensureView(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(w.view(), "config")); err == nil {
		return nil
	}
	if err := os.MkdirAll(w.recordsDir(), 0o700); err != nil {
		return err
	}
	return w.makeView(ctx)
}

// viewDirs runs git in the view, on the task's files, with index as its
// index.
func (w *Workspace) viewDirs(index string) gitDirs {
	return gitDirs{dir: w.view(), gitDir: w.view(), workTree: w.Dir, indexFile: index}
}

// openClone opens the task's git directory and makes its objects fit to
// read (taskGit.checkObjects).
func (w *Workspace) openClone() (*taskGit, error) {
	g, err := openTaskGit(w.Dir, w.oidLen())
	if err != nil {
		return nil, err
	}
	if err := g.checkObjects(w.repoObjects()); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// branchHead is the commit the task's branch names in its clone, read as
// data: a symbolic ref, anything but an object id, or an id of no commit
// the clone holds is refused.
func (w *Workspace) branchHead(ctx context.Context, g *taskGit) (string, error) {
	v, err := g.ref(w.ref())
	switch {
	case errors.Is(err, errNoRef):
		return "", refusef("the task's branch %s is gone from its clone", w.Branch)
	case err != nil:
		return "", err
	case v.symbolic != "":
		return "", refusef("the task's branch %s is a symbolic ref (to %q), which the agent does not follow", w.Branch, clip(v.symbolic))
	}
	if err := w.ensureView(ctx); err != nil {
		return "", err
	}
	t, err := runGit(ctx, w.viewDirs(""), "cat-file", "-t", v.oid)
	if ctx.Err() != nil {
		return "", err
	}
	if err != nil || strings.TrimSpace(t) != "commit" {
		why := strings.TrimSpace(t)
		if err != nil {
			why = err.Error()
		}
		return "", refusef("the task's branch %s names %s, which is not a commit its clone holds (%s)", w.Branch, v.oid, clip(why))
	}
	return v.oid, nil
}

// repoBranch is the task's branch in the repository: its object id, or
// the ref it links to (never followed), or neither when there is none.
// Only the agent writes it there; an earlier agent let tasks write it.
func (w *Workspace) repoBranch(ctx context.Context) (refValue, error) {
	var ge *gitError
	out, err := runGit(ctx, w.repoDirs(), "symbolic-ref", "-q", w.ref())
	switch {
	case err == nil:
		return refValue{symbolic: strings.TrimSpace(out)}, nil
	case !errors.As(err, &ge):
		return refValue{}, err
	}
	// Not a link: rev-parse reads the ref itself.
	out, err = runGit(ctx, w.repoDirs(), "rev-parse", "--verify", "-q", w.ref())
	switch {
	case errors.As(err, &ge):
		return refValue{}, nil // no such branch
	case err != nil:
		return refValue{}, err
	}
	return refValue{oid: strings.TrimSpace(out)}, nil
}

// BringBack brings what task taskID's branch holds in its clone back to
// the repository, as its branch agent/TASK_ID there, when it has moved
// since the agent last did (and from the base, the first time): the
// branch is read as data; the objects it needs are fetched from the
// manager's view, with no hook, over the file protocol alone, checked
// as git checks what it receives; the ref is written by update-ref,
// never through a link, and only if it still holds what the agent last
// put there (or nothing). The agent calls it at the end of each attempt,
// and Reset before it starts over. It returns the branch's head; a
// branch the task made a link, or that names no commit, is refused
// (RefusedError).
func (m *Manager) BringBack(ctx context.Context, taskID string) (string, error) {
	w, err := m.open(ctx, taskID)
	if err != nil {
		return "", err
	}
	return m.bringBack(ctx, w)
}

func (m *Manager) bringBack(ctx context.Context, w *Workspace) (string, error) {
	g, err := w.openClone()
	if err != nil {
		return "", err
	}
	defer g.Close()
	head, err := w.branchHead(ctx, g)
	if err != nil {
		return "", err
	}
	if head == w.Brought || w.Brought == "" && head == w.BaseCommit {
		return head, nil
	}
	defer m.lock(w.CommonDir)()
	cur, err := w.repoBranch(ctx)
	switch {
	case err != nil:
		return "", err
	case cur.symbolic != "":
		return "", fmt.Errorf("repository %q: its branch %s is a symbolic ref (to %s), not the agent's; remove it (git update-ref --no-deref -d %s) for the task's work to come back", w.Repo, w.Branch, cur.symbolic, w.ref())
	case cur.oid != "" && cur.oid != w.Brought:
		return "", fmt.Errorf("repository %q: its branch %s moved to %s since the agent last brought the task's work back; not overwritten", w.Repo, w.Branch, cur.oid)
	}
	if err := w.fetch(ctx, head); err != nil {
		return "", err
	}
	old := cur.oid
	if old == "" {
		old = w.zeroOID()
	}
	if _, err := runGit(ctx, w.repoDirs(), "update-ref", "--no-deref", "-m", "agent: the work of task "+w.TaskID, w.ref(), head, old); err != nil {
		return "", fmt.Errorf("repository %q: %v", w.Repo, err)
	}
	w.Brought = head
	if err := m.save(w); err != nil {
		return "", err
	}
	return head, nil
}

// fetch brings commit, and the objects it needs, from the manager's view
// (the repository's objects, the clone's, the view's own) into the
// repository: git fetch from the view, over the file protocol alone,
// with no tags, no hooks, no submodules, no FETCH_HEAD, the objects
// checked as git checks what it receives. It writes no ref of the
// repository: the caller does, by update-ref --no-deref.
func (w *Workspace) fetch(ctx context.Context, commit string) error {
	if _, err := runGit(ctx, w.viewDirs(""), "update-ref", "--no-deref", "refs/heads/head", commit); err != nil {
		return err
	}
	if _, err := runGit(ctx, w.repoDirs(), "-c", "protocol.allow=never", "-c", "protocol.file.allow=always",
		"-c", "transfer.fsckObjects=true", "-c", "fetch.fsckObjects=true", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
		"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--no-auto-gc",
		w.view(), "refs/heads/head"); err != nil {
		return fmt.Errorf("repository %q: the task's commits were not fetched: %v", w.Repo, err)
	}
	return nil
}

// look is what the task's files are against a commit, as git sees them
// through the manager's view: the files changed since the commit
// (uncommitted), the untracked ones (not ignored), and, with base, the
// numstat of the files against base.
type look struct {
	changed, untracked []string
	numstat            string
}

// look reads the task's files against commit, and base if not empty,
// with an index of the manager's: made from commit, its stat cache
// kept in the view between looks. Nothing of what the task wrote in its
// git directory is read; what its files and .gitattributes ask of git
// is git's own (no filter or diff program but the person's own config
// names).
func (w *Workspace) look(ctx context.Context, commit, base string) (look, error) {
	var l look
	if err := w.ensureView(ctx); err != nil {
		return l, err
	}
	// A copy per look: looks by the agent and by agent workspaces ls at
	// once each have their own; the last one's cache stays.
	index := filepath.Join(w.view(), "index")
	tmp, err := copyTemp(index)
	if err != nil {
		return l, err
	}
	defer os.Remove(tmp)
	d := w.viewDirs(tmp)
	if _, err := runGit(ctx, d, "read-tree", "-m", commit); err != nil {
		if _, err := runGit(ctx, d, "read-tree", commit); err != nil {
			return l, err
		}
	}
	_, _ = runGit(ctx, d, "update-index", "-q", "--refresh", "--ignore-submodules")
	out, err := runGit(ctx, d, "diff-files", "--name-only", "-z", "--ignore-submodules=all", "--no-renames")
	if err != nil {
		return l, err
	}
	l.changed = splitZ(out)
	if out, err = runGit(ctx, d, "ls-files", "--others", "--exclude-standard", "-z"); err != nil {
		return l, err
	}
	l.untracked = splitZ(out)
	if base != "" {
		if l.numstat, err = runGit(ctx, d, "diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--ignore-submodules=all",
			"--numstat", "-z", base, "--"); err != nil {
			return l, err
		}
	}
	_ = os.Rename(tmp, index)
	return l, nil
}

// copyTemp copies file (if it is there) to a new file beside it, and
// returns the copy's name.
func copyTemp(file string) (string, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := file + "." + hex.EncodeToString(b)
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	src, err := os.Open(file)
	if err == nil {
		_, err = io.Copy(dst, src)
		src.Close()
	} else if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	if info, _ := os.Stat(tmp); info != nil && info.Size() == 0 {
		os.Remove(tmp) // git makes a new index, not one from an empty file
	}
	return tmp, nil
}

func splitZ(s string) []string {
	var out []string
	for rec := range strings.SplitSeq(s, "\x00") {
		if rec != "" {
			out = append(out, rec)
		}
	}
	return out
}
