package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/mail"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Author is who the agent's commits are by, author and committer both.
type Author struct {
	Name, Email string
}

// DefaultAuthor is who the agent's commits are by unless its config
// names someone: agent <agent@HOSTNAME>.
func DefaultAuthor() Author {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return Author{Name: "agent", Email: "agent@" + host}
}

// ParseAuthor reads an author as git writes one, "NAME <EMAIL>"; empty
// is the zero Author (DefaultAuthor at commit time).
func ParseAuthor(s string) (Author, error) {
	if strings.TrimSpace(s) == "" {
		return Author{}, nil
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name == "" || strings.ContainsAny(s, "\n\r\x00") {
		return Author{}, fmt.Errorf("%q: want NAME <EMAIL>, as git writes an author", s)
	}
	return Author{Name: a.Name, Email: a.Address}, nil
}

// String is the author as git writes one: Name <email>.
func (a Author) String() string { return a.Name + " <" + a.Email + ">" }

// env is the author as git takes it from the environment, for both the
// author and the committer.
func (a Author) env() []string {
	if a.Name == "" {
		a = DefaultAuthor()
	}
	return []string{"GIT_AUTHOR_NAME=" + a.Name, "GIT_AUTHOR_EMAIL=" + a.Email, "GIT_COMMITTER_NAME=" + a.Name, "GIT_COMMITTER_EMAIL=" + a.Email}
}

// staged is the task's files staged on top of a commit in an index of
// the manager's: its path (a temporary file, removed by drop) and the
// tree it writes.
type staged struct {
	index, tree string
}

func (s staged) drop() { os.Remove(s.index) }

// stage stages the task's files as they are, on top of commit, in a
// copy of the view's index: what git sees changed (tracked files
// modified, deleted or replaced) and what it does not track and does
// not ignore. A nested repository the task made is left out (its
// commits are its own, nowhere to be fetched from), as is a FIFO, a
// socket or a device. The objects are written to objectDir (the view's
// own when empty). Git runs in the view, never with the clone's config,
// hooks, index or .git file; what the files and .gitattributes ask of
// git (a clean filter, line endings) only the person's own config can
// answer, as for their git in that directory.
func (w *Workspace) stage(ctx context.Context, g *taskGit, commit, objectDir string) (staged, error) {
	if err := w.ensureView(ctx); err != nil {
		return staged{}, err
	}
	tmp, err := copyTemp(filepath.Join(w.view(), "index"))
	if err != nil {
		return staged{}, err
	}
	s := staged{index: tmp}
	d := w.viewDirs(tmp)
	d.objectDir = objectDir
	fail := func(err error) (staged, error) {
		s.drop()
		return staged{}, err
	}
	if _, err := runGit(ctx, d, "read-tree", "-m", commit); err != nil {
		if _, err := runGit(ctx, d, "read-tree", commit); err != nil {
			return fail(err)
		}
	}
	_, _ = runGit(ctx, d, "update-index", "-q", "--refresh", "--ignore-submodules")
	out, err := runGit(ctx, d, "diff-files", "--name-only", "-z", "--ignore-submodules=all", "--no-renames")
	if err != nil {
		return fail(err)
	}
	paths := splitZ(out)
	if out, err = runGit(ctx, d, "ls-files", "--others", "--exclude-standard", "-z"); err != nil {
		return fail(err)
	}
	paths = append(paths, splitZ(out)...)
	var in strings.Builder
	for _, p := range paths {
		if g.stageable(p) {
			in.WriteString(p + "\x00")
		}
	}
	if in.Len() > 0 {
		if _, err := runGitIn(ctx, d, in.String(), "update-index", "--add", "--remove", "-z", "--stdin"); err != nil {
			return fail(err)
		}
	}
	tree, err := runGit(ctx, d, "write-tree")
	if err != nil {
		return fail(err)
	}
	s.tree = strings.TrimSpace(tree)
	return s, nil
}

// stageable reports whether the agent stages path (relative to the
// work tree, as git lists it): gone (a deletion), a regular file, a
// symbolic link (as a link, never followed) or a directory where a file
// was; not a nested repository git lists as "dir/", nor a special file.
func (g *taskGit) stageable(p string) bool {
	if strings.HasSuffix(p, "/") || p == "" {
		return false
	}
	info, err := g.root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return true
	case err != nil:
		return false
	}
	m := info.Mode()
	return m.IsRegular() || m&fs.ModeSymlink != 0 || m.IsDir()
}

