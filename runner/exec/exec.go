// Package exec is the exec executor: it runs an argv (never through a
// shell) per attempt, in a process group of its own, writes the task to its
// stdin as one JSON line, and reads its stdout's JSON object lines as
// events (runner.Event) and every other line of stdout or stderr as a log
// line. runner.Exit 0 completes the attempt; anything else fails it.
package exec

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
)

// Config configures the exec executor. Zero fields take the defaults
// their comments give.
type Config struct {
	// Argv is the command, never run through a shell. Required.
	Argv []string
	// Env is set in the child's environment (NAME=VALUE), after the
	// variables allowed through from the agent's (see runner.CheckEnvNames).
	Env []string
	// EnvPass names more of the agent's variables to pass on: NAME, or
	// PREFIX* (--executor-env).
	EnvPass []string
	// Dir is the working directory of attempts given no work directory of
	// their own (runner.AttemptSpec.WorkDir). Default: the agent's.
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
type Exec struct{ cfg Config }

// New returns an exec executor.
func New(cfg Config) (*Exec, error) {
	if len(cfg.Argv) == 0 || cfg.Argv[0] == "" {
		return nil, errors.New("exec executor: empty command")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = runner.DefaultKillGrace
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

// Name implements runner.Executor.
func (e *Exec) Name() string { return "exec" }

// Probe implements runner.Executor: is the command there and executable?
func (e *Exec) Probe(context.Context) error {
	_, err := e.resolve()
	return err
}

// resolve finds the command, saying which of the two start errors stops it.
func (e *Exec) resolve() (string, error) { return proc.Resolve(e.cfg.Argv[0]) }

// batchLines and batchBytes bound one lines event.
const (
	batchLines = 1000
	batchBytes = 256 << 10
)

// Run implements runner.Executor.
func (e *Exec) Run(ctx context.Context, spec runner.AttemptSpec, emit func(runner.Event)) runner.Exit {
	path, err := e.resolve()
	if err != nil {
		return runner.Exit{StartErr: err, ExitCode: -1}
	}
	in := spec.Task
	in.Resume = spec.Resume
	input, err := json.Marshal(in)
	if err != nil {
		return runner.Exit{StartErr: fmt.Errorf("encode task: %w", err), ExitCode: -1}
	}
	dir := spec.WorkDir
	if dir == "" {
		dir = e.cfg.Dir
	}
	p, err := proc.Start(proc.Spec{Name: e.cfg.Argv[0], Path: path, Args: e.cfg.Argv[1:], Dir: dir,
		Env: spec.Environ(e.cfg.EnvPass, e.cfg.Env), Mark: spec.ProcessMark(),
		Stdin: bytes.NewReader(append(input, '\n')), Grace: e.cfg.Grace, Confine: spec.Confinement(),
		Egress: spec.EgressPolicy(), User: spec.ProcUser()})
	if err != nil {
		return runner.Exit{StartErr: err, ExitCode: -1}
	}

	var emitMu sync.Mutex
	send := func(ev runner.Event) {
		emitMu.Lock()
		defer emitMu.Unlock()
		emit(ev)
	}
	sid := make([]byte, 4)
	rand.Read(sid)
	session := fmt.Sprintf("%x-%d", sid, p.Pgid) // short form (first 4) tells attempts apart
	if spec.Resume != nil {
		session = spec.Resume.SessionID // a continue goes on in the session it continues
	}
	send(runner.Event{Type: runner.EventSession, SessionID: session})

	var sawResult sync.Once
	resultSeen := make(chan struct{})
	stdoutDone, stderrDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stdoutDone)
		e.read(p.Stdout, runner.StreamStdout, session, true, send, func() { sawResult.Do(func() { close(resultSeen) }) })
	}()
	go func() {
		defer close(stderrDone)
		e.read(p.Stderr, runner.StreamStderr, session, false, send, nil)
	}()

	var (
		exit       runner.Exit
		stopping   bool
		killTimer  <-chan time.Time
		closeTimer <-chan time.Time
		stdoutEOF  = stdoutDone
	)
	stop := func() {
		if !stopping {
			stopping = true
			exit.Killed = true
			p.Signal(syscall.SIGTERM)
			killTimer = time.After(e.cfg.Grace)
		}
	}
	ctxDone := ctx.Done()
	for running := true; running; {
		select {
		case <-ctxDone:
			ctxDone = nil
			stop()
		case <-killTimer:
			p.Signal(syscall.SIGKILL)
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
		case <-p.Exited():
			running = false
		}
	}
	// No process of the attempt outlives it: its group, and whatever
	// carries its mark.
	p.Sweep()
	p.Drain(e.cfg.DrainTimeout, stdoutDone, stderrDone)
	exit.SetStatus(p)
	return exit
}

// read turns one pipe into events: JSON object lines on stdout are events,
// every other line a raw line. Raw lines are batched while more input is
// already buffered, so a burst costs few events and bounded memory.
func (e *Exec) read(f *os.File, stream runner.Stream, session string, events bool, send func(runner.Event), onResult func()) {
	lr := proc.NewLineReader(f, e.cfg.MaxLine)
	var (
		batch []string
		size  int
	)
	flush := func() {
		if len(batch) > 0 {
			send(runner.Event{Type: runner.EventLines, SessionID: session, Stream: stream, Lines: batch})
			batch, size = nil, 0
		}
	}
	for {
		line, err := lr.Next()
		if err != nil {
			flush()
			return
		}
		if events && len(line) > 0 && line[0] == '{' {
			if ev, ok := parseEvent(line); ok {
				flush()
				ev.SessionID = session
				if ev.Type == runner.EventResult && onResult != nil {
					onResult()
				}
				send(ev)
				continue
			}
		}
		batch = append(batch, line)
		size += len(line)
		if len(batch) >= batchLines || size >= batchBytes || !lr.Buffered() {
			flush()
		}
	}
}

// parseEvent reads one stdout line as an event, if it is one. A session
// line, {"type":"session","path":FILE}, says where the child keeps its
// session (an absolute path): a child that says so can be continued.
func parseEvent(line string) (runner.Event, bool) {
	var ev struct {
		runner.Event
		Path string `json:"path"`
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		return runner.Event{}, false
	}
	switch ev.Type {
	case runner.EventPhase, runner.EventProgress, runner.EventOutput, runner.EventTool, runner.EventSideEffect, runner.EventLog, runner.EventResult, runner.EventError, runner.EventUsage:
		return ev.Event, true
	case runner.EventSession:
		if filepath.IsAbs(ev.Path) {
			return runner.Event{Type: runner.EventSession, SessionPath: filepath.Clean(ev.Path)}, true
		}
	}
	return runner.Event{}, false
}

// Resumes implements runner.Resumer: a child that names its session
// file (a session line) is continued with the task's resume field set.
func (e *Exec) Resumes() bool { return true }

// Describe says what the executor runs, for the agent's start banner.
func (e *Exec) Describe() string {
	return "exec (" + strings.Join(append([]string{proc.Located(e.cfg.Argv[0])}, e.cfg.Argv[1:]...), " ") + ")"
}
