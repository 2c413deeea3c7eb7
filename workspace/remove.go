package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	// BranchHead is the commit the task's branch has in the repository,
	// as the agent brought it back; empty when it has brought nothing
	// back (the branch is then in the clone only).
	BranchHead string `json:"branch_head,omitempty"`
	// Bytes is what the clone takes on disk (the objects it borrows from
	// the repository are not counted).
	Bytes int64 `json:"bytes"`
	// Commits counts the commits that the workspace holds (its clone's
	// branches, tags and HEAD, its branch in the repository) and that are
	// on no other branch, tag or remote of the repository and not in the
	// base: removing the workspace would lose them.
	Commits int `json:"commits"`
	// Uncommitted: the clone has changes no commit holds.
	Uncommitted bool `json:"uncommitted"`
	// Missing: the clone's directory is gone; only the branch is left.
	Missing bool `json:"missing,omitempty"`
	// KeptRefs are the refs of the repository on which replays kept what
	// earlier attempts left (KeptRef): removal deletes them with the
	// rest, so what only they hold counts in Commits.
	KeptRefs []string `json:"kept_refs,omitempty"`
	// Err says why what removing it would lose could not be told; such a
	// workspace is kept.
	Err string `json:"error,omitempty"`

	// branchLink is what the repository's branch links to when it is a
	// symbolic ref (an earlier agent's task could write one): removal
	// deletes the link, never what it names.
	branchLink string
	// kept are the kept refs' values, by name, as inspected.
	kept map[string]string
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

