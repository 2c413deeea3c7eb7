package keeper

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/procstat"
)

// canKeep is set by Main in a program that serves as its own keeper.
var canKeep bool

// Main runs the keeper and exits, in a process started as one (argv[0] is
// Arg0); anywhere else it only notes that this program can keep attempts,
// and returns. Call it first thing in main, and in TestMain of packages
// whose tests run attempts.
func Main() {
	if len(os.Args) == 0 {
		canKeep = true
		return
	}
	// Straight out: a keeper has nothing to flush, and its exit is what the
	// agent waits for (a race-detector build would sleep a second in
	// os.Exit, which the agent would take for a hung executor).
	switch os.Args[0] {
	case Arg0:
		syscall.Exit(keep())
	case stageArg0:
		syscall.Exit(stage())
	case probeArg0:
		syscall.Exit(probe())
	}
	canKeep = true
}

// keep is the keeper's life; it returns the keeper's exit code.
func keep() int {
	// The socket is the keeper's alone: the executor must neither hold
	// the agent's end open nor write to it.
	syscall.CloseOnExec(3)
	ctl := os.NewFile(3, "keeper socket")
	if ctl == nil {
		return 2
	}
	in := bufio.NewReader(ctl)
	k := &keeperProc{ctl: ctl}
	var first message
	if err := readMessage(in, &first); err != nil || first.Attempt == nil {
		return 2
	}
	spec := first.Attempt
	// Orphans of the attempt come to the keeper, not to init.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		k.send(message{Error: "keeper: become a subreaper: " + err.Error()})
		return 1
	}
	// SIGTERM to the keeper ends the attempt at once; the others a signal
	// sends to its whole process group are not the keeper's to act on.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)

	abi := 0
	if spec.Policy != nil {
		abi = landlock.ABI()
	}
	if spec.Spool != "" {
		return k.keepSpooled(in, spec, sigs, abi)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		k.send(message{Error: "keeper: " + err.Error()})
		return 1
	}
	if err := k.start(spec, []*os.File{os.Stdin, os.Stdout, os.Stderr}); err != nil {
		return 1
	}
	// The executor has its own copies of the standard streams: the agent
	// must see them close when the executor's side closes them.
	for fd := 0; fd <= 2; fd++ {
		_ = unix.Dup2(int(devNull.Fd()), fd)
	}
	devNull.Close()
	k.send(message{Started: k.pid, ABI: abi})

	exited := make(chan Status, 1)
	allGone := make(chan struct{})
	go k.reap(exited, allGone)
	agentGone := make(chan struct{})
	go k.commands(in, agentGone)

	var (
		st        Status
		killTimer <-chan time.Time
	)
	for done := false; !done; {
		select {
		case st = <-exited:
			done = true
		case <-agentGone:
			agentGone = nil
			k.signalGroup(syscall.SIGTERM)
			killTimer = time.After(spec.Grace)
		case <-killTimer:
			k.signalGroup(syscall.SIGKILL)
		case s := <-sigs:
			if s == syscall.SIGTERM {
				k.signalGroup(syscall.SIGKILL)
			}
		}
	}
	st.Swept = k.sweep(allGone)
	if k.proxy != nil {
		k.proxy.Close()
		d := k.proxy.Denied()
		st.Egress = &d
	}
	k.send(message{Exit: &st})
	return 0
}

// start starts the executor with stdio for its standard streams, through
// a stage when the attempt needs one; a failure is told to the agent.
func (k *keeperProc) start(spec *attempt, stdio []*os.File) error {
	var err error
	if spec.staged() {
		k.pid, k.proxy, err = startStaged(spec, stdio)
	} else {
		k.pid, err = startConfined(spec, stdio)
	}
	if err != nil {
		msg := message{Error: err.Error()}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			msg.Errno = int(errno)
		}
		k.send(msg)
	}
	return err
}

// startConfined starts the executor from a thread confined by the
// attempt's policy, if it has one, which the executor inherits; the
// thread is never used for anything else.
func startConfined(spec *attempt, stdio []*os.File) (int, error) {
	runtime.LockOSThread()
	if spec.Policy != nil {
		if _, err := landlock.RestrictThread(*spec.Policy); err != nil {
			return 0, errors.New("confine the attempt: " + err.Error())
		}
	}
	proc, err := os.StartProcess(spec.Path, spec.Args, &os.ProcAttr{Dir: spec.Dir, Env: spec.Env,
		Files: stdio,
		Sys:   &syscall.SysProcAttr{Setpgid: true}})
	if err != nil {
		return 0, err
	}
	return proc.Pid, nil
}

