package keeper

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Supported reports whether attempts can run under a keeper here: on
// Linux, in a program that called Main.
func Supported() bool { return canKeep }

// Process is an executor running under its keeper.
type Process struct {
	// Keeper is the keeper's command; wait for it with Keeper.Wait, then
	// read Status. Nil for a keeper attached to (Attach): it is not this
	// process's child.
	Keeper *exec.Cmd
	// Pid is the executor's; its process group is its own.
	Pid int
	// ABI is the Landlock ABI the attempt is confined with; 0 when it is
	// not.
	ABI int

	ctl  io.ReadWriteCloser
	in   *bufio.Reader
	mu   sync.Mutex
	done bool

	spool *spooled // nil without a spool
}

// Spool makes an attempt outlive its agent (see spool_linux.go).
type Spool struct {
	// Dir is the attempt's spool directory, made by the caller, private
	// to it (0700, in the agent's data directory).
	Dir string
	// Reattach is how long the attempt goes on once its agent has gone
	// without releasing it.
	Reattach time.Duration
	// Stdin is written to the executor's stdin first; KeepStdin leaves
	// it open for Input, else it is closed after.
	Stdin     []byte
	KeepStdin bool
}

// Start runs cmd's program (Path, Args, Dir, Env and the standard streams
// as set on it) under a keeper, confined as sb says.
// grace is how long the executor gets between SIGTERM and SIGKILL should
// the agent go away. start starts the keeper's command (the caller may
// want to register the child as it starts); nil means cmd.Start. Start
// returns once the executor runs, or with a *StartError when the keeper
// could not start it.
func Start(cmd *exec.Cmd, sb Sandbox, grace time.Duration, start func(*exec.Cmd) error) (*Process, error) {
	return startKeeper(cmd, sb, grace, nil, start)
}

// StartSpooled is Start with a spool: the keeper owns the executor's
// standard streams (cmd's are not used) and the attempt outlives the
// agent for sp.Reattach. Read the output with Spooled and the spool
// files, write to stdin with Input.
func StartSpooled(cmd *exec.Cmd, sb Sandbox, grace time.Duration, sp Spool, start func(*exec.Cmd) error) (*Process, error) {
	if sp.Dir == "" || sp.Reattach <= 0 {
		return nil, errorf("a spool needs a directory and a time to outlive its agent")
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	return startKeeper(cmd, sb, grace, &sp, start)
}

func startKeeper(cmd *exec.Cmd, sb Sandbox, grace time.Duration, sp *Spool, start func(*exec.Cmd) error) (*Process, error) {
	if !canKeep {
		return nil, ErrNotKeeper
	}
	if sb.User != nil && os.Geteuid() != 0 {
		return nil, errorf("only a keeper running as root runs an attempt as another user")
	}
	if start == nil {
		start = (*exec.Cmd).Start
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, errorf("socket: %w", err)
	}
	// Ours non-blocking, so that closing it ends a read under way.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, errorf("socket: %w", err)
	}
	ctl, theirs := os.NewFile(uintptr(fds[0]), "keeper socket"), os.NewFile(uintptr(fds[1]), "keeper socket")
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	spec := attempt{Path: cmd.Path, Args: cmd.Args, Dir: cmd.Dir, Env: dedupEnv(env), Policy: sb.Files, Egress: sb.Egress, User: sb.User, Grace: grace}
	if sp != nil {
		spec.Spool, spec.Reattach, spec.Stdin, spec.KeepStdin = sp.Dir, sp.Reattach, sp.Stdin, sp.KeepStdin
	}
	// The keeper is this very binary, the one running now even if its file
	// was replaced since.
	cmd.Path = "/proc/self/exe"
	cmd.Args = append([]string{Arg0}, cmd.Args...)
	cmd.Dir = ""
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = start(cmd)
	theirs.Close()
	if err != nil {
		ctl.Close()
		return nil, errorf("start: %w", err)
	}
	p := &Process{Keeper: cmd, ctl: ctl, in: bufio.NewReader(ctl)}
	if err := p.send(message{Attempt: &spec}); err != nil {
		return p.failed(errorf("send the attempt: %w", err))
	}
	var m message
	if err := readMessage(p.in, &m); err != nil {
		return p.failed(errorf("no answer from the keeper: %v", err))
	}
	if m.Started == 0 {
		return p.failed(&StartError{Msg: m.Error, Errno: syscall.Errno(m.Errno)})
	}
	p.Pid, p.ABI = m.Started, m.ABI
	if sp != nil {
		p.spool = newSpooled(sp.Dir, cmd.Process.Pid, nil, Spooled{}, nil)
		go p.pump()
	}
	return p, nil
}

// dedupEnv keeps the last value of each variable, in the order of first
// appearance: what os/exec gives a command whose Env sets a name twice.
func dedupEnv(env []string) []string {
	last := map[string]int{}
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	out := make([]string, 0, len(last))
	seen := map[string]bool{}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !seen[name] {
			seen[name] = true
			out = append(out, env[last[name]])
		}
	}
	return out
}

// failed waits for a keeper that could not start its executor.
func (p *Process) failed(err error) (*Process, error) {
	p.ctl.Close()
	_ = p.Keeper.Wait()
	return nil, err
}

// Signal sends sig to the executor's process group (group) or to the
// executor alone, through the keeper.
func (p *Process) Signal(sig syscall.Signal, group bool) {
	_ = p.send(message{Signal: int(sig), Group: group})
}

func (p *Process) send(m message) error {
	b, _ := json.Marshal(m)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return os.ErrClosed
	}
	_, err := p.ctl.Write(append(b, '\n'))
	return err
}

// Status is how the executor ended, read once the keeper has exited
// (Keeper.Wait returned), or, with a spool, once Exited is closed. A
// keeper that died before it could say (killed) gives its own end
// instead, with Swept -1.
func (p *Process) Status() Status {
	if p.spool != nil {
		return p.spool.status()
	}
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	defer p.ctl.Close()
	for {
		var m message
		if err := readMessage(p.in, &m); err != nil {
			break
		}
		if m.Exit != nil {
			return *m.Exit
		}
	}
	st := Status{ExitCode: -1, Swept: -1}
	if ps := p.Keeper.ProcessState; ps != nil {
		st.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.Signal = ws.Signal().String()
		}
	}
	return st
}
