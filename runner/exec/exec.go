// Package exec is the exec executor: it runs an argv (never through a
// shell) per attempt, in a process group of its own, writes the task to its
// stdin as one JSON line, and reads its stdout's JSON object lines as
// events (runner.Event) and every other line of stdout or stderr as a log
// line. runner.Exit 0 completes the attempt; anything else fails it, and
// the last lines of its stderr go with the exit (runner.Exit.Stderr), for
// the runner to read why when no error event said.
//
// A child may ask before it acts: an approval line on stdout
// ({"type":"approval","id",…}) is answered by the approval policy, or by
// a person, on its stdin ({"type":"reply","id","decision"}). With an
// approval policy other than never its stdin stays open for the answers;
// with never it ends after the task, as it always has, and every question
// is declined unanswered.
package exec

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
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
	// Approval answers the child's approval lines: never (default: its
	// stdin ends after the task, and a question is declined), accept,
	// decline, or ask a person (runner.AttemptSpec.Ask).
	Approval runner.ApprovalPolicy
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
	switch cfg.Approval {
	case "":
		cfg.Approval = runner.ApprovalNever
	case runner.ApprovalNever, runner.ApprovalAcceptAll, runner.ApprovalDeclineAll, runner.ApprovalAsk:
	default:
		return nil, fmt.Errorf("exec executor: approval policy %q: want never, accept, decline or ask", cfg.Approval)
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
	in := spec.Task
	in.Resume = spec.Resume
	input, err := json.Marshal(in)
	if err != nil {
		return runner.Exit{StartErr: fmt.Errorf("encode task: %w", err), ExitCode: -1}
	}
	var (
		p  *proc.Process
		st execState
	)
	if re := spec.Reattach; re != nil {
		// Taken up again: from where the last checkpoint says, or from
		// the start when there was none (nothing was reported).
		p = re.Process
		if re.State != nil {
			if err := json.Unmarshal(re.State, &st); err != nil {
				return runner.Exit{StartErr: fmt.Errorf("the attempt's checkpoint: %w", err), ExitCode: -1}
			}
		}
		p.ReadFrom(st.Stdout, st.Stderr)
	} else {
		path, err := e.resolve()
		if err != nil {
			return runner.Exit{StartErr: err, ExitCode: -1}
		}
		dir := spec.WorkDir
		if dir == "" {
			dir = e.cfg.Dir
		}
		ps := proc.Spec{Name: e.cfg.Argv[0], Path: path, Args: e.cfg.Argv[1:], Dir: dir,
			Env: spec.Environ(e.cfg.EnvPass, e.cfg.Env), Mark: spec.ProcessMark(),
			Stdin: bytes.NewReader(append(input, '\n')), Grace: e.cfg.Grace, Confine: spec.Confinement(),
			Egress: spec.EgressPolicy(), User: spec.ProcUser()}
		if spec.Spool != nil {
			// The keeper writes the task first, and keeps stdin open for
			// the answers when there may be questions.
			ps.Spool, ps.StdinPipe = spec.Spool.Proc(), e.cfg.Approval != runner.ApprovalNever
		} else if e.cfg.Approval != runner.ApprovalNever {
			ps.Stdin, ps.StdinPipe = nil, true // kept open for the answers
		}
		if p, err = proc.Start(ps); err != nil {
			return runner.Exit{StartErr: err, ExitCode: -1}
		}
	}
	if spec.Spool != nil {
		spec.Spool.Started(p)
	}
	replies := &replyPipe{w: p.Stdin}
	if p.Spooled() {
		replies = &replyPipe{p: p, open: e.cfg.Approval != runner.ApprovalNever}
	} else if p.Stdin != nil {
		replies.write("", append(input, '\n'))
	}
	detached := false
	defer func() {
		if !detached {
			replies.close()
		}
	}()
	askCtx, cancelAsks := context.WithCancel(ctx)
	defer cancelAsks()

	// What the attempt has reported of its output, and of the attempt,
	// changes under emitMu, with what it emits: a checkpoint taken under
	// it says exactly what was reported.
	var emitMu sync.Mutex
	sendAt := func(stream int, end int64, evs ...runner.Event) {
		emitMu.Lock()
		defer emitMu.Unlock()
		for _, ev := range evs {
			if ev.Type == runner.EventResult {
				st.Result = true
			}
			emit(ev)
		}
		if stream == 0 {
			st.Stdout = end
		} else {
			st.Stderr = end
		}
	}
	send := func(ev runner.Event) {
		emitMu.Lock()
		defer emitMu.Unlock()
		emit(ev)
	}
	checkpoint := func() {
		emitMu.Lock()
		defer emitMu.Unlock()
		b, _ := json.Marshal(st)
		emit(runner.Event{Type: runner.EventCheckpoint, State: b})
	}
	if st.Session == "" {
		sid := make([]byte, 4)
		rand.Read(sid)
		st.Session = fmt.Sprintf("%x-%d", sid, p.Pid()) // short form (first 4) tells attempts apart
		if spec.Resume != nil {
			st.Session = spec.Resume.SessionID // a continue goes on in the session it continues
		}
		send(runner.Event{Type: runner.EventSession, SessionID: st.Session})
	}
	session := st.Session

	var sawResult sync.Once
	resultSeen := make(chan struct{})
	if st.Result {
		sawResult.Do(func() { close(resultSeen) })
	}
	stdoutDone, stderrDone := make(chan struct{}), make(chan struct{})
	ask := func(req state.ApprovalRequest, end int64) bool {
		return e.answer(askCtx, ctx, spec, req, session, sendAt, replies, end)
	}
	// The end of stderr says why a plain command failed, when it gave
	// no error event: the runner classifies it (runner.Exit.Stderr).
	stderrTail := &tail{}
	go func() {
		defer close(stdoutDone)
		e.read(p.Stdout, st.Stdout, 0, session, true, sendAt, func() { sawResult.Do(func() { close(resultSeen) }) }, ask, nil)
	}()
	go func() {
		defer close(stderrDone)
		e.read(p.Stderr, st.Stderr, 1, session, false, sendAt, nil, nil, stderrTail)
	}()

	var (
		exit       runner.Exit
		stopping   bool
		killTimer  <-chan time.Time
		closeTimer <-chan time.Time
		stdoutEOF  = stdoutDone
		wanted     <-chan struct{}
	)
	if spec.Spool != nil {
		wanted = spec.Spool.Wanted()
	}
	stop := func() {
		if !stopping {
			stopping = true
			exit.Killed = true
			cancelAsks()
			replies.close()
			p.Signal(syscall.SIGTERM)
			killTimer = time.After(e.cfg.Grace)
		}
	}
	ctxDone := ctx.Done()
	for running := true; running; {
		select {
		case <-ctxDone:
			ctxDone = nil
			if p.Spooled() && errors.Is(context.Cause(ctx), runner.ErrDetach) {
				// The agent stops; the attempt goes on. What was read
				// and not reported is read again by its next life.
				detached = true
				cancelAsks()
				p.Detach()
				<-stdoutDone
				<-stderrDone
				checkpoint()
				return runner.Exit{Detached: true}
			}
			stop()
		case <-wanted:
			checkpoint()
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
	// carries its mark. A question still asked has nobody to answer.
	cancelAsks()
	replies.close()
	p.Sweep()
	p.Drain(e.cfg.DrainTimeout, stdoutDone, stderrDone)
	if p.Spooled() {
		checkpoint() // the output's end, read
	}
	exit.SetStatus(p)
	exit.Stderr = stderrTail.String() // the reader is done: Drain waited for it
	return exit
}

// tail keeps the last lines of a stream, at most runner.StderrTailLines
// of them and runner.StderrTailBytes in all: what a failing command said
// last.
type tail struct {
	lines []string
	size  int
}

func (t *tail) add(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	line = runner.Clip(line, runner.StderrTailBytes/4)
	t.lines = append(t.lines, line)
	t.size += len(line)
	for len(t.lines) > runner.StderrTailLines || t.size > runner.StderrTailBytes {
		t.size -= len(t.lines[0])
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string { return strings.Join(t.lines, "\n") }

// execState is where an attempt is, as its checkpoints say: its session,
// how far its stdout and stderr are reported (offsets in the spool), and
// whether it gave its result.
type execState struct {
	Session string `json:"session,omitempty"`
	Stdout  int64  `json:"stdout"`
	Stderr  int64  `json:"stderr"`
	Result  bool   `json:"result,omitempty"`
}

// read turns one stream into events, from offset: JSON object lines on
// stdout are events, every other line a raw line. Raw lines are batched
// while more input is already buffered, so a burst costs few events and
// bounded memory. An approval line is handed to ask, which returns once
// it is answered: the child waits for its answer, and one question is
// asked at a time; false: the agent detaches, the line is read again by
// its next life. Each line is reported with the offset it ends at. Raw
// lines are kept in last too, when it is set.
func (e *Exec) read(f io.Reader, offset int64, stream int, session string, events bool, sendAt func(int, int64, ...runner.Event), onResult func(), ask func(state.ApprovalRequest, int64) bool, last *tail) {
	lr := proc.NewLineReaderAt(f, e.cfg.MaxLine, offset)
	rs := runner.StreamStdout
	if stream == 1 {
		rs = runner.StreamStderr
	}
	var (
		batch    []string
		size     int
		batchEnd int64
	)
	flush := func() {
		if len(batch) > 0 {
			sendAt(stream, batchEnd, runner.Event{Type: runner.EventLines, SessionID: session, Stream: rs, Lines: batch})
			batch, size = nil, 0
		}
	}
	for {
		line, err := lr.Next()
		if err != nil {
			if !errors.Is(err, proc.ErrDetached) {
				flush()
			}
			return
		}
		end := lr.Offset()
		if events && len(line) > 0 && line[0] == '{' {
			if req, ok := parseApproval(line); ok && ask != nil {
				flush()
				if !ask(req, end) {
					return
				}
				continue
			}
			if ev, ok := parseEvent(line); ok {
				flush()
				ev.SessionID = session
				if ev.Type == runner.EventResult && onResult != nil {
					onResult()
				}
				sendAt(stream, end, ev)
				continue
			}
		}
		if last != nil {
			last.add(line)
		}
		batch = append(batch, line)
		size += len(line)
		batchEnd = end
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
		// Read here, so that a time that is not RFC 3339 does not make
		// the error a mere line of output.
		ResetsAt string `json:"resets_at"`
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		return runner.Event{}, false
	}
	if ev.ResetsAt != "" {
		t, err := time.Parse(time.RFC3339Nano, ev.ResetsAt)
		if err != nil {
			// The limit's reset is not known: the backoff applies, and
			// the error says why.
			ev.Message = strings.TrimSpace(ev.Message + fmt.Sprintf(" (resets_at %q is not an RFC 3339 time)", runner.Clip(ev.ResetsAt, 64)))
		}
		ev.Event.ResetsAt = t
	}
	switch ev.Type {
	case runner.EventPhase, runner.EventProgress, runner.EventOutput, runner.EventTool, runner.EventSideEffect, runner.EventLog, runner.EventResult, runner.EventError, runner.EventUsage, runner.EventDenied:
		return ev.Event, true
	case runner.EventSession:
		if filepath.IsAbs(ev.Path) {
			return runner.Event{Type: runner.EventSession, SessionPath: filepath.Clean(ev.Path)}, true
		}
	}
	return runner.Event{}, false
}

// approvalLine is an approval line a child writes: its question.
type approvalLine struct {
	Type string `json:"type"`
	state.ApprovalRequest
}

// parseApproval reads one stdout line as an approval line, if it is one:
// it needs an id, and a kind of command, file_change or tool (the kind
// defaults to command when it names one, tool otherwise).
func parseApproval(line string) (state.ApprovalRequest, bool) {
	var a approvalLine
	if json.Unmarshal([]byte(line), &a) != nil || a.Type != "approval" || a.ID == "" {
		return state.ApprovalRequest{}, false
	}
	req := a.ApprovalRequest
	switch req.Kind {
	case state.ApprovalCommand, state.ApprovalFileChange, state.ApprovalTool:
	case "":
		req.Kind = state.ApprovalTool
		if req.Command != "" {
			req.Kind = state.ApprovalCommand
		}
	default:
		return state.ApprovalRequest{}, false
	}
	req.Asked, req.Deadline = time.Time{}, time.Time{} // the agent's to set
	req.Bound()
	return req, true
}

// answer answers a child's question by the approval policy, asking a
// person when it says so, and writes the answer to the child's stdin.
// A decline that no person gave is a denied call. The question's line,
// ending at end, is reported done with what the answer said. False: the
// agent is detaching, and the question is left for its next life.
func (e *Exec) answer(askCtx, ctx context.Context, spec runner.AttemptSpec, req state.ApprovalRequest, session string, sendAt func(int, int64, ...runner.Event), replies *replyPipe, end int64) bool {
	answer, why := runner.ApprovalDecline, "declined by the approval policy"
	switch e.cfg.Approval {
	case runner.ApprovalNever:
		why = "--approval never: nobody is asked"
	case runner.ApprovalAcceptAll:
		answer = runner.ApprovalAccept
	case runner.ApprovalAsk:
		if spec.Ask == nil {
			why = "nobody can be asked"
			break
		}
		answer, why = spec.Ask(askCtx, req), "" // the runner records a person's decline
		if errors.Is(context.Cause(ctx), runner.ErrDetach) {
			return false
		}
	}
	var evs []runner.Event
	if why != "" {
		tool := req.Tool
		if tool == "" {
			tool = string(req.Kind)
		}
		evs = append(evs, runner.Event{Type: runner.EventLog, SessionID: session, Level: runner.LevelInfo,
			Message: fmt.Sprintf("approval %s %s by policy %s: %s", req.ID, answer, e.cfg.Approval, req.What())})
		if answer != runner.ApprovalAccept {
			evs = append(evs, runner.Event{Type: runner.EventDenied, SessionID: session, Name: tool, Description: req.What(), Message: why})
		}
	}
	b, _ := json.Marshal(map[string]string{"type": "reply", "id": req.ID, "decision": string(answer)})
	replies.write("reply:"+req.ID, append(b, '\n'))
	sendAt(0, end, evs...)
	return true
}

// replyPipe is the child's stdin, when it stays open for answers: a pipe,
// or its keeper's stdin (p, a spooled attempt; its answers written once
// each, by id, whichever life of the agent gave them). Writes are safe
// from any goroutine; close never waits for one (closing the pipe ends a
// write the child does not read), and a write after it is dropped.
type replyPipe struct {
	mu     sync.Mutex // one write at a time
	w      io.WriteCloser
	p      *proc.Process
	open   bool // p's stdin was kept open
	closed atomic.Bool
	once   sync.Once
}

func (r *replyPipe) write(id string, b []byte) {
	if r.w == nil && (r.p == nil || !r.open) || r.closed.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil {
		_ = r.p.Input(id, b)
		return
	}
	_, _ = r.w.Write(b) // a child that stopped reading shows in its exit
}

func (r *replyPipe) close() {
	if r.w == nil && (r.p == nil || !r.open) {
		return
	}
	r.once.Do(func() {
		r.closed.Store(true)
		if r.p != nil {
			_ = r.p.CloseInput()
			return
		}
		r.w.Close()
	})
}

// Reattaches implements runner.Reattacher: an attempt can outlive the
// agent, its keeper spooling the child's output.
func (e *Exec) Reattaches() bool { return true }

// Resumes implements runner.Resumer: a child that names its session
// file (a session line) is continued with the task's resume field set.
func (e *Exec) Resumes() bool { return true }

// Describe says what the executor runs, for the agent's start banner.
func (e *Exec) Describe() string {
	return "exec (" + strings.Join(append([]string{proc.Located(e.cfg.Argv[0])}, e.cfg.Argv[1:]...), " ") + ")"
}
