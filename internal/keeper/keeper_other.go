//go:build !linux

package keeper

import (
	"os/exec"
	"syscall"
	"time"
)

// Main does nothing here: attempts run under a keeper on Linux only.
func Main() {}

// Supported is false: attempts run under a keeper on Linux only.
func Supported() bool { return false }

// Process is an executor under its keeper; there are none here.
type Process struct {
	Keeper *exec.Cmd
	Pid    int
	ABI    int
}

// Start fails here: attempts run under a keeper on Linux only.
func Start(*exec.Cmd, Sandbox, time.Duration, func(*exec.Cmd) error) (*Process, error) {
	return nil, ErrNotKeeper
}

// ProbeEgress fails here: attempts run under a keeper on Linux only.
func ProbeEgress() error { return ErrNotKeeper }

// Signal does nothing.
func (p *Process) Signal(syscall.Signal, bool) {}

// Status is empty.
func (p *Process) Status() Status { return Status{} }
