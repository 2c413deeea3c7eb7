package outbox

import (
	"os"
	"syscall"
)

// datasync flushes f's data, and the metadata needed to read it back, to
// stable storage.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
