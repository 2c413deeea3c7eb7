package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ExecConfig configures the exec executor. Zero fields take the defaults
// their comments give.
type ExecConfig struct {
	// Argv is the command, never run through a shell. Required.
	Argv []string
	// Env is added to the agent's environment, after it.
	Env []string
	// Dir is the working directory. Default: the agent's.
	Dir string
	// Grace is how long a stopped attempt gets between SIGTERM and
	// SIGKILL. Default 5 s.
	Grace time.Duration
	// MaxLine is the longest output line kept whole; longer lines are cut.
	// Default 64 KiB.
	MaxLine int
	// CloseGrace is how long a child may keep running after closing its
	// stdout before that counts as "stdio closed before a result".
	// Default 1 s.
	CloseGrace time.Duration
	// DrainTimeout bounds the wait for output after the child exits (a
	// grandchild that left the process group may hold the pipe). Default 2 s.
	DrainTimeout time.Duration
}

// Exec runs an argv per attempt, in its own process group.
type Exec struct{ cfg ExecConfig }

// NewExec returns an exec executor.
func NewExec(cfg ExecConfig) (*Exec, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("exec executor: empty command")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 5 * time.Second
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = 64 << 10
	}
	if cfg.CloseGrace <= 0 {
		cfg.CloseGrace = time.Second
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 2 * time.Second
	}
	return &Exec{cfg: cfg}, nil
}

// Name implements Executor.
func (e *Exec) Name() string { return "exec" }

// Probe implements Executor: is the command there and executable?
func (e *Exec) Probe(context.Context) error {
	_, err := e.resolve()
	return err
}

// resolve finds the command, saying which of the two start errors stops it.
func (e *Exec) resolve() (string, error) {
	name := e.cfg.Argv[0]
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return "", fmt.Errorf("%w: %s: %v", ErrNotExecutable, name, err)
	}
	if info, serr := os.Stat(name); serr == nil && (info.IsDir() || info.Mode()&0o111 == 0) {
		return "", fmt.Errorf("%w: %s", ErrNotExecutable, name)
	}
	return "", fmt.Errorf("%w: %s: %v", ErrExecutorNotFound, name, err)
}

// batchLines and batchBytes bound one lines event.
const (
	batchLines = 1000
	batchBytes = 256 << 10
)

// Run implements Executor.
func (e *Exec) Run(ctx context.Context, spec AttemptSpec, emit func(Event)) Exit {
	path, err := e.resolve()
	if err != nil {
		return Exit{StartErr: err, ExitCode: -1}
	}
	input, err := json.Marshal(spec.Task)
	if err != nil {
		return Exit{StartErr: fmt.Errorf("encode task: %w", err), ExitCode: -1}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return Exit{StartErr: err, ExitCode: -1}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return Exit{StartErr: err, ExitCode: -1}
	}
	cmd := exec.Command(path, e.cfg.Argv[1:]...)
	cmd.Args[0] = e.cfg.Argv[0]
	cmd.Dir = e.cfg.Dir
	cmd.Env = append(append(os.Environ(), e.cfg.Env...),
		"AGENT_TASK_ID="+spec.Task.ID, "AGENT_ATTEMPT="+strconv.Itoa(spec.Task.Attempt), "AGENT_MODEL="+spec.Task.Model)
	cmd.Stdin = bytes.NewReader(append(input, '\n'))
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	outW.Close() // the child has its own copies
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return Exit{StartErr: startError(e.cfg.Argv[0], err), ExitCode: -1}
	}
	pgid := cmd.Process.Pid

	var emitMu sync.Mutex
	send := func(ev Event) {
		emitMu.Lock()
		defer emitMu.Unlock()
		emit(ev)
	}
	sid := make([]byte, 4)
	rand.Read(sid)
	session := fmt.Sprintf("%x-%d", sid, pgid) // short form (first 4) tells attempts apart
	send(Event{Type: EventSession, SessionID: session})

	var sawResult sync.Once
	resultSeen := make(chan struct{})
	stdoutDone, stderrDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stdoutDone)
		e.read(outR, "stdout", session, true, send, func() { sawResult.Do(func() { close(resultSeen) }) })
	}()
	go func() {
		defer close(stderrDone)
		e.read(errR, "stderr", session, false, send, nil)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		exit        Exit
		stopping    bool
		killTimer   <-chan time.Time
		closeTimer  <-chan time.Time
		stdoutEOF   = stdoutDone
		waitErr     error
		processDone bool
	)
	stop := func() {
		if !stopping {
			stopping = true
			exit.Killed = true
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			killTimer = time.After(e.cfg.Grace)
		}
	}
	ctxDone := ctx.Done()
	for !processDone {
		select {
		case <-ctxDone:
			ctxDone = nil
			stop()
		case <-killTimer:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case <-stdoutEOF:
			stdoutEOF = nil
			select {
			case <-resultSeen:
			default:
				closeTimer = time.After(e.cfg.CloseGrace)
			}
		case <-closeTimer:
			exit.StdioClosed = true
			stop()
		case waitErr = <-exited:
			processDone = true
		}
	}
	// No child of the attempt outlives it: kill what is left of the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	drain := time.NewTimer(e.cfg.DrainTimeout)
	defer drain.Stop()
	for _, done := range []chan struct{}{stdoutDone, stderrDone} {
		select {
		case <-done:
		case <-drain.C:
			outR.Close() // a grandchild outside the group holds the pipe
			errR.Close()
			<-done
		}
	}
	outR.Close()
	errR.Close()

	exit.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		exit.Signal = ws.Signal().String()
	}
	if waitErr != nil && exit.ExitCode == 0 && exit.Signal == "" {
		exit.StartErr = waitErr
	}
	return exit
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

// read turns one pipe into events: JSON object lines on stdout are events,
// every other line a raw line. Raw lines are batched while more input is
// already buffered, so a burst costs few events and bounded memory.
func (e *Exec) read(f *os.File, stream, session string, events bool, send func(Event), onResult func()) {
	lr := newLineReader(f, e.cfg.MaxLine)
	var (
		batch []string
		size  int
	)
	flush := func() {
		if len(batch) > 0 {
			send(Event{Type: EventLines, SessionID: session, Stream: stream, Lines: batch})
			batch, size = nil, 0
		}
	}
	for {
		line, err := lr.next()
		if err != nil {
			flush()
			return
		}
		if events && len(line) > 0 && line[0] == '{' {
			if ev, ok := parseEvent(line); ok {
				flush()
				ev.SessionID = session
				if ev.Type == EventResult && onResult != nil {
					onResult()
				}
				send(ev)
				continue
			}
		}
		batch = append(batch, line)
		size += len(line)
		if len(batch) >= batchLines || size >= batchBytes || !lr.buffered() {
			flush()
		}
	}
}

// parseEvent reads one stdout line as an event, if it is one.
func parseEvent(line string) (Event, bool) {
	var ev Event
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		return Event{}, false
	}
	switch ev.Type {
	case EventPhase, EventProgress, EventOutput, EventTool, EventSideEffect, EventLog, EventResult, EventError:
		return ev, true
	}
	return Event{}, false
}
