package proc

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
)

// MarkEnv is the environment variable every process of an attempt carries:
// the executor gets it and its descendants inherit it, even those that
// leave the process group or start a session of their own (Codex and
// Claude Code run tool commands that way). After an attempt, every process
// still carrying its mark is killed (see Process.Sweep). The value is
// OWNER/ATTEMPT, so that an agent restarting after a crash can also end
// what its previous life left running (SweepOwner).
const MarkEnv = "AGENT_ATTEMPT_MARK"

// Process is one executor process of an attempt, in a process group of its
// own, with the attempt's mark in its environment. On Linux it runs under a
// keeper (internal/keeper), which confines it and ends every process it
// starts; cmd is then the keeper's.
type Process struct {
	// Pgid is the process group signals go to: the executor's, or its
	// keeper's when it runs under one.
	Pgid int
	// Stdin is the child's stdin, nil unless Spec.StdinPipe asked for it.
	Stdin io.WriteCloser
	// Stdout and Stderr are the child's output: the read ends of its
	// pipes, or, with a spool, readers of the spool files that wait for
	// more until the keeper says the stream ended. The reader closes
	// them (Drain does).
	Stdout, Stderr io.ReadCloser

	cmd    *exec.Cmd
	keeper *keeper.Process // nil where attempts run without one
	mark   string
	exited chan struct{} // closed once Wait has returned
	err    error         // Wait's error, valid after exited
	status keeper.Status // the keeper's report, valid after exited

	detached chan struct{} // closed by Detach (a spool only)
	detach   sync.Once
}

// Spec is what Start needs.
type Spec struct {
	Name  string   // the command as configured, for errors
	Path  string   // resolved path of the binary
	Args  []string // argv after the name
	Dir   string
	Env   []string
	Mark  string    // the attempt's mark (MarkEnv); required
	Stdin io.Reader // fixed input; nil with StdinPipe means /dev/null
	// StdinPipe gives the caller the child's stdin as a pipe. With a
	// spool, Stdin is written first, then the pipe is the caller's.
	StdinPipe bool
	// Confine, if set, is what the attempt's processes may reach.
	Confine *landlock.Policy
	// Egress, if set, is where they may connect (a network namespace of
	// their own); nil leaves them the host's network.
	Egress *egress.Policy
	// User, if set, is who they run as (an agent running as root only).
	User *keeper.User
	// Grace is how long the executor gets between SIGTERM and SIGKILL
	// should the agent go away while it runs.
	Grace time.Duration
	// Spool, if set, makes the attempt outlive the agent (see Spool).
	Spool *Spool
}

// Spool makes an attempt outlive the agent that starts it, on Linux: its
// keeper owns its standard streams and spools its output to Dir, where an
// agent that starts later attaches to it again (Attach), for Reattach
// after the agent went away. See internal/keeper.
type Spool struct {
	// Dir is the attempt's spool directory, made private (0700) by the
	// caller, out of every task's reach.
	Dir string
	// Reattach is how long the attempt goes on once its agent has gone.
	Reattach time.Duration
}

// Start starts a process in its own group, with stdout and stderr on
// pipes of its own (os.Pipe, so a grandchild holding them cannot hold up
// Wait), and waits for it in the background.
func Start(ps Spec) (*Process, error) {
	if ps.Spool != nil {
		return startSpooled(ps)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(ps.Path, ps.Args...)
	cmd.Args[0] = ps.Name
	cmd.Dir = ps.Dir
	cmd.Env = append(ps.Env, MarkEnv+"="+ps.Mark)
	cmd.Stdout, cmd.Stderr = outW, errW
	p := &Process{cmd: cmd, mark: ps.Mark, Stdout: outR, Stderr: errR, exited: make(chan struct{})}
	if ps.StdinPipe {
		if p.Stdin, err = cmd.StdinPipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, err
		}
	} else {
		cmd.Stdin = ps.Stdin
	}
	if keeper.Supported() {
		p.keeper, err = keeper.Start(cmd, keeper.Sandbox{Files: ps.Confine, Egress: ps.Egress, User: ps.User}, ps.Grace, children.start)
	} else if ps.Confine != nil || ps.Egress != nil || ps.User != nil {
		err = errors.New("this program cannot confine attempts (it does not run them under a keeper)")
	} else {
		cmd.SysProcAttr = SysProcAttr()
		err = children.start(cmd)
	}
	outW.Close() // the child has its own copies
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, startError(ps.Name, err)
	}
	p.Pgid = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		if p.keeper != nil {
			p.status = p.keeper.Status()
		}
		children.remove(p.Pgid)
		close(p.exited)
	}()
	return p, nil
}

