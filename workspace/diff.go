package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	"github.com/edgeagent/agent/state"
)

// diffOptions make git diff print the same whatever config it reads: no
// colour, no external diff or text conversion (binary files are named,
// not carried), no renames, git's own a/ and b/ prefixes, paths from the
// top.
var diffOptions = []string{"--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/", "--no-relative"}

// Diff is what task taskID's work comes to: the diff of its files as
// they are (its branch's head and what no commit holds yet, untracked
// files added) against the base commit, as git diff prints it with
// diffOptions, cut at a line's end to state.MaxDiffBytes, and its stat.
// It is computed in the manager's view, as Commit stages (see stage);
// it writes nothing to the repository or the clone.
func (m *Manager) Diff(ctx context.Context, taskID string) (*state.DiffEvent, error) {
	w, err := m.open(ctx, taskID)
	if err != nil {
		return nil, err
	}
	g, err := w.openClone()
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", taskID, err)
	}
	defer g.Close()
	head, err := w.branchHead(ctx, g)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", taskID, err)
	}
	s, err := w.stage(ctx, g, head, "")
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	defer s.drop()
	d := w.viewDirs("")
	ev := &state.DiffEvent{Repo: w.Repo, Branch: w.Branch, BaseCommit: w.BaseCommit, Head: head}
	numstat, err := runGit(ctx, d, append(append([]string{"diff"}, diffOptions...), "--numstat", "-z", w.BaseCommit, s.tree, "--")...)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	ev.Files, ev.Insertions, ev.Deletions = sumNumstat(numstat)
	patch, size, err := runGitHead(ctx, d, state.MaxDiffBytes, append(append([]string{"diff"}, diffOptions...), w.BaseCommit, s.tree, "--")...)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %v", taskID, err)
	}
	ev.Patch, ev.Cut = state.CutPatch(patch, state.MaxDiffBytes)
	ev.Bytes = size
	return ev, nil
}

// sumNumstat adds up git diff --numstat -z: files, insertions and
// deletions (a binary file counts none of either).
func sumNumstat(out string) (files, insertions, deletions int) {
	for rec := range strings.SplitSeq(out, "\x00") {
		fields := strings.SplitN(rec, "\t", 3)
		if len(fields) < 3 {
			continue
		}
		files++
		add, _ := strconv.Atoi(fields[0]) // "-" for a binary file: 0
		del, _ := strconv.Atoi(fields[1])
		insertions += add
		deletions += del
	}
	return files, insertions, deletions
}

// DiffStat is git diff --stat of what the agent last brought back of
// task taskID's branch against its base commit, read in the
// repository: the diffstat of a pull request.
func (m *Manager) DiffStat(ctx context.Context, taskID string) (string, error) {
	w, err := m.Get(taskID)
	if err != nil {
		return "", err
	}
	if w.Brought == "" {
		return "", nil
	}
	out, err := runGit(ctx, w.repoDirs(), "diff", "--stat=72", "--no-color", "--no-renames", "--no-ext-diff", "--no-textconv", w.BaseCommit, w.Brought, "--")
	return strings.TrimRight(out, "\n"), err
}

// runGitHead is runGit for an output that may be large: it keeps the
// first max+1 bytes of it (enough for state.CutPatch to cut at a line's
// end), and counts the whole.
func runGitHead(ctx context.Context, d gitDirs, max int, args ...string) (string, int64, error) {
	argv := append([]string{}, safeConfig...)
	if len(d.objects) > 0 || d.objectDir != "" {
		argv = append(argv, untrustedObjects...)
	}
	cmd := exec.CommandContext(ctx, "git", append(argv, args...)...)
	cmd.Dir = d.gitDir
	cmd.Env = gitEnv(d)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, fmt.Errorf("git %s: %v", args[0], err)
	}
	var head bytes.Buffer
	n, rerr := io.Copy(&head, io.LimitReader(out, int64(max)+1))
	rest, _ := io.Copy(io.Discard, out)
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return "", 0, fmt.Errorf("git %s: %w", args[0], ctx.Err())
	case werr != nil:
		var ee *exec.ExitError
		if msg := oneLine(errb.String()); msg != "" && errors.As(werr, &ee) {
			return "", 0, &gitError{args: args, msg: msg}
		}
		return "", 0, fmt.Errorf("git %s: %v", args[0], werr)
	case rerr != nil:
		return "", 0, fmt.Errorf("git %s: %v", args[0], rerr)
	}
	return head.String(), n + rest, nil
}
