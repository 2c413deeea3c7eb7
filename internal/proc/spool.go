package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/edgeagent/agent/internal/keeper"
)

// ErrDetached is what a spooled attempt's output readers return once the
// agent has detached from it (Detach): the attempt goes on without it.
var ErrDetached = errors.New("detached from the attempt")

// startSpooled is Start with a spool: the keeper owns the executor's
// standard streams.
func startSpooled(ps Spec) (*Process, error) {
	if !keeper.Supported() {
		return nil, startError(ps.Name, errors.New("this program cannot keep attempts past the agent (they do not run under a keeper here)"))
	}
	var input []byte
	if ps.Stdin != nil {
		b, err := io.ReadAll(ps.Stdin)
		if err != nil {
			return nil, fmt.Errorf("start %s: its input: %w", ps.Name, err)
		}
		input = b
	}
	cmd := exec.Command(ps.Path, ps.Args...)
	cmd.Args[0] = ps.Name
	cmd.Dir = ps.Dir
	cmd.Env = append(ps.Env, MarkEnv+"="+ps.Mark)
	k, err := keeper.StartSpooled(cmd, keeper.Sandbox{Files: ps.Confine, Egress: ps.Egress, User: ps.User}, ps.Grace,
		keeper.Spool{Dir: ps.Spool.Dir, Reattach: ps.Spool.Reattach, Stdin: input, KeepStdin: ps.StdinPipe}, children.start)
	if err != nil {
		return nil, startError(ps.Name, err)
	}
	p := newSpooledProcess(k, ps.Mark, cmd)
	if ps.StdinPipe {
		p.Stdin = &keeperInput{k: k}
	}
	go func() {
		// The keeper exits once released; reaped here, whenever that is.
		_ = cmd.Wait()
		children.remove(cmd.Process.Pid)
	}()
	return p, nil
}

func newSpooledProcess(k *keeper.Process, mark string, cmd *exec.Cmd) *Process {
	p := &Process{Pgid: k.KeeperPid(), keeper: k, cmd: cmd, mark: mark, exited: make(chan struct{}), detached: make(chan struct{})}
	p.Stdout, p.Stderr = p.spoolReader(true, 0), p.spoolReader(false, 0)
	go func() {
		select {
		case <-k.Exited():
			p.status = k.Status()
			close(p.exited)
		case <-p.detached:
		}
	}()
	return p
}

// Attach takes up again an attempt whose keeper kept it after the agent
// that started it went away: the keeper of the spool directory dir. The
// attempt's mark is the keeper's own. Its output is read from the start
// until ReadFrom says where to.
func Attach(dir string) (*Process, error) {
	k, err := keeper.Attach(dir)
	if err != nil {
		return nil, err
	}
	mark := processMark(k.KeeperPid())
	if mark == "" {
		k.Close()
		return nil, fmt.Errorf("attach %s: its keeper %d carries no attempt mark", dir, k.KeeperPid())
	}
	return newSpooledProcess(k, mark, nil), nil
}

// Mark is the attempt's mark (MarkEnv).
func (p *Process) Mark() string { return p.mark }

// Pid is the executor's process id.
func (p *Process) Pid() int {
	if p.keeper != nil {
		return p.keeper.Pid
	}
	return p.Pgid
}

// SpoolDir is the attempt's spool directory, "" without one.
func (p *Process) SpoolDir() string {
	if p.keeper == nil {
		return ""
	}
	return p.keeper.SpoolDir()
}

// Spooled reports whether the attempt has a spool.
func (p *Process) Spooled() bool { return p.detached != nil }

// LastCommit is the last commit the keeper held when the attempt was
// attached to (Attach); nil for one this process started.
func (p *Process) LastCommit() json.RawMessage {
	if p.keeper == nil {
		return nil
	}
	return p.keeper.LastCommit()
}

// ReadFrom has Stdout and Stderr read the spool from these offsets: where
// the agent's last commit says it had read to.
func (p *Process) ReadFrom(stdout, stderr int64) {
	p.Stdout, p.Stderr = p.spoolReader(true, stdout), p.spoolReader(false, stderr)
}

// Input writes data to the executor's stdin through its keeper, which
// writes a non-empty id once, whoever sends it again (an agent that
// attached again re-sending what its previous life sent).
func (p *Process) Input(id string, data []byte) error {
	if !p.Spooled() {
		return keeper.ErrNoSpool
	}
	return p.keeper.Input(id, data)
}

