//go:build !linux

package proc

import "syscall"

// SysProcAttr puts the child in its own process group.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
