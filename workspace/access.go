package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNotWritable: a directory the workspaces need to write is not
// writable by this process's user.
var ErrNotWritable = errors.New("not writable")

// CheckWritable checks, without writing, that this process's user may do
// what preparing and running a task's workspace does: make the task's
// clone under the root (or the root itself, when it is not there yet),
// and bring its branch and commits back to each repository's shared git
// directory (refs, objects). The errors, joined, name each directory
// refused.
func (m *Manager) CheckWritable() error {
	var errs []error
	root := m.root
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		root = existingAncestor(root)
	}
	if err := writable(root); err != nil {
		errs = append(errs, fmt.Errorf("work directory %s: %w", root, err))
	}
	for _, r := range m.repos {
		for _, dir := range []string{r.commonDir, filepath.Join(r.commonDir, "objects"), filepath.Join(r.commonDir, "refs")} {
			if err := writable(dir); err != nil {
				errs = append(errs, fmt.Errorf("repository %q: %s: %w", r.Name, dir, err))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// writable asks the kernel whether this process may add to dir.
func writable(dir string) error {
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("%w by uid %d (%v)", ErrNotWritable, os.Getuid(), err)
	}
	return nil
}

// existingAncestor is the nearest directory above dir that exists.
func existingAncestor(dir string) string {
	for {
		parent := filepath.Dir(dir)
		if _, err := os.Stat(dir); err == nil || parent == dir {
			return dir
		}
		dir = parent
	}
}

// CheckOutOfReach refuses, marked ErrBadRepo, a served repository that a
// confined task could write: one whose checkout or git directories are
// in a hierarchy of writable (what every task may write: /tmp, /dev, the
// operator's --isolation-write) and not in one of denied. A task there
// could rewrite the repository's config, hooks and branches, which the
// agent and the person then run. The error is one line, on the first
// such repository, naming the hierarchy.
func (m *Manager) CheckOutOfReach(writable, denied []string) error {
	for _, r := range m.repos {
		for _, p := range []string{r.Path, r.gitDir, r.commonDir} {
			if w := reachedBy(realPath(p), writable, denied); w != "" {
				return badRepo{fmt.Errorf("repository %q: %s is in %s, which every confined task may write, and with it the repository's config, hooks and branches; move the repository out of %s", r.Name, p, w, w)}
			}
		}
	}
	return nil
}

// reachedBy is the hierarchy of writable that holds p, unless one of
// denied holds it too; "" for none.
func reachedBy(p string, writable, denied []string) string {
	for _, d := range denied {
		if within(p, realPath(d)) {
			return ""
		}
	}
	for _, w := range writable {
		if within(p, realPath(w)) {
			return w
		}
	}
	return ""
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || isBeneath(p, dir)
}

// realPath is p absolute, its links resolved as far as it exists.
func realPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}
