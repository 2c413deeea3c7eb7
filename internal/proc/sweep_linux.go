package proc

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/procstat"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
const prSetChildSubreaper = 36

var subreaper atomic.Bool

// BecomeSubreaper makes the agent process a child subreaper: a process an
// attempt started whose parent dies is reparented to the agent rather than
// to init, so it stays within reach (its zombie is reaped by the next
// sweep). Call it once, early, from a program whose children are all
// started by Start: the sweep reaps any other zombie child.
func BecomeSubreaper() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	subreaper.Store(true)
	return nil
}

// keeperGrace bounds the wait for keepers told to end their attempts.
const keeperGrace = 5 * time.Second

// endKeepers sends SIGTERM to the marked keepers (a previous life's) and
// waits, for at most keeperGrace, until they are gone.
func endKeepers(match func(mark string) bool) {
	var keepers []int
	for _, pid := range markedProcesses(match) {
		if isKeeperProcess(pid) {
			if syscall.Kill(pid, syscall.SIGTERM) == nil {
				keepers = append(keepers, pid)
			}
		}
	}
	deadline := time.Now().Add(keeperGrace)
	for _, pid := range keepers {
		for time.Now().Before(deadline) {
			if _, state, ok := procStat(pid); !ok || state == 'Z' {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// killOrphans kills the agent's children it did not start: what a keeper
// that died (killed) left behind comes to the agent, a subreaper. Their
// own children come next, as they die; it looks again until none is left,
// and returns how many it killed.
func killOrphans() int {
	if !subreaper.Load() {
		return 0
	}
	killed := 0
	for range sweepRounds {
		orphans := children.orphans()
		if len(orphans) == 0 {
			break
		}
		for _, pid := range orphans {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		for _, pid := range orphans {
			waitGone(pid)
		}
	}
	return killed
}

// sweepRounds bounds a sweep: a process may fork while it is being killed,
// so the sweep looks again until it finds none.
const sweepRounds = 20

// sweepMark SIGKILLs every process whose mark matches, until none is left,
// and reaps those that were reparented to the agent.
func sweepMark(match func(mark string) bool) int { return sweepMarkBut(match, 0) }

// sweepMarkBut is sweepMark sparing the process spared: a spooling
// keeper, which carries its attempt's mark until it is released.
func sweepMarkBut(match func(mark string) bool, spared int) int {
	killed := 0
	for range sweepRounds {
		pids := slices.DeleteFunc(markedProcesses(match), func(pid int) bool { return pid == spared })
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
// not ours. A process in the middle of an execve shows an empty
// environment for an instant (its new memory is in place, its new stack
// not yet described): it is read again until its exec is done, so that a
// marked process is not missed for being caught between two programs.
func markedProcesses(match func(string) bool) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	self := os.Getpid()
	key := []byte(MarkEnv + "=")
	marked := func(env []byte) bool {
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, key); ok && match(string(v)) {
				return true
			}
		}
		return false
	}
	var r environReader
	var pids []int
	empty := map[int]int{} // pid → looks that found its exec done and its environment empty
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		env, err := r.read(pid)
		switch {
		case err != nil:
		case marked(env):
			pids = append(pids, pid)
		case len(env) == 0:
			empty[pid] = 0
		}
	}
	for i := 0; len(empty) > 0 && i < execRereads; i++ {
		for pid, n := range empty {
			// The stat first: read after an empty environment, a finished
			// exec could pass for an empty environment.
			st, ok := readStat(pid)
			if !ok || st.state == 'Z' || st.state == 'X' || st.flags&pfKthread != 0 {
				delete(empty, pid) // gone, or has no environment to wait for
				continue
			}
			env, err := r.read(pid)
			switch {
			case err != nil, len(env) > 0 && !marked(env):
				delete(empty, pid)
			case len(env) > 0:
				pids = append(pids, pid)
				delete(empty, pid)
			case st.envEnd != 0 && n+1 >= emptyRereads:
				delete(empty, pid) // started with an empty environment
			case st.envEnd != 0:
				empty[pid] = n + 1
			}
		}
		if len(empty) > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return pids
}

// environReader reads processes' environments, each in one read: the file
// holds the memory the process had when it was opened, and a read after
// that process has exec'd another program finds it gone and ends early, so
// an environment read in pieces across an exec would come out cut short,
// missing the variables at its end (where the mark is).
type environReader struct{ buf []byte }

func (r *environReader) read(pid int) ([]byte, error) {
	if r.buf == nil {
		r.buf = make([]byte, 64<<10)
	}
	for {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			return nil, err
		}
		n, err := f.Read(r.buf)
		f.Close()
		switch {
		case err == io.EOF:
			return nil, nil
		case err != nil:
			return nil, err
		case n < len(r.buf) || len(r.buf) >= maxEnviron:
			return r.buf[:n], nil
		}
		r.buf = make([]byte, 4*len(r.buf)) // did not fit: again, whole
	}
}

// maxEnviron bounds the environment read: the kernel takes at most a
// quarter of an 8 MiB stack for arguments and environment together.
const maxEnviron = 4 << 20

// execRereads bounds how long a sweep waits for processes caught in an
// execve (env_end still 0 in their stat): 2 s of 1 ms looks. An exec is
// done in well under a millisecond on an idle machine.
const execRereads = 2000

// emptyRereads is how many looks a process whose exec looks done but whose
// environment reads empty gets: the kernel may be still writing where the
// environment ends, or the process was started with none.
const emptyRereads = 20

// pfKthread is PF_KTHREAD from linux/sched.h, in /proc/PID/stat's flags.
const pfKthread = 0x00200000

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

// reapOrphans reaps zombie children of a subreaper agent that Start
// did not start itself: descendants of attempts, reparented after their
// parent died, that then exited on their own.
func reapOrphans() {
	if !subreaper.Load() {
		return
	}
	// Only zombies, by pid: waiting for any child would also take the
	// executors Start is still waiting for.
	for _, pid := range zombieChildren() {
		children.reap(pid)
	}
}

// zombieChildren lists the agent's zombie children outside its process
// group: those came from attempts (a zombie's namespaces are gone, so
// fromAttempt cannot tell more; one that had moved into the agent's group
// is left, a harmless entry, rather than risk a command's Wait).
func zombieChildren() []int {
	return ownChildren(func(pid int, st stat) bool { return st.state == 'Z' && st.pgrp != syscall.Getpgrp() })
}

// orphans lists the live children of the agent that came to it from
// attempts (fromAttempt) and that Start did not start.
func (s *childSet) orphans() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ownChildren(func(pid int, st stat) bool {
		return st.state != 'Z' && !s.pids[pid] && !s.spared[pid] && fromAttempt(pid, st)
	})
}

// fromAttempt reports whether a live child of the agent came to it from
// an attempt, reparented when its parent died, rather than being a
// command the agent runs itself (git, tmux, through os/exec): those stay
// in the agent's process group, namespaces and privileges, and they are
// the agent's work and their own Wait's to reap. Killed or reaped by a
// sweep, such a command's Wait failed ("waitid: no child processes").
// Start puts each attempt in a group of its own; a process of it may move
// to the agent's group (the same session), but not out of its network
// namespace, nor drop the no_new_privs that Landlock set on it.
func fromAttempt(pid int, st stat) bool {
	if st.pgrp != syscall.Getpgrp() {
		return true
	}
	if noNewPrivs(pid) != noNewPrivs(os.Getpid()) {
		return true
	}
	theirs, err1 := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	ours, err2 := os.Readlink("/proc/self/ns/net")
	return err1 == nil && err2 == nil && theirs != ours
}

// noNewPrivs reads a process's no_new_privs flag from /proc/PID/status.
func noNewPrivs(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	_, rest, ok := bytes.Cut(b, []byte("\nNoNewPrivs:"))
	if !ok {
		return false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	return string(bytes.TrimSpace(line)) == "1"
}

// ownChildren lists the agent's children that keep says to.
func ownChildren(keep func(pid int, st stat) bool) []int {
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
		if st, ok := readStat(pid); ok && st.ppid == self && keep(pid, st) {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads a process's parent and state from /proc/PID/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	st, ok := readStat(pid)
	return st.ppid, st.state, ok
}

// stat is what the sweep reads of /proc/PID/stat.
type stat struct {
	state  byte
	ppid   int
	pgrp   int
	flags  uint64
	envEnd uint64 // 0 while an execve is under way, and for zombies and kernel threads
}

// readStat reads /proc/PID/stat: fields 3 (state), 4 (ppid), 5 (pgrp), 9
// (flags) and 51 (env_end, Linux 3.5 and later; 0 where absent).
func readStat(pid int) (stat, bool) {
	f, err := procstat.Read(strconv.Itoa(pid))
	if err != nil {
		return stat{}, false
	}
	ppid, ok := f.Uint(4)
	pgrp, ok1 := f.Uint(5)
	flags, ok2 := f.Uint(9)
	if !ok || !ok1 || !ok2 {
		return stat{}, false
	}
	envEnd, _ := f.Uint(51)
	return stat{state: f.Field(3)[0], ppid: int(ppid), pgrp: int(pgrp), flags: flags, envEnd: envEnd}, true
}

// cpuOf reads a process's CPU time from /proc/PID/stat: fields 14 to 17
// (utime, stime, and its reaped children's cutime, cstime), in clock
// ticks; and whether it is stopped (state T, or t under a tracer).
func cpuOf(pid int) (ticks uint64, stopped bool, ok bool) {
	f, err := procstat.Read(strconv.Itoa(pid))
	if err != nil || len(f.Field(3)) == 0 {
		return 0, false, false
	}
	for n := 14; n <= 17; n++ {
		v, _ := f.Uint(n)
		ticks += v
	}
	st := f.Field(3)[0]
	return ticks, st == 'T' || st == 't', true
}

// ioOf reads the bytes a process read and wrote, from /proc/PID/io (rchar
// and wchar: every read and write, pipes and sockets included); 0 when it
// cannot be read.
func ioOf(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0
	}
	var n uint64
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte(": "))
		if ok && (string(k) == "rchar" || string(k) == "wchar") {
			x, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			n += x
		}
	}
	return n
}

// isKeeperProcess reports whether pid runs as a keeper.
func isKeeperProcess(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasPrefix(b, []byte(keeper.Arg0+"\x00"))
}

// processMark is the attempt mark pid carries, "" for none.
func processMark(pid int) string {
	var r environReader
	env, err := r.read(pid)
	if err != nil {
		return ""
	}
	key := []byte(MarkEnv + "=")
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, key); ok {
			return string(v)
		}
	}
	return ""
}
