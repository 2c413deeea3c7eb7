package runner

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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
)

// MarkEnv is the environment variable every process of an attempt carries:
// the executor gets it and its descendants inherit it, even those that
// leave the process group or start a session of their own (Codex and
// Claude Code run tool commands that way). After an attempt, every process
// still carrying its mark is killed (see process.sweep). The value is
// OWNER/ATTEMPT, so that an agent restarting after a crash can also end
// what its previous life left running (SweepOwner).
const MarkEnv = "AGENT_ATTEMPT_MARK"

// process is one executor process of an attempt, in a process group of its
// own, with the attempt's mark in its environment. On Linux it runs under a
// keeper (internal/keeper), which confines it and ends every process it
// starts; cmd is then the keeper's.
type process struct {
	cmd    *exec.Cmd
	keeper *keeper.Process // nil where attempts run without one
	pgid   int
	mark   string
	stdin  io.WriteCloser // nil unless asked for
	stdout *os.File       // read ends; the reader closes them
	stderr *os.File
	exited chan struct{} // closed once Wait has returned
	err    error         // Wait's error, valid after exited
	status keeper.Status // the keeper's report, valid after exited
}

// processSpec is what startProcess needs.
type processSpec struct {
	Name  string   // the command as configured, for errors
	Path  string   // resolved path of the binary
	Args  []string // argv after the name
	Dir   string
	Env   []string
	Mark  string    // the attempt's mark (MarkEnv); required
	Stdin io.Reader // fixed input; nil with StdinPipe means /dev/null
	// StdinPipe gives the caller the child's stdin as a pipe.
	StdinPipe bool
	// Confine, if set, is what the attempt's processes may reach.
	Confine *landlock.Policy
	// Grace is how long the executor gets between SIGTERM and SIGKILL
	// should the agent go away while it runs.
	Grace time.Duration
}

// startProcess starts a process in its own group, with stdout and stderr on
// pipes of its own (os.Pipe, so a grandchild holding them cannot hold up
// Wait), and waits for it in the background.
func startProcess(ps processSpec) (*process, error) {
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
	p := &process{cmd: cmd, mark: ps.Mark, stdout: outR, stderr: errR, exited: make(chan struct{})}
	if ps.StdinPipe {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
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
		p.keeper, err = keeper.Start(cmd, ps.Confine, ps.Grace, children.start)
	} else if ps.Confine != nil {
		err = errors.New("this program cannot confine attempts (it does not run them under a keeper)")
	} else {
		cmd.SysProcAttr = sysProcAttr()
		err = children.start(cmd)
	}
	outW.Close() // the child has its own copies
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, startError(ps.Name, err)
	}
	p.pgid = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		if p.keeper != nil {
			p.status = p.keeper.Status()
		}
		children.remove(p.pgid)
		close(p.exited)
	}()
	return p, nil
}

// signal sends sig to the executor's process group. A SIGKILL also
// arms keeperKillAfter: a keeper that has not ended its attempt by then is
// killed itself, and the agent (a subreaper) ends what it leaves.
func (p *process) signal(sig syscall.Signal) {
	if p.keeper == nil {
		_ = syscall.Kill(-p.pgid, sig)
		return
	}
	p.keeper.Signal(sig, true)
	if sig == syscall.SIGKILL {
		time.AfterFunc(keeperKillAfter, func() {
			select {
			case <-p.exited:
			default:
				_ = syscall.Kill(p.pgid, syscall.SIGKILL)
			}
		})
	}
}

// keeperKillAfter is how long a keeper told to SIGKILL its attempt may
// take before it is killed itself.
const keeperKillAfter = 5 * time.Second

// signalLeader sends sig to the executor process alone.
func (p *process) signalLeader(sig syscall.Signal) {
	if p.keeper == nil {
		_ = p.cmd.Process.Signal(sig)
		return
	}
	p.keeper.Signal(sig, false)
}

// sweep ends every process left of the attempt: its group, and every
// process anywhere that carries its mark; and, when its keeper died before
// it could end the attempt itself, what the keeper left to the agent. It
// returns how many processes it had to kill. Call it once the executor
// process (the keeper) has exited.
func (p *process) sweep() int {
	if p.keeper == nil {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	}
	n := sweepMark(func(m string) bool { return m == p.mark })
	if p.keeper != nil && p.status.Swept < 0 {
		n += killOrphans()
	}
	return n
}

// exitStatus fills an Exit from the ended process.
func (p *process) exitStatus(exit *Exit) {
	if p.keeper != nil {
		exit.ExitCode, exit.Signal = p.status.ExitCode, p.status.Signal
		return
	}
	st := p.cmd.ProcessState
	exit.ExitCode = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		exit.Signal = ws.Signal().String()
	}
	if p.err != nil && exit.ExitCode == 0 && exit.Signal == "" {
		exit.StartErr = p.err
	}
}

// SweepOwner kills every process marked as started by owner's attempts, as
// an agent that restarts after a crash does before it runs anything: a
// SIGKILLed agent cannot end what its executors left running. It returns
// how many it killed. Where processes cannot be listed it does nothing.
func SweepOwner(owner string) int {
	prefix := owner + "/"
	match := func(m string) bool { return strings.HasPrefix(m, prefix) }
	// Keepers first, and gently: a keeper told SIGTERM kills every process
	// of its attempt, marked or not, before it exits. Killed outright, it
	// would leave those that dropped the mark to init.
	endKeepers(match)
	return sweepMark(match)
}

// newMark makes an attempt's mark: OWNER/ATTEMPT/RANDOM.
func newMark(owner, attemptID string) string {
	b := make([]byte, 4)
	rand.Read(b)
	if owner == "" {
		owner = "agent"
	}
	return owner + "/" + attemptID + "/" + hex.EncodeToString(b)
}

// childSet is the set of processes the runner started and has not yet
// waited for. A subreaper agent reaps other zombie children (orphans of
// attempts) and leaves these to their own Wait; starting and reaping hold
// the same lock, so a child cannot be reaped between its start and its
// registration.
type childSet struct {
	mu   sync.Mutex
	pids map[int]bool
}

var children = &childSet{pids: map[int]bool{}}

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

// reap reaps zombie pid unless the runner is waiting for it itself.
func (s *childSet) reap(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pids[pid] {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// resolveBinary finds a command on PATH or by path, saying which of the two
// start errors stops it.
func resolveBinary(name string) (string, error) {
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
	return "", fmt.Errorf("%w: %s: %v", ErrExecutorNotFound, name, err)
}

// startError maps a failed start to the named start errors.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s: %v", ErrExecutorNotFound, name, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return fmt.Errorf("%w: %s: %v", ErrNotExecutable, name, err)
	}
	return fmt.Errorf("start %s: %w", name, err)
}