// Signal sends sig to the executor's process group. A SIGKILL also
// arms keeperKillAfter: a keeper that has not ended its attempt by then is
// killed itself, and the agent (a subreaper) ends what it leaves.
func (p *Process) Signal(sig syscall.Signal) {
	if p.keeper == nil {
		_ = syscall.Kill(-p.Pgid, sig)
		return
	}
	p.keeper.Signal(sig, true)
	if sig == syscall.SIGKILL {
		time.AfterFunc(keeperKillAfter, func() {
			select {
			case <-p.exited:
			case <-p.detached:
			default:
				if p.cmd == nil {
					signalKeeper(p.Pgid)
				} else {
					_ = syscall.Kill(p.Pgid, syscall.SIGKILL)
				}
			}
		})
	}
}

// keeperKillAfter is how long a keeper told to SIGKILL its attempt may
// take before it is killed itself.
const keeperKillAfter = 5 * time.Second

// SignalLeader sends sig to the executor process alone.
func (p *Process) SignalLeader(sig syscall.Signal) {
	if p.keeper == nil {
		_ = p.cmd.Process.Signal(sig)
		return
	}
	p.keeper.Signal(sig, false)
}

// Sweep ends every process left of the attempt: its group, and every
// process anywhere that carries its mark; and, when its keeper died before
// it could end the attempt itself, what the keeper left to the agent. It
// returns how many processes it had to kill. Call it once the executor
// process (the keeper) has exited.
func (p *Process) Sweep() int {
	if p.keeper == nil {
		_ = syscall.Kill(-p.Pgid, syscall.SIGKILL)
	}
	match := func(m string) bool { return m == p.mark }
	if p.Spooled() {
		// The keeper carries the mark and is waiting to be released.
		n := sweepMarkBut(match, p.Pgid)
		if p.status.Swept < 0 {
			n += killOrphans()
		}
		return n
	}
	n := sweepMark(match)
	if p.keeper != nil && p.status.Swept < 0 {
		n += killOrphans()
	}
	return n
}

// Egress is what the attempt's proxy refused, nil when its network was not
// confined. Call it once Exited is closed.
func (p *Process) Egress() *egress.Denied {
	if p.keeper == nil {
		return nil
	}
	return p.status.Egress
}

// Exited is closed once the executor process (the keeper) has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Status says how the ended process ended: its exit code (-1 when a signal
// ended it) and the signal's name; err is set when it could not be waited
// for, having reported neither. Call it once Exited is closed.
func (p *Process) Status() (exitCode int, signal string, err error) {
	if p.keeper != nil {
		return p.status.ExitCode, p.status.Signal, nil
	}
	st := p.cmd.ProcessState
	exitCode = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal = ws.Signal().String()
	}
	if p.err != nil && exitCode == 0 && signal == "" {
		err = p.err
	}
	return exitCode, signal, err
}

// Drain waits, for at most timeout, for the readers to reach the end of
// the output (each done is closed when its reader returns); then it closes
// the pipes under them (something outside the attempt's reach holds them
// open) and waits for the readers to return.
func (p *Process) Drain(timeout time.Duration, done ...chan struct{}) {
	drain := time.NewTimer(timeout)
	defer drain.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-drain.C:
			p.Stdout.Close()
			p.Stderr.Close()
			<-d
		}
	}
	p.Stdout.Close()
	p.Stderr.Close()
}