// CloseInput closes the executor's stdin once what was sent before is
// written.
func (p *Process) CloseInput() error {
	if !p.Spooled() {
		return keeper.ErrNoSpool
	}
	return p.keeper.CloseInput()
}

// Commit leaves raw with the keeper, for the agent that attaches next.
func (p *Process) Commit(raw json.RawMessage) error {
	if !p.Spooled() {
		return keeper.ErrNoSpool
	}
	return p.keeper.Commit(raw)
}

// CommitRead is Commit of a commit that has read the attempt's stdout and
// stderr to these offsets: the keeper drops what is before from the
// spool, so that it holds on disk only what is not committed.
func (p *Process) CommitRead(raw json.RawMessage, stdout, stderr int64) error {
	if !p.Spooled() {
		return keeper.ErrNoSpool
	}
	return p.keeper.CommitRead(raw, keeper.Spooled{Stdout: stdout, Stderr: stderr})
}

// SpoolSize is how much output the attempt's spool holds: what the
// executor has printed, both streams.
func (p *Process) SpoolSize() int64 {
	if !p.Spooled() {
		return 0
	}
	s, _ := p.keeper.Spooled()
	return s.Stdout + s.Stderr
}

// Detach stops this process's readers of the attempt's output: they
// return ErrDetached. Exited is never closed after it. Leave then leaves
// the keeper.
func (p *Process) Detach() {
	if !p.Spooled() {
		return
	}
	p.detach.Do(func() { close(p.detached) })
}

// Leave leaves the keeper without releasing it: the attempt goes on, for
// the agent that attaches next. Detach first.
func (p *Process) Leave() {
	if p.Spooled() {
		p.Detach()
		p.keeper.Close()
	}
}

// Release tells the keeper the attempt's end is recorded: it exits, and
// the spool directory is the caller's to remove. Call it once Exited is
// closed.
func (p *Process) Release() {
	if p.Spooled() {
		p.keeper.Release()
	}
}

// spoolReader reads one of the spool's files from offset.
func (p *Process) spoolReader(stdout bool, offset int64) *spoolReader {
	name := keeper.StderrName
	if stdout {
		name = keeper.StdoutName
	}
	r := &spoolReader{stdout: stdout, pos: offset, k: p.keeper, detached: p.detached, closed: make(chan struct{})}
	// The keeper made the file before it started the executor.
	r.f, r.err = os.Open(filepath.Join(p.keeper.SpoolDir(), name))
	return r
}

// spoolReader reads a spool file as the keeper writes it: at its end, it
// waits until the keeper says there is more, or that the stream ended.
type spoolReader struct {
	f        *os.File
	err      error // opening f
	stdout   bool
	pos      int64
	k        *keeper.Process
	detached <-chan struct{}
	closed   chan struct{}
	once     sync.Once
}

func (r *spoolReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		s, changed := r.k.Spooled()
		size, eof := s.Stderr, s.StderrEOF
		if r.stdout {
			size, eof = s.Stdout, s.StdoutEOF
		}
		if r.pos < size {
			if r.err != nil {
				return 0, r.err
			}
			n, err := r.f.ReadAt(b[:min(int64(len(b)), size-r.pos)], r.pos)
			r.pos += int64(n)
			if n > 0 {
				return n, nil
			}
			if err != nil && err != io.EOF {
				return 0, err
			}
		} else if eof {
			return 0, io.EOF
		}
		select {
		case <-changed:
		case <-r.closed:
			return 0, os.ErrClosed
		case <-r.detached:
			return 0, ErrDetached
		}
	}
}

func (r *spoolReader) Close() error {
	r.once.Do(func() {
		close(r.closed)
		if r.f != nil {
			r.f.Close()
		}
	})
	return nil
}

// keeperInput is the executor's stdin through its keeper.
type keeperInput struct{ k *keeper.Process }

func (w *keeperInput) Write(b []byte) (int, error) {
	if err := w.k.Input("", append([]byte(nil), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *keeperInput) Close() error { return w.k.CloseInput() }

// signalKeeper kills an attached keeper that did not end its attempt in
// time, if it is still one (not this process's child, its pid could be
// another's by now).
func signalKeeper(pid int) {
	if isKeeperProcess(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
