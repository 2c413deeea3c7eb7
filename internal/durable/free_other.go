//go:build !linux && !darwin

package durable

// FreeBytes cannot tell the free space here.
func FreeBytes(string) int64 { return -1 }

// SizeBytes cannot tell the file system's size here.
func SizeBytes(string) int64 { return -1 }
