//go:build !linux

package durable

import "os"

// Datasync flushes f to stable storage. On darwin, os.File.Sync uses
// F_FULLFSYNC, which is what durability needs there.
func Datasync(f *os.File) error { return f.Sync() }