// Removed says what Remove took, for the person who asked: the clone,
// the branch it brought back, what replays kept, and what was dropped
// with them.
func (i Info) Removed() string {
	msg := fmt.Sprintf("removed the workspace of task %s: %s", i.TaskID, i.Dir)
	if i.BranchHead != "" {
		msg += fmt.Sprintf(" and branch %s of %s", i.Branch, i.Repo)
	}
	if len(i.KeptRefs) > 0 {
		msg += fmt.Sprintf(", and what its replays kept (%s)", strings.Join(i.KeptRefs, ", "))
	}
	if d := i.Loses(); d != "" {
		msg += "; dropped " + d
	}
	return msg
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

// inspect finds what removing w would lose. It writes nothing to the
// repository; in the clone, only its alternates file (checkObjects).
func (w *Workspace) inspect(ctx context.Context) Info {
	i := Info{TaskID: w.TaskID, Repo: w.Repo, Branch: w.Branch, Base: w.Base, Dir: w.Dir, Missing: !isDir(w.Dir)}
	if !i.Missing {
		i.Bytes = durable.TreeBytes(w.Dir)
	}
	if !isDir(w.CommonDir) {
		i.Err = "repository " + w.RepoPath + " is gone"
		return i
	}
	var errs []string
	b, err := w.repoBranch(ctx)
	if err != nil {
		i.Err = err.Error()
		return i
	}
	i.BranchHead, i.branchLink = b.oid, b.symbolic
	if b.symbolic != "" {
		errs = append(errs, fmt.Sprintf("its branch in the repository is a symbolic ref to %s, which a task wrote (rm --force removes the link, not %s)", b.symbolic, b.symbolic))
	}
	// What the repository's branch holds, and what the agent last put
	// there, wherever the branch is now; what replays kept.
	tips := []string{b.oid, w.Brought, w.LastHead}
	if i.kept, err = w.keptRefs(ctx); err != nil {
		errs = append(errs, err.Error())
	}
	for _, ref := range slices.Sorted(maps.Keys(i.kept)) {
		i.KeptRefs = append(i.KeptRefs, ref)
		tips = append(tips, i.kept[ref])
	}
	var objects []string
	var commit string // what the files are looked at against
	switch {
	case i.Missing:
	case w.legacy():
		tips = append(tips, w.legacyHead())
		// Its HEAD, else its branch, else the base: against the base,
		// what it committed looks uncommitted too, which keeps it.
		for _, c := range []string{w.legacyHead(), b.oid, w.BaseCommit} {
			if commit == "" {
				commit = c
			}
		}
	default:
		g, err := w.openClone()
		if err != nil {
			errs = append(errs, err.Error())
			break
		}
		defer g.Close()
		clone, err := g.tips()
		if err != nil {
			errs = append(errs, err.Error())
		}
		tips = append(tips, clone...)
		objects = []string{w.cloneObjects()}
		if commit, err = g.head(); err != nil {
			if commit, err = w.branchHead(ctx, g); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if i.Commits, err = w.unsaved(ctx, tips, objects); err != nil {
		errs = append(errs, err.Error())
	}
	if commit != "" {
		if l, err := w.look(ctx, commit, ""); err != nil {
			errs = append(errs, err.Error())
		} else {
			i.Uncommitted = len(l.changed) > 0 || len(l.untracked) > 0
		}
	}
	i.Err = strings.Join(errs, "; ")
	return i
}

// unsaved counts the commits only the workspace holds: reachable from
// tips (those that are commits or tags it has) and from no branch, tag
// or remote of the repository but the task's own, nor from the base
// commit or the base as it is now. objects are the clone's, read too.
func (w *Workspace) unsaved(ctx context.Context, tips, objects []string) (int, error) {
	d := w.repoDirs()
	d.objects = objects
	var in strings.Builder
	seen := map[string]bool{}
	for _, t := range tips {
		if t != "" && !seen[t] && isOID(t, w.oidLen()) {
			seen[t] = true
			in.WriteString(t + "\n")
		}
	}
	if in.Len() == 0 {
		return 0, nil
	}
	// Ids the task wrote that name nothing it has are not its work.
	out, err := runGitIn(ctx, d, in.String(), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return 0, err
	}
	args := []string{"rev-list", "--count", "--single-worktree"}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if oid, typ, ok := strings.Cut(line, " "); ok && (typ == "commit" || typ == "tag") {
			args = append(args, oid)
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	args = append(args, "--not", w.BaseCommit)
	if out, err := runGit(ctx, d, "rev-parse", "--verify", "-q", "--end-of-options", w.Base+"^{commit}"); err == nil {
		args = append(args, strings.TrimSpace(out))
	}
	args = append(args, "--exclude="+w.ref(), "--exclude="+KeptRefPrefix+w.TaskID+"/*", "--all", "--")
	out, err = runGit(ctx, d, args...)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// keptRefs are the refs on which replays of w's task kept what earlier
// attempts left, with their values.
func (w *Workspace) keptRefs(ctx context.Context) (map[string]string, error) {
	out, err := runGit(ctx, w.repoDirs(), "for-each-ref", "--format=%(objectname) %(refname)", KeptRefPrefix+w.TaskID+"/")
	if err != nil {
		return nil, err
	}
	kept := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if oid, ref, ok := strings.Cut(line, " "); ok {
			kept[ref] = oid
		}
	}
	return kept, nil
}

// Remove removes task taskID's workspace: its branch in the repository
// (the ref itself, with the value inspected: never what a link names),
// its clone, the manager's view of it and its record. When that would
// lose work (see Info.Kept) it refuses with an error wrapping ErrKept
// that says what, unless force. It returns what the workspace held, so
// that a forced removal can say what it dropped.
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
	// A repository that is gone took the branch with it.
	if isDir(w.CommonDir) {
		switch {
		case i.branchLink != "":
			_, err = runGit(ctx, w.repoDirs(), "update-ref", "--no-deref", "-d", w.ref())
		case i.BranchHead != "":
			_, err = runGit(ctx, w.repoDirs(), "update-ref", "--no-deref", "-d", w.ref(), i.BranchHead)
		}
		if err != nil {
			return i, fmt.Errorf("workspace %s: %v", taskID, err)
		}
		for _, ref := range i.KeptRefs {
			if _, err := runGit(ctx, w.repoDirs(), "update-ref", "--no-deref", "-d", ref, i.kept[ref]); err != nil {
				return i, fmt.Errorf("workspace %s: %v", taskID, err)
			}
		}
	}
	if err := removeTree(w.Dir); err != nil {
		return i, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	if w.legacy() {
		if err := w.dropWorktree(ctx); err != nil {
			return i, fmt.Errorf("workspace %s: %v", taskID, err)
		}
	}
	for _, dir := range []string{w.view(), w.making(), w.leaving()} {
		if err := removeTree(dir); err != nil {
			return i, fmt.Errorf("workspace %s: %v", taskID, err)
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

// DiskUsage is what the clones of every workspace take on disk, and how
// many there are. It reads no git: it walks the clones.
func (m *Manager) DiskUsage() (bytes int64, count int) {
	ws, _ := m.all()
	for _, w := range ws {
		bytes += durable.TreeBytes(w.Dir)
	}
	return bytes, len(ws)
}
