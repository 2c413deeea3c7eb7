package workspace

import (
	"context"
	"strings"
	"time"

	"github.com/edgeagent/agent/state"
)

// checkoutTimeout bounds the read of a checkout's status: a checkout with
// a great many files is said to be unread rather than hold the task back.
const checkoutTimeout = 30 * time.Second

// maxUnread bounds what a checkout unread says of why.
const maxUnread = 300

// checkout reads the status of the person's checkout of r, as git status
// does, and returns what it holds that no commit does, nil when nothing
// (or r has no checkout: a bare repository). The checkout is the
// person's, and so is git's config there; nothing of a task's is read,
// and nothing runs but git (no hook, no file system monitor: safeConfig)
// and what the person's own config names. It writes nothing: optional
// locks are off (gitEnv), so the index is not refreshed on disk.
func (r repo) checkout(ctx context.Context, base, baseCommit string) *state.Checkout {
	ctx, cancel := context.WithTimeout(ctx, checkoutTimeout)
	defer cancel()
	c := &state.Checkout{Repo: r.Name, Base: base, BaseCommit: baseCommit}
	d := gitDirs{dir: r.Path}
	out, err := runGit(ctx, d, "rev-parse", "--is-inside-work-tree")
	if err != nil {
		c.Unread = state.Ellipsize(err.Error(), maxUnread)
		return c
	}
	if strings.TrimSpace(out) != "true" {
		return nil // a bare repository: no checkout to hold changes
	}
	out, err = runGit(ctx, d, "status", "--porcelain=v1", "-z", "--untracked-files=normal", "--no-renames")
	if err != nil {
		c.Unread = state.Ellipsize(err.Error(), maxUnread)
		return c
	}
	for rec := range strings.SplitSeq(out, "\x00") {
		switch {
		case len(rec) < 3:
		case strings.HasPrefix(rec, "??"):
			c.Untracked++
		case strings.HasPrefix(rec, "!!"):
		default:
			c.Changed++
		}
	}
	if c.Changed == 0 && c.Untracked == 0 {
		return nil
	}
	return c
}
