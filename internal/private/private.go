// Package private checks that what decides a program's behaviour is its
// user's own: a directory no one else can write to or own, and a secret
// file no one else can read.
package private

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Dir refuses a directory that someone else could change: one writable by
// its group or others, or owned by another user. what names it in the
// error ("data directory"). A symbolic link is not followed.
func Dir(what, dir string) error {
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case !info.IsDir():
		return fmt.Errorf("%s %s is not a directory (%s)", what, dir, info.Mode().Type())
	case info.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s %s is writable by others (mode %04o); make it private: chmod 700 %s", what, dir, info.Mode().Perm(), dir)
	}
	return owned(what, dir, info)
}

// SecretFile refuses a file that holds a secret and that its group or
// others may read or write: any permission bit beyond the owner's. info
// is the file's, as an open file's Stat gives it.
func SecretFile(what, path string, info fs.FileInfo) error {
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s %s is open to others (mode %04o): a secret must be its owner's alone; chmod 600 %s", what, path, perm, path)
	}
	return nil
}

func owned(what, path string, info fs.FileInfo) error {
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s %s belongs to uid %d, not to this user (uid %d); use your own", what, path, st.Uid, os.Getuid())
	}
	return nil
}
