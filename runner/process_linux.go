package runner

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
const prSetChildSubreaper = 36

var subreaper atomic.Bool

// BecomeSubreaper makes the agent process a child subreaper: a process an
// attempt started whose parent dies is reparented to the agent rather than
// to init, so it stays within reach (its zombie is reaped by the next
// sweep). Call it once, early, from a program whose children are all
// started by the runner: the sweep reaps any other zombie child.
func BecomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	subreaper.Store(true)
	return nil
}

// sweepRounds bounds a sweep: a process may fork while it is being killed,
// so the sweep looks again until it finds none.
const sweepRounds = 20

// sweepMark SIGKILLs every process whose mark matches, until none is left,
// and reaps those that were reparented to the agent.
func sweepMark(match func(mark string) bool) int {
	killed := 0
	for range sweepRounds {
		pids := markedProcesses(match)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		for _, pid := range pids {
			waitGone(pid)
		}
	}
	reapOrphans()
	return killed
}

// markedProcesses lists the live processes whose MarkEnv matches. A
// process whose environment cannot be read (another user's, or gone) is
// not ours.
func markedProcesses(match func(string) bool) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	self := os.Getpid()
	key := []byte(MarkEnv + "=")
	var pids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + name + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, key); ok && match(string(v)) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// waitGone waits, briefly, until a killed process is no longer running: it
// is reaped at once when it is the agent's child, else its parent's
// business.
func waitGone(pid int) {
	for i := 0; i < 2000; i++ { // up to 10 s: SIGKILL cannot be refused, only delayed by a loaded machine
		ppid, state, ok := procStat(pid)
		if !ok {
			return
		}
		if state == 'Z' {
			if ppid == os.Getpid() && subreaper.Load() {
				children.reap(pid)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reapOrphans reaps zombie children of a subreaper agent that the runner
// did not start itself: descendants of attempts, reparented after their
// parent died, that then exited on their own.
func reapOrphans() {
	if !subreaper.Load() {
		return
	}
	// Only zombies, by pid: waiting for any child would also take the
	// executors the runner is still waiting for.
	for _, pid := range zombieChildren() {
		children.reap(pid)
	}
}

// zombieChildren lists the agent's children that are zombies.
func zombieChildren() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	self := os.Getpid()
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if ppid, state, ok := procStat(pid); ok && ppid == self && state == 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads a process's parent and state from /proc/PID/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(fields[1]))
	return ppid, fields[0][0], err == nil
}
