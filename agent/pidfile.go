package agent

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
// holds the data directory's lock, and removes it when it stops. `agent
// stop` signals that process, but only while the lock is held: a pid file
// a killed agent left may name a process that is not an agent any more.

// PIDFile is where a running agent keeps its process id.
func (l Layout) PIDFile() string { return filepath.Join(l.Dir, "agent.pid") }

// ErrNotRunning says no agent runs on a data directory.
var ErrNotRunning = errors.New("no agent is running on this data directory")

func (l Layout) writePID() error {
	return writeFile(l.PIDFile(), []byte(strconv.Itoa(os.Getpid())+"\n"))
}

func (l Layout) removePID() { os.Remove(l.PIDFile()) }

// RunningPID is the process id of the agent running on the data
// directory dir. It takes the lock for an instant to learn whether one
// runs: ErrNotRunning if it could.
func RunningPID(dir string) (int, error) {
	l := Layout{dir}
	lockPath := filepath.Join(l.Outbox(), outbox.LockName)
	if _, err := os.Stat(lockPath); errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w (%s has no outbox)", ErrNotRunning, dir)
	}
	lock := flock.New(lockPath)
	ok, err := lock.TryLock()
	if err != nil {
		return 0, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if ok {
		lock.Unlock()
		return 0, fmt.Errorf("%w (%s)", ErrNotRunning, dir)
	}
	b, err := os.ReadFile(l.PIDFile())
	if err != nil {
		return 0, fmt.Errorf("an agent holds the lock of %s but its pid file is unreadable: %w", dir, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("pid file %s holds %q, not a process id", l.PIDFile(), strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// Stop asks the agent running on dir to drain (SIGTERM) or, with now, to
// stop at once (SIGQUIT). It returns the agent's process id.
func Stop(dir string, now bool) (int, error) {
	pid, err := RunningPID(dir)
	if err != nil {
		return 0, err
	}
	sig := syscall.SIGTERM
	if now {
		sig = syscall.SIGQUIT
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return pid, fmt.Errorf("signal agent pid %d: %w", pid, err)
	}
	return pid, nil
}
