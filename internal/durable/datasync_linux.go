package durable

import (
	"os"
	"syscall"
)

// Datasync flushes f's data, and the metadata needed to read it back, to
// stable storage.
func Datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