// treeOf is the tree a commit names.
func (w *Workspace) treeOf(ctx context.Context, commit string) (string, error) {
	out, err := runGit(ctx, w.viewDirs(""), "rev-parse", "--verify", "-q", "--end-of-options", commit+"^{tree}")
	return strings.TrimSpace(out), err
}

// Commit commits what task taskID's attempt left in its files on its
// branch, in its clone: a commit whose parent is the branch's head and
// whose tree is the task's files as they are (see stage), by author
// (the manager's Author when empty), with message. The commit is made
// in the manager's view, its objects written to the clone's object
// directory (checked first), so that the task's git sees it; the
// clone's branch is then set to it, and, when the clone's HEAD is on
// that branch, its index to the commit's, so that a continue finds its
// work committed and nothing staged. Nothing of the task's git
// directory is run or followed (a link where the ref or the index is is
// replaced, not written through). It returns the new head, or "" when
// the files hold nothing the branch does not. The agent calls it at
// the end of an attempt, before BringBack, when nothing of the task
// runs.
func (m *Manager) Commit(ctx context.Context, taskID, message string, author Author) (string, error) {
	w, err := m.open(ctx, taskID)
	if err != nil {
		return "", err
	}
	g, err := w.openClone()
	if err != nil {
		return "", err
	}
	defer g.Close()
	head, err := w.branchHead(ctx, g)
	if err != nil {
		return "", err
	}
	s, err := w.stage(ctx, g, head, w.cloneObjects())
	if err != nil {
		return "", fmt.Errorf("workspace %s: %v", taskID, err)
	}
	defer s.drop()
	if was, err := w.treeOf(ctx, head); err != nil {
		return "", fmt.Errorf("workspace %s: %v", taskID, err)
	} else if was == s.tree {
		return "", nil
	}
	if author.Name == "" {
		author = m.Author
	}
	d := w.viewDirs("")
	d.objectDir, d.env = w.cloneObjects(), author.env()
	out, err := runGitIn(ctx, d, message, "commit-tree", "--no-gpg-sign", s.tree, "-p", head)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %v", taskID, err)
	}
	commit := strings.TrimSpace(out)
	if !isOID(commit, w.oidLen()) {
		return "", fmt.Errorf("workspace %s: git commit-tree said %q", taskID, clip(commit))
	}
	if err := g.setRef(w.ref(), head, commit); err != nil {
		return "", fmt.Errorf("workspace %s: %w", taskID, err)
	}
	if v, err := g.headValue(); err == nil && v.symbolic == w.ref() {
		if err := g.putIndex(s.index); err != nil {
			return "", fmt.Errorf("workspace %s: the commit %s is on its branch, but the clone's index was not set to it: %w", taskID, commit, err)
		}
	}
	// The stat cache of the files as they are now, for the next look.
	_ = os.Rename(s.index, filepath.Join(w.view(), "index"))
	return commit, nil
}

// headValue is the clone's HEAD as its file says, not followed.
func (g *taskGit) headValue() (refValue, error) {
	b, err := g.readSmall("HEAD", 4096)
	if err != nil {
		return refValue{}, err
	}
	return g.parseRef("HEAD", b)
}

// setRef points the clone's ref name at oid, if it still names was: a
// loose ref file written anew beside it and renamed over it, so that a
// link the task left there is replaced, never written through.
func (g *taskGit) setRef(name, was, oid string) error {
	v, err := g.ref(name)
	if err != nil {
		return err
	}
	if v.oid != was {
		return refusef("the task's %s moved (to %q) while the agent committed on it", name, clip(v.oid+v.symbolic))
	}
	p := path.Join(".git", name)
	if err := g.root.MkdirAll(path.Dir(p), 0o755); err != nil {
		return fault("the task's git directory", err)
	}
	return g.replace(p, strings.NewReader(oid+"\n"))
}

// putIndex makes the clone's index a copy of index.
func (g *taskGit) putIndex(index string) error {
	f, err := os.Open(index)
	if err != nil {
		return err
	}
	defer f.Close()
	return g.replace(".git/index", f)
}

// replace writes what r holds to the file p of the clone, by a new file
// renamed over it.
func (g *taskGit) replace(p string, r io.Reader) error {
	tmp := ".git/agent-write.tmp"
	_ = g.root.Remove(tmp)
	f, err := g.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fault("the task's git directory", err)
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = g.root.Rename(tmp, p)
	}
	if err != nil {
		_ = g.root.Remove(tmp)
		return fault("the task's git directory", err)
	}
	return nil
}
