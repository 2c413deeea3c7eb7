//go:build !linux

package keeper

import (
	"encoding/json"
	"errors"
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

// Spool makes an attempt outlive its agent: on Linux only.
type Spool struct {
	Dir       string
	Reattach  time.Duration
	Stdin     []byte
	KeepStdin bool
}

// ErrNoSpool is returned by the spool's methods on a Process started
// without one.
var ErrNoSpool = errors.New("keeper: the attempt has no spool")

// StartSpooled fails here: attempts run under a keeper on Linux only.
func StartSpooled(*exec.Cmd, Sandbox, time.Duration, Spool, func(*exec.Cmd) error) (*Process, error) {
	return nil, ErrNotKeeper
}

// Attach fails here: attempts run under a keeper on Linux only.
func Attach(string) (*Process, error) { return nil, ErrNotKeeper }

// Alive is false: there are no keepers here.
func Alive(string) bool { return false }

// Spooled says nothing: there is no spool.
func (p *Process) Spooled() (Spooled, <-chan struct{}) { return Spooled{}, nil }

// Exited is nil: there is no spool.
func (p *Process) Exited() <-chan struct{} { return nil }

// SpoolDir is empty: there is no spool.
func (p *Process) SpoolDir() string { return "" }

// KeeperPid is 0.
func (p *Process) KeeperPid() int { return 0 }

// LastCommit is nil.
func (p *Process) LastCommit() json.RawMessage { return nil }

// Input fails: there is no spool.
func (p *Process) Input(string, []byte) error { return ErrNoSpool }

// CloseInput fails: there is no spool.
func (p *Process) CloseInput() error { return ErrNoSpool }

// Commit fails: there is no spool.
func (p *Process) Commit(json.RawMessage) error { return ErrNoSpool }

// CommitRead fails: there is no spool.
func (p *Process) CommitRead(json.RawMessage, Spooled) error { return ErrNoSpool }

// Release does nothing.
func (p *Process) Release() {}

// Close does nothing.
func (p *Process) Close() {}
