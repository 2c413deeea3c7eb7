package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// An agent from before clones gave each task a git worktree of the
// repository: the task's git directory was COMMON/worktrees/NAME (its
// AdminDir), its branch refs/heads/agent/TASK_ID in the repository, both
// writable by the task. Such a workspace is still listed and removed,
// reading what the task could have written there as data; before the
// task runs again (an agent upgraded while it ran), it is made a clone
// (migrate).

// legacyHead is the commit the worktree's HEAD names, read as data: its
// object id when detached, else "" (the branch it names is read
// otherwise, never through the link).
func (w *Workspace) legacyHead() string {
	b, err := os.ReadFile(filepath.Join(w.AdminDir, "HEAD"))
	if err != nil {
		return ""
	}
	if s := strings.TrimSpace(string(b)); isOID(s, w.oidLen()) {
		return s
	}
	return ""
}

// dropWorktree removes the worktree's git directory from the repository
// and the repository's record of it.
func (w *Workspace) dropWorktree(ctx context.Context) error {
	if err := removeTree(w.AdminDir); err != nil {
		return err
	}
	_, err := runGit(ctx, w.repoDirs(), "worktree", "prune")
	return err
}

// migrate makes a worktree an earlier agent made into a clone, in place,
// keeping the task's files as they are (a continue goes on from them):
// the clone's branch at the branch's head in the repository (or the
// base, when the task left a link there, which is removed), its index
// at that commit, so that what was uncommitted stays so. The worktree's
// git directory leaves the repository; the branch there stays, as what
// the agent brought back.
func (m *Manager) migrate(ctx context.Context, w *Workspace) error {
	defer m.lock(w.CommonDir)()
	b, err := w.repoBranch(ctx)
	if err != nil {
		return err
	}
	head := w.BaseCommit
	switch {
	case b.symbolic != "":
		if _, err := runGit(ctx, w.repoDirs(), "update-ref", "--no-deref", "-d", w.ref()); err != nil {
			return err
		}
	case b.oid != "":
		if t, err := runGit(ctx, w.repoDirs(), "cat-file", "-t", b.oid); err == nil && strings.TrimSpace(t) == "commit" {
			head = b.oid
		}
	}
	if isDir(w.Dir) {
		if err := removeTree(filepath.Join(w.Dir, ".git")); err != nil {
			return err
		}
		if err := w.makeClone(ctx, w.Dir, head, false); err != nil {
			return err
		}
	}
	if err := w.dropWorktree(ctx); err != nil {
		return err
	}
	w.AdminDir, w.LastHead = "", ""
	if b.symbolic == "" {
		w.Brought = b.oid
	}
	if err := w.makeView(ctx); err != nil {
		return err
	}
	return m.save(w)
}
