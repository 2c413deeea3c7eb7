package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/state"
)

// Changes says what task taskID did in its workspace: the commits on its
// branch since the base commit (the oldest MaxChangesCommits, then how
// many more), whether the worktree has changes no commit holds, and the
// diff stat of the worktree against the base commit, committed or not,
// untracked files counted as added.
func (m *Manager) Changes(ctx context.Context, taskID string) (*state.Changes, error) {
	w, err := m.Get(taskID)
	if err != nil {
		return nil, err
	}
	c := &state.Changes{Repo: w.Repo, Branch: w.Branch, Base: w.Base, BaseCommit: w.BaseCommit, Path: w.Dir, Commits: []state.Commit{}}
	head, err := runGit(ctx, w.repoDirs(), "rev-parse", "--verify", "-q", w.ref())
	if err != nil {
		return nil, fmt.Errorf("workspace %s: branch %s is gone", taskID, w.Branch)
	}
	c.Head = strings.TrimSpace(head)
	if c.Head != w.LastHead {
		unlock := m.lock(w.CommonDir)
		w.LastHead = c.Head
		err := m.save(w)
		unlock()
		if err != nil {
			return nil, fmt.Errorf("workspace %s: %v", taskID, err)
		}
	}
	out, err := runGit(ctx, w.repoDirs(), "log", "-z", "--reverse", "--no-show-signature", "--format=%H %s", w.BaseCommit+".."+c.Head, "--")
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	for rec := range strings.SplitSeq(out, "\x00") {
		if rec = strings.TrimPrefix(rec, "\n"); rec == "" {
			continue
		}
		sha, subject, _ := strings.Cut(rec, " ")
		if len(c.Commits) < state.MaxChangesCommits {
			c.Commits = append(c.Commits, state.Commit{SHA: sha, Subject: subject})
		} else {
			c.CommitsCut++
		}
	}
	if !isDir(w.Dir) {
		return c, nil // removed: only the branch tells
	}
	untracked, dirty, err := w.status(ctx)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	c.Uncommitted = dirty
	out, err = runGit(ctx, w.treeDirs(), "diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--ignore-submodules=all",
		"--numstat", "-z", w.BaseCommit, "--")
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	for rec := range strings.SplitSeq(out, "\x00") {
		fields := strings.SplitN(rec, "\t", 3)
		if len(fields) < 3 {
			continue
		}
		c.Files++
		add, _ := strconv.Atoi(fields[0]) // "-" for a binary file: 0
		del, _ := strconv.Atoi(fields[1])
		c.Insertions += add
		c.Deletions += del
	}
	for _, p := range untracked {
		c.Files++
		c.Insertions += lineCount(filepath.Join(w.Dir, p))
	}
	return c, nil
}

// status reads the worktree's status: the untracked files, and whether
// anything is uncommitted (untracked files included; ignored files and
// submodules not looked at).
func (w *Workspace) status(ctx context.Context) (untracked []string, dirty bool, err error) {
	out, err := runGit(ctx, w.treeDirs(), "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all", "--no-renames")
	if err != nil {
		return nil, false, err
	}
	for rec := range strings.SplitSeq(out, "\x00") {
		if len(rec) < 4 {
			continue
		}
		dirty = true
		if rec[:2] == "??" {
			untracked = append(untracked, rec[3:])
		}
	}
	return untracked, dirty, nil
}

// lineCount counts a file's lines as git's numstat would: 0 for a binary
// file (a NUL in its first 8000 bytes) or one that cannot be read; a
// symbolic link is one line, its target.
func lineCount(path string) int {
	info, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	if !info.Mode().IsRegular() {
		return 1
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, lines, last, first := 0, 0, byte('\n'), true
	for {
		k, err := f.Read(buf)
		chunk := buf[:k]
		if first && bytes.IndexByte(chunk[:min(k, 8000)], 0) >= 0 {
			return 0
		}
		if k > 0 {
			first = false
			lines += bytes.Count(chunk, []byte{'\n'})
			last = chunk[k-1]
			n += k
		}
		if err == io.EOF || err != nil {
			break
		}
	}
	if n > 0 && last != '\n' {
		lines++
	}
	return lines
}
