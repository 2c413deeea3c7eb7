//go:build linux || darwin

package durable

import "syscall"

// FreeBytes is the space left to an unprivileged writer on the file
// system that holds path, or -1 when it cannot be told.
func FreeBytes(path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// SizeBytes is the size of the file system that holds path, or -1 when
// it cannot be told.
func SizeBytes(path string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1
	}
	return int64(st.Blocks) * int64(st.Bsize)
}
