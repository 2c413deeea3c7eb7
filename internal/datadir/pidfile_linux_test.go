package datadir

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/edgeagent/agent/outbox"
)

// holdLock makes a data directory whose lock this test process holds, as
// a running agent would.
func holdLock(t *testing.T) (dir, lockPath string) {
	t.Helper()
	dir = t.TempDir()
	must(t, os.MkdirAll(Layout{dir}.Outbox(), 0o700))
	lockPath = filepath.Join(Layout{dir}.Outbox(), outbox.LockName)
	lock := flock.New(lockPath)
	if ok, err := lock.TryLock(); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	t.Cleanup(func() { lock.Unlock() })
	return dir, lockPath
}

// startSleep starts a process that holds no lock, to name in a pid file.
func startSleep(t *testing.T) (*exec.Cmd, chan struct{}) {
	t.Helper()
	sleep := exec.Command("sleep", "300")
	must(t, sleep.Start())
	done := make(chan struct{})
	go func() { sleep.Wait(); close(done) }()
	t.Cleanup(func() { sleep.Process.Kill(); <-done })
	return sleep, done
}

// The agent running on a data directory is the process the kernel names
// as its lock's holder; a pid file naming another process is reported,
// and one missing does not matter.
func TestRunningNamesTheLockHolder(t *testing.T) {
	dir, _ := holdLock(t)
	sleep, _ := startSleep(t)
	for _, c := range []struct {
		name    string
		pidFile string // "" removes it
		want    Holder
	}{
		{"pid file agrees", strconv.Itoa(os.Getpid()), Holder{PID: os.Getpid()}},
		{"pid file names another process", strconv.Itoa(sleep.Process.Pid), Holder{PID: os.Getpid(), PIDFile: sleep.Process.Pid}},
		{"pid file removed", "", Holder{PID: os.Getpid()}},
		{"pid file garbage", "x", Holder{PID: os.Getpid()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(Layout{dir}.PIDFile())
			if c.pidFile != "" {
				must(t, os.WriteFile(Layout{dir}.PIDFile(), []byte(c.pidFile+"\n"), 0o600))
			}
			h, err := Running(dir)
			if err != nil || h != c.want {
				t.Errorf("Running = %+v, %v; want %+v", h, err, c.want)
			}
		})
	}
}

// A pid that does not hold the lock is never signalled, even when asked
// to signal it directly: the holder is checked again through a pidfd.
func TestSignalLockHolderRefusesOthers(t *testing.T) {
	_, lockPath := holdLock(t)
	sleep, done := startSleep(t)
	err := signalLockHolder(lockPath, sleep.Process.Pid, syscall.SIGTERM)
	if err == nil || !strings.Contains(err.Error(), "no longer holds") {
		t.Errorf("signalLockHolder(a sleep) = %v, want a refusal", err)
	}
	select {
	case <-done:
		t.Fatal("the sleep that holds no lock was signalled")
	case <-time.After(200 * time.Millisecond):
	}
	// The holder (this process) is signalled: signal 0 checks and sends
	// nothing.
	if err := signalLockHolder(lockPath, os.Getpid(), 0); err != nil {
		t.Errorf("signalLockHolder(the holder): %v", err)
	}
}

func TestFlockHolder(t *testing.T) {
	const table = `1: POSIX  ADVISORY  WRITE 111 fe:00:42 0 EOF
2: FLOCK  ADVISORY  READ  222 fe:00:42 0 EOF
3: FLOCK  ADVISORY  WRITE 333 fe:01:42 0 EOF
4: FLOCK  ADVISORY  WRITE 444 fe:00:420 0 EOF
5: -> FLOCK  ADVISORY  WRITE 555 fe:00:42 0 EOF
6: FLOCK  ADVISORY  WRITE 666 fe:00:42 0 EOF
7: FLOCK  ADVISORY  WRITE 0 00:1b:7 0 EOF
`
	for _, c := range []struct {
		name              string
		major, minor, ino uint64
		want              int
		err               string
	}{
		{"the holder, not a waiter, a read lock, a POSIX lock or another device or inode", 0xfe, 0, 42, 666, ""},
		{"hex device numbers", 0xfe, 1, 42, 333, ""},
		{"no lock on it", 0xfe, 0, 43, 0, "lists no write lock"},
		{"a holder the kernel does not show", 0, 0x1b, 7, 0, "shows no process"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid, err := flockHolder(strings.NewReader(table), c.major, c.minor, c.ino)
			if pid != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
				t.Errorf("flockHolder = %d, %v; want %d, %q", pid, err, c.want, c.err)
			}
		})
	}
	if _, err := flockHolder(strings.NewReader(""), 1, 2, 3); !errors.Is(err, errNoHolder) {
		t.Errorf("empty table: %v", err)
	}
}