// keeperProc is the keeper's state.
type keeperProc struct {
	ctl   io.Writer // the agent's end; nil while none is attached (spool mode)
	sendM sync.Mutex
	pid   int           // the executor's, also its process group's
	proxy *egress.Proxy // the attempt's, when its network is confined
}

// send writes one message to the agent; a gone agent is not an error.
func (k *keeperProc) send(m message) {
	b, _ := json.Marshal(m)
	k.sendM.Lock()
	defer k.sendM.Unlock()
	if k.ctl != nil {
		_, _ = k.ctl.Write(append(b, '\n'))
	}
}

// commands carries out the agent's signals until the agent closes its end.
func (k *keeperProc) commands(in *bufio.Reader, agentGone chan<- struct{}) {
	defer close(agentGone)
	for {
		var m message
		if err := readMessage(in, &m); err != nil {
			return
		}
		if m.Signal <= 0 {
			continue
		}
		sig := syscall.Signal(m.Signal)
		if m.Group {
			k.signalGroup(sig)
		} else {
			_ = syscall.Kill(k.pid, sig)
		}
	}
}

func (k *keeperProc) signalGroup(sig syscall.Signal) { _ = syscall.Kill(-k.pid, sig) }

// reap reaps every child: the executor (its status goes to exited) and
// the orphans the keeper inherits. It closes allGone once the executor is
// reaped and the keeper has no child left.
// The executor is a child until reaped here, so no child left (ECHILD)
// comes only after its status went to exited.
func (k *keeperProc) reap(exited chan<- Status, allGone chan<- struct{}) {
	defer close(allGone)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // ECHILD: no child left
			return
		case pid == k.pid:
			st := Status{ExitCode: ws.ExitStatus()}
			if ws.Signaled() {
				st.ExitCode, st.Signal = -1, ws.Signal().String()
			}
			exited <- st
		}
	}
}

// sweep kills every process of the attempt still alive once the executor
// has exited: the members of its process group and the keeper's children,
// looking again as killed parents hand their children to the keeper, until
// the keeper has none. It returns how many it killed.
func (k *keeperProc) sweep(allGone <-chan struct{}) int {
	killed := map[int]bool{}
	// Most attempts leave nothing: the first look is soon after.
	wait := 100 * time.Microsecond
	for {
		for _, pid := range k.leftover() {
			if !killed[pid] && k.kill(pid) {
				killed[pid] = true
			}
		}
		select {
		case <-allGone:
			return len(killed)
		case <-time.After(wait):
			wait = min(2*wait, 5*time.Millisecond)
		}
	}
}

// leftover lists the keeper's live children. Every process of the attempt
// becomes one in turn: when a parent is killed, its children come to the
// keeper, a subreaper. The kernel lists each thread's children
// (/proc/self/task/TID/children); without that file, /proc is scanned.
func (k *keeperProc) leftover() []int {
	self := os.Getpid()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return k.scan(self)
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			return k.scan(self)
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && k.ours(pid, self) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// scan lists the live processes that are the keeper's children or in the
// executor's process group, from all of /proc.
func (k *keeperProc) scan(self int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		if k.ours(pid, self) {
			out = append(out, pid)
		}
	}
	return out
}

// ours reports whether pid is alive and the attempt's: a child of the
// keeper, or in the executor's process group.
func (k *keeperProc) ours(pid, self int) bool {
	f, err := procstat.Read(strconv.Itoa(pid))
	if err != nil {
		return false
	}
	state := f.Field(3)
	ppid, ok1 := f.Uint(4)
	pgrp, ok2 := f.Uint(5)
	if !ok1 || !ok2 || len(state) == 0 || state[0] == 'Z' || state[0] == 'X' {
		return false
	}
	return int(ppid) == self || int(pgrp) == k.pid
}

// kill SIGKILLs pid through a pidfd, checked to be still the attempt's
// process once held: a pid the keeper reaped since it looked may already
// be another process's.
func (k *keeperProc) kill(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return syscall.Kill(pid, syscall.SIGKILL) == nil
		}
		return false
	}
	defer unix.Close(fd)
	if !k.ours(pid, os.Getpid()) {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// readMessage reads one line of JSON.
func readMessage(in *bufio.Reader, m *message) error {
	line, err := in.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, m)
}
