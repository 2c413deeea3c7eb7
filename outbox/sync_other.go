//go:build !linux

package outbox

import "os"

// datasync flushes f to stable storage. On darwin, os.File.Sync uses
// F_FULLFSYNC, which is what durability needs there.
func datasync(f *os.File) error { return f.Sync() }