// SweepOwner kills every process marked as started by owner's attempts, as
// an agent that restarts after a crash does before it runs anything: a
// SIGKILLed agent cannot end what its executors left running. The
// attempts whose marks are spared are left alone: those the agent has
// attached to again (Attach). It returns how many it killed. Where
// processes cannot be listed it does nothing.
func SweepOwner(owner string, spared ...string) int {
	prefix := owner + "/"
	match := func(m string) bool { return strings.HasPrefix(m, prefix) && !slices.Contains(spared, m) }
	// Keepers first, and gently: a keeper told SIGTERM kills every process
	// of its attempt, marked or not, before it exits. Killed outright, it
	// would leave those that dropped the mark to init.
	endKeepers(match)
	return sweepMark(match)
}

// OwnerProcesses lists the live processes marked as started by owner's
// attempts: none should be left once its attempts have ended.
func OwnerProcesses(owner string) []int {
	return markedProcesses(func(m string) bool { return strings.HasPrefix(m, owner+"/") })
}

// NewMark makes an attempt's mark: OWNER/ATTEMPT/RANDOM ("agent" when
// owner is empty).
func NewMark(owner, attemptID string) string {
	b := make([]byte, 4)
	rand.Read(b)
	if owner == "" {
		owner = "agent"
	}
	return owner + "/" + attemptID + "/" + hex.EncodeToString(b)
}

// childSet is the set of processes Start started and has not yet
// waited for. A subreaper agent reaps other zombie children (orphans of
// attempts) and leaves these to their own Wait; starting and reaping hold
// the same lock, so a child cannot be reaped between its start and its
// registration.
type childSet struct {
	mu   sync.Mutex
	pids map[int]bool
	// spared are children Start did not start that a sweep must not
	// kill as orphans (see Spare); their zombies are reaped all the same.
	spared map[int]bool
}

var children = &childSet{pids: map[int]bool{}, spared: map[int]bool{}}

// Spare tells the sweeps that pid, a daemon that came to the agent (a
// subreaper) when its parent exited, is the agent's own and not left of an
// attempt: the tmux view's server is one. A sweep that kills orphans
// leaves it alone; its zombie is still reaped.
func Spare(pid int) {
	children.mu.Lock()
	children.spared[pid] = true
	children.mu.Unlock()
}

// start starts cmd and registers it.
func (s *childSet) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	s.pids[cmd.Process.Pid] = true
	return nil
}

func (s *childSet) remove(pid int) {
	s.mu.Lock()
	delete(s.pids, pid)
	s.mu.Unlock()
}

// reap reaps zombie pid unless Start's own Wait is waiting for it.
func (s *childSet) reap(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pids[pid] {
		var ws syscall.WaitStatus
		if got, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); got == pid {
			delete(s.spared, pid) // the pid may be another process's next
		}
	}
}

// Start errors: Resolve and Start wrap one of these when that is why a
// command cannot run.
var (
	ErrNotFound      = errors.New("executor not found")
	ErrNotExecutable = errors.New("executor not executable")
)

// Resolve finds a command on PATH or by path, as an absolute path, saying
// which of the two start errors stops it.
func Resolve(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		// Absolute: the attempt runs in its work directory, where a path
		// relative to the agent's would not be found.
		return filepath.Abs(path)
	}
	if errors.Is(err, fs.ErrPermission) {
		return "", fmt.Errorf("%w: %s: %v", ErrNotExecutable, name, err)
	}
	if info, serr := os.Stat(name); serr == nil && (info.IsDir() || info.Mode()&0o111 == 0) {
		return "", fmt.Errorf("%w: %s", ErrNotExecutable, name)
	}
	return "", fmt.Errorf("%w: %s: %v", ErrNotFound, name, err)
}

// startError maps a failed start to the named start errors.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s: %v", ErrNotFound, name, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return fmt.Errorf("%w: %s: %v", ErrNotExecutable, name, err)
	}
	return fmt.Errorf("start %s: %w", name, err)
}

// Located says where a command was found, or why it was not: its absolute
// path, or "NAME: not found".
func Located(name string) string {
	path, err := Resolve(name)
	if err != nil {
		return name + ": not found"
	}
	return path
}
