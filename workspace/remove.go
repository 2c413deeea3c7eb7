package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/internal/durable"
)

// ErrKept: removing the workspace would lose work, and it was not forced.
var ErrKept = errors.New("workspace kept")

// Info is a workspace as List finds it: where it is, what it takes on
// disk, and what removing it would lose.
type Info struct {
	TaskID string `json:"task_id"`
	Repo   string `json:"repo"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
	Dir    string `json:"dir"`
	// Bytes is what the worktree takes on disk (the objects its commits
	// added are in the repository, not counted).
	Bytes int64 `json:"bytes"`
	// Commits counts the commits of the branch (and of the worktree's
	// HEAD) that are in no other branch, tag or remote, and not in the
	// base: removing the workspace would lose them.
	Commits int `json:"commits"`
	// Uncommitted: the worktree has changes no commit holds.
	Uncommitted bool `json:"uncommitted"`
	// Missing: the worktree's directory is gone; only the branch is left.
	Missing bool `json:"missing,omitempty"`
	// Err says why what removing it would lose could not be told; such a
	// workspace is kept.
	Err string `json:"error,omitempty"`
}

// Kept reports whether removing the workspace would lose work (or it
// cannot be told), so that only a person may remove it.
func (i Info) Kept() bool { return i.Commits > 0 || i.Uncommitted || i.Err != "" }

// State says in a few words whether the workspace can go: "clean", or
// "kept: 2 commits not on main, uncommitted changes".
func (i Info) State() string {
	if !i.Kept() {
		if i.Missing {
			return "clean (worktree gone)"
		}
		return "clean"
	}
	return "kept: " + i.Loses()
}

// Loses says what removing the workspace would lose; "" for nothing.
func (i Info) Loses() string {
	var what []string
	if i.Err != "" {
		what = append(what, "cannot tell what it holds ("+i.Err+")")
	}
	if i.Commits > 0 {
		what = append(what, plural(i.Commits, "commit")+" not on "+i.Base)
	}
	if i.Uncommitted {
		what = append(what, "uncommitted changes")
	}
	return strings.Join(what, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// List returns every workspace under the root, oldest first, with what
// removing it would lose.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	ws, err := m.all()
	var out []Info
	for _, w := range ws {
		out = append(out, w.inspect(ctx))
	}
	return out, err
}

// all loads every workspace record under the root, oldest first. Those
// that cannot be read are skipped and named in the error.
func (m *Manager) all() ([]*Workspace, error) {
	entries, err := os.ReadDir(filepath.Join(m.root, RecordsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ws []*Workspace
	var errs []error
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || checkTaskID(id) != nil {
			continue
		}
		w, err := m.load(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ws = append(ws, w)
	}
	sort.SliceStable(ws, func(i, j int) bool {
		return ws[i].CreatedAt.Before(ws[j].CreatedAt) || ws[i].CreatedAt.Equal(ws[j].CreatedAt) && ws[i].TaskID < ws[j].TaskID
	})
	return ws, errors.Join(errs...)
}

// Inspect returns task taskID's workspace as List would.
func (m *Manager) Inspect(ctx context.Context, taskID string) (Info, error) {
	w, err := m.Get(taskID)
	if err != nil {
		return Info{}, err
	}
	return w.inspect(ctx), nil
}

// inspect finds what removing w would lose.
func (w *Workspace) inspect(ctx context.Context) Info {
	i := Info{TaskID: w.TaskID, Repo: w.Repo, Branch: w.Branch, Base: w.Base, Dir: w.Dir, Missing: !isDir(w.Dir)}
	if !i.Missing {
		i.Bytes = durable.TreeBytes(w.Dir)
	}
	if !isDir(w.CommonDir) {
		i.Err = "repository " + w.RepoPath + " is gone"
		return i
	}
	var err error
	if i.Commits, err = w.unsaved(ctx, i.Missing); err != nil {
		i.Err = err.Error()
	}
	if !i.Missing {
		if _, i.Uncommitted, err = w.status(ctx); err != nil {
			i.Err = err.Error()
		}
	}
	return i
}

// unsaved counts the commits only w holds: reachable from its branch (or
// its worktree's HEAD, should the task have left the branch) and from no
// other branch, tag or remote, nor from the base commit or the base as it
// is now.
func (w *Workspace) unsaved(ctx context.Context, missing bool) (int, error) {
	var tips []string
	if out, err := runGit(ctx, w.repoDirs(), "rev-parse", "--verify", "-q", w.ref()); err == nil {
		tips = append(tips, strings.TrimSpace(out))
	}
	if !missing {
		if out, err := runGit(ctx, w.treeDirs(), "rev-parse", "--verify", "-q", "HEAD^{commit}"); err == nil {
			tips = append(tips, strings.TrimSpace(out))
		}
	}
	if w.LastHead != "" {
		// The head the agent saw at the task's end, wherever the branch
		// points now (another task may have moved it).
		if out, err := runGit(ctx, w.repoDirs(), "rev-parse", "--verify", "-q", "--end-of-options", w.LastHead+"^{commit}"); err == nil {
			tips = append(tips, strings.TrimSpace(out))
		}
	}
	if len(tips) == 0 {
		return 0, nil // neither a branch nor a HEAD: nothing to lose
	}
	args := append([]string{"rev-list", "--count", "--single-worktree"}, tips...)
	args = append(args, "--not", w.BaseCommit)
	if out, err := runGit(ctx, w.repoDirs(), "rev-parse", "--verify", "-q", "--end-of-options", w.Base+"^{commit}"); err == nil {
		args = append(args, strings.TrimSpace(out))
	}
	args = append(args, "--exclude="+w.ref(), "--all", "--")
	out, err := runGit(ctx, w.repoDirs(), args...)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// Remove removes task taskID's workspace: the worktree, its git directory
// in the repository, its branch and its record. When that would lose
// work (see Info.Kept) it refuses with an error wrapping ErrKept that
// says what, unless force. It returns what the workspace held, so that
// a forced removal can say what it dropped.
func (m *Manager) Remove(ctx context.Context, taskID string, force bool) (Info, error) {
	w, err := m.Get(taskID)
	if err != nil {
		return Info{}, err
	}
	defer m.lock(w.CommonDir)()
	i := w.inspect(ctx)
	if i.Kept() && !force {
		return i, fmt.Errorf("%w: workspace of task %s has %s; agent workspaces rm %s --force drops them", ErrKept, taskID, i.Loses(), taskID)
	}
	if err := removeTree(w.Dir); err != nil {
		return i, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	// A repository that is gone took the worktree's git directory and
	// the branch with it.
	if isDir(w.CommonDir) {
		if err := os.RemoveAll(w.AdminDir); err != nil {
			return i, fmt.Errorf("workspace %s: %v", taskID, err)
		}
		if _, err := runGit(ctx, w.repoDirs(), "worktree", "prune"); err != nil {
			return i, fmt.Errorf("workspace %s: %v", taskID, err)
		}
		if _, err := runGit(ctx, w.repoDirs(), "rev-parse", "--verify", "-q", w.ref()); err == nil {
			if _, err := runGit(ctx, w.repoDirs(), "update-ref", "-d", w.ref()); err != nil {
				return i, fmt.Errorf("workspace %s: %v", taskID, err)
			}
		}
	}
	if err := os.Remove(m.recordPath(taskID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return i, err
	}
	return i, nil
}

// removeTree removes dir and everything in it, first giving back the
// write and search rights a task may have taken from its directories.
// Symbolic links are removed, never followed.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// DiskUsage is what the worktrees of every workspace take on disk, and
// how many there are. It reads no git: it walks the worktrees.
func (m *Manager) DiskUsage() (bytes int64, count int) {
	ws, _ := m.all()
	for _, w := range ws {
		bytes += durable.TreeBytes(w.Dir)
	}
	return bytes, len(ws)
}
