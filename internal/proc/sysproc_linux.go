package proc

import "syscall"

// SysProcAttr puts the child in its own process group, and asks the kernel
// to SIGKILL it if the agent dies without stopping it (a SIGKILL of the
// agent), so that no executor outlives its owner.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
