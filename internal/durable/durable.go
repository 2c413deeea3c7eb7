// Package durable holds the two calls that make writes survive a crash:
// syncing a file's data and syncing a directory after a create or rename.
// It sits below every package that writes files.
package durable

import (
	"errors"
	"fmt"
	"os"
)

// SyncDir fsyncs a directory, making a create, rename or remove in it
// durable. (Packages such as natefinch/atomic sync the file, not the
// directory.)
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
