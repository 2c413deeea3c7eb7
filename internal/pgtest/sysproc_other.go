//go:build unix && !linux

package pgtest

import "syscall"

// sysProcAttr runs a child as cred (nil: as the test). Only Linux has a
// parent-death signal: elsewhere a server outlives a test binary that
// dies before its cleanup.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// serverProcAttr is sysProcAttr in a process group of its own, so that a
// kill of the group reaches the server and nothing of the test.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	a := sysProcAttr(cred)
	a.Setpgid = true
	return a
}
