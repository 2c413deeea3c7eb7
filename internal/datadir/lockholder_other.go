//go:build !linux

package datadir

import (
	"errors"
	"syscall"
)

// kernelNamesLockHolder: macOS, where the agent runs under launchd, has no
// /proc/locks, and no call names the holder of an flock(2) lock (fcntl's
// F_GETLK names only POSIX record locks' holders). There the pid file is
// used as before, and only while the lock is held; `agent service stop`
// (launchctl, which knows its job's own process) is the stop to prefer.
const kernelNamesLockHolder = false

func lockHolder(string) (int, error) {
	return 0, errors.New("this system does not name a lock's holder")
}

func signalLockHolder(_ string, pid int, sig syscall.Signal) error {
	return syscall.Kill(pid, sig)
}
