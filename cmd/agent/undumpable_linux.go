package main

import "golang.org/x/sys/unix"

// undumpable makes the process non-dumpable (PR_SET_DUMPABLE 0): its
// /proc/PID/environ, mem, fd and the like belong to root, and a process of
// the same user can neither read them nor ptrace it. Its children are
// dumpable again once they exec.
func undumpable() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
