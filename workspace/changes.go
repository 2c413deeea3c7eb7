package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/edgeagent/agent/state"
)

// Changes says what task taskID did in its workspace: the commits on its
// branch since the base commit (the oldest MaxChangesCommits, then how
// many more), whether its files have changes no commit holds, and the
// diff stat of its files against the base commit, committed or not,
// untracked files counted as added. Its branch is read from its clone,
// as data (BringBack says how); Changes itself writes nothing to the
// repository.
func (m *Manager) Changes(ctx context.Context, taskID string) (*state.Changes, error) {
	w, err := m.open(ctx, taskID)
	if err != nil {
		return nil, err
	}
	c := &state.Changes{Repo: w.Repo, Branch: w.Branch, Base: w.Base, BaseCommit: w.BaseCommit, Path: w.Dir, Commits: []state.Commit{}}
	g, err := w.openClone()
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", taskID, err)
	}
	defer g.Close()
	if c.Head, err = w.branchHead(ctx, g); err != nil {
		return nil, fmt.Errorf("workspace %s: %w", taskID, err)
	}
	out, err := runGit(ctx, w.viewDirs(""), "log", "-z", "--reverse", "--no-show-signature", "--format=%H %s", w.BaseCommit+".."+c.Head, "--")
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
	l, err := w.look(ctx, c.Head, w.BaseCommit)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	c.Uncommitted = len(l.changed) > 0 || len(l.untracked) > 0
	c.Files, c.Insertions, c.Deletions = sumNumstat(l.numstat)
	for _, p := range l.untracked {
		c.Files++
		c.Insertions += lineCount(filepath.Join(w.Dir, p))
	}
	return c, nil
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
	// Not through a link the task swapped in meanwhile, and never
	// blocking on a FIFO.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0
	}
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		f.Close()
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
