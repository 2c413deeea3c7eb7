package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/gofrs/flock"

	"github.com/edgeagent/agent/outbox"
)

// The running agent writes its process id to DATA_DIR/agent.pid once it
// holds the data directory's lock, and removes it when it stops. That file
// is only a hint: a task runs as the agent's user and can rewrite it. So
// `agent stop` signals the process the kernel names as the lock's holder
// (lockHolder; Linux), never a pid the file names that does not hold the
// lock. Where the kernel names no holder (macOS), the pid file is used as
// before, and only while the lock is held.

// PIDFile is where a running agent keeps its process id.
func (l Layout) PIDFile() string { return filepath.Join(l.Dir, "agent.pid") }

// ErrNotRunning says no agent runs on a data directory.
var ErrNotRunning = errors.New("no agent is running on this data directory")

// WritePID records this process's id in the pid file.
func (l Layout) WritePID() error {
	return WriteFile(l.PIDFile(), []byte(strconv.Itoa(os.Getpid())+"\n"))
}

// RemovePID removes the pid file.
func (l Layout) RemovePID() { os.Remove(l.PIDFile()) }

// readPID is the process id the pid file names.
func (l Layout) readPID() (int, error) {
	b, err := os.ReadFile(l.PIDFile())
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("pid file %s holds %q, not a process id", l.PIDFile(), strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// Lock is the data directory's lock: the outbox's.
func (l Layout) Lock() string { return filepath.Join(l.Outbox(), outbox.LockName) }

// Holder is the agent running on a data directory.
type Holder struct {
	// PID is the process that holds the data directory's lock, as the
	// kernel names it (where it cannot, as the pid file says).
	PID int
	// PIDFile is the process the pid file names when that is not PID: it
	// was rewritten, and it is never signalled. 0 when the file agrees,
	// is missing or holds no process id.
	PIDFile int
}

// lockHeld tells whether a process holds the lock at path. It takes the
// lock for an instant to learn that: a lock a running agent holds is only
// tried, never taken.
func lockHeld(path string) (bool, error) {
	lock := flock.New(path)
	ok, err := lock.TryLock()
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	if ok {
		lock.Unlock()
	}
	return !ok, nil
}

// Running is the agent running on the data directory dir: ErrNotRunning
// when nobody holds its lock.
func Running(dir string) (Holder, error) {
	l := Layout{dir}
	lockPath := l.Lock()
	if _, err := os.Stat(lockPath); errors.Is(err, fs.ErrNotExist) {
		return Holder{}, fmt.Errorf("%w (%s has no outbox)", ErrNotRunning, dir)
	}
	held, err := lockHeld(lockPath)
	if err != nil {
		return Holder{}, err
	}
	if !held {
		return Holder{}, fmt.Errorf("%w (%s)", ErrNotRunning, dir)
	}
	hint, hintErr := l.readPID()
	if !kernelNamesLockHolder {
		if hintErr != nil {
			return Holder{}, fmt.Errorf("an agent holds the lock of %s, but its pid file does not name it: %w", dir, hintErr)
		}
		return Holder{PID: hint}, nil
	}
	pid, err := lockHolder(lockPath)
	if err != nil {
		if held, herr := lockHeld(lockPath); herr == nil && !held { // it stopped meanwhile
			return Holder{}, fmt.Errorf("%w (%s)", ErrNotRunning, dir)
		}
		return Holder{}, fmt.Errorf("%s is held, but %v; the pid file is no proof, so nothing is signalled", lockPath, err)
	}
	h := Holder{PID: pid}
	if hintErr == nil && hint != pid {
		h.PIDFile = hint
	}
	return h, nil
}

// Stop asks the agent running on dir to drain (SIGTERM) or, with now, to
// stop at once (SIGQUIT). It signals only the process holding dir's lock.
func Stop(dir string, now bool) (Holder, error) {
	h, err := Running(dir)
	if err != nil {
		return h, err
	}
	sig := syscall.SIGTERM
	if now {
		sig = syscall.SIGQUIT
	}
	if err := signalLockHolder(Layout{dir}.Lock(), h.PID, sig); err != nil {
		return h, fmt.Errorf("signal agent pid %d: %w", h.PID, err)
	}
	return h, nil
}
