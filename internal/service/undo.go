package service

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
)

// installUndo remembers what an install changed, so that an install that
// cannot finish (the service manager is not there, or refuses the unit)
// leaves the machine as it found it: files it made are removed, files it
// replaced are put back, directories it made are removed when still
// empty.
type installUndo struct {
	steps []undoStep
}

// undoStep puts back one change; what says it, for the person.
type undoStep struct {
	what string
	do   func() error
}

// made notes that install created path (a file, or an empty directory).
func (u *installUndo) made(path string) {
	u.steps = append(u.steps, undoStep{"removed " + path, func() error { return os.Remove(path) }})
}

// replacing keeps path as it is before install replaces it: a file that
// is there is kept aside (a hard link, else a copy) to be put back, and
// one that is not is removed. It returns a func that drops what was kept,
// once the install has finished.
func (u *installUndo) replacing(path string) (func(), error) {
	info, err := os.Lstat(path)
	if errors.Is(err, iofs.ErrNotExist) {
		u.made(path)
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	kept := filepath.Join(filepath.Dir(path), ".agent-install-kept-"+filepath.Base(path))
	_ = os.Remove(kept)
	if err := os.Link(path, kept); err != nil {
		if err := copyFile(path, kept, info.Mode().Perm()); err != nil {
			return nil, fmt.Errorf("keep %s aside before replacing it: %w", path, err)
		}
	}
	u.steps = append(u.steps, undoStep{"put back " + path, func() error { return os.Rename(kept, path) }})
	return func() { os.Remove(kept) }, nil
}

// undo puts back what the install changed, last change first, and says
// what it did.
func (u *installUndo) undo(w io.Writer) {
	for _, s := range slices.Backward(u.steps) {
		if err := s.do(); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			fmt.Fprintf(w, "agent: could not undo (%s): %v\n", s.what, err)
			continue
		}
		fmt.Fprintf(w, "agent: install undone: %s\n", s.what)
	}
	u.steps = nil
}

// copyFile copies src to dst, made with perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
