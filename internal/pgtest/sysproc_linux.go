package pgtest

import "syscall"

// sysProcAttr runs a child as cred (nil: as the test), killed if the test
// binary dies first.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}

// serverProcAttr is sysProcAttr in a process group of its own, so that a
// kill of the group reaches the server and nothing of the test.
func serverProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	a := sysProcAttr(cred)
	a.Setpgid = true
	return a
}
