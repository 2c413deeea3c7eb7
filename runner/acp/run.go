package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// settleTimeout bounds the agent's own account of a turn (Agent.Settle).
const settleTimeout = 30 * time.Second

// Run implements runner.Executor.
func (x *Executor) Run(ctx context.Context, spec runner.AttemptSpec, emit func(runner.Event)) runner.Exit {
	path, err := proc.Resolve(x.cfg.Bin)
	if err != nil {
		return runner.Exit{StartErr: err, ExitCode: -1}
	}
	dir := spec.WorkDir
	if dir == "" {
		dir = x.cfg.Dir
	}
	env := x.Env(spec)
	if x.agent.Prepare != nil {
		dir := spec.TempDir
		if dir == "" {
			d, err := os.MkdirTemp("", "agent-"+x.cfg.Kind+"-")
			if err != nil {
				return runner.Exit{StartErr: fmt.Errorf("the agent's own directory: %w", err), ExitCode: -1}
			}
			defer os.RemoveAll(d)
			dir = d
		}
		more, err := x.agent.Prepare(dir)
		if err != nil {
			return runner.Exit{StartErr: fmt.Errorf("ready %s: %w", x.cfg.Kind, err), ExitCode: -1}
		}
		env = append(env, more...)
	}
	procSpec := func(args []string, stdinPipe bool) proc.Spec {
		return proc.Spec{Name: x.cfg.Bin, Path: path, Args: args, Dir: dir, Env: env, Mark: spec.ProcessMark(), StdinPipe: stdinPipe,
			Grace: x.cfg.Grace, Confine: spec.Confinement(x.stateDirs(env)...), Egress: spec.EgressPolicy(x.endpoints(env)...), User: spec.ProcUser()}
	}
	var beforeLoad error
	if r := spec.Resume; r != nil && x.agent.BeforeLoad != nil && x.Resumes() {
		beforeLoad = x.agent.BeforeLoad(env, r.SessionID, time.Now())
	}
	started := time.Now()
	p, err := proc.Start(procSpec(x.args(), true))
	if err != nil {
		return runner.Exit{StartErr: err, ExitCode: -1}
	}
	if dir == "" {
		dir, _ = os.Getwd() // ACP wants the session's directory absolute
	}
	s := newSession(x, spec, dir, env, cli.NewSessionEmitter(emit, x.cfg.Kind, p.Pgid))
	s.started, s.beforeLoad = started, beforeLoad
	exit := s.run(ctx, p)
	if x.agent.Settle != nil && !exit.Killed && s.sessionID() != "" {
		s.settle(func(rctx context.Context, args ...string) ([]byte, error) {
			return runShort(rctx, procSpec(args, false), x.cfg.Grace)
		}, started, &exit)
	}
	s.finish(&exit)
	return exit
}

// turnResult is how the turn's conversation with the agent ended.
type turnResult struct {
	resp *sdk.PromptResponse // nil when there was no prompt, or it failed
	err  error               // the prompt's, or the session's set-up's
}

// run holds the conversation with the agent process p until it has
// exited, and returns how it ended.
func (s *session) run(ctx context.Context, p *proc.Process) runner.Exit {
	var exit runner.Exit
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		s.readStderr(p.Stderr)
	}()
	stdout := &protocolReader{r: p.Stdout}
	conn := newConnection(s, &stdinWriter{p: p}, stdout, slog.New(&sdkLog{s: s}))
	askCtx, cancelAsks := context.WithCancel(context.Background())
	defer cancelAsks()
	s.askCtx = askCtx

	turnCtx, endTurn := context.WithCancel(context.Background())
	defer endTurn()
	turnDone := make(chan turnResult, 1)
	go func() { turnDone <- s.converse(turnCtx, conn) }()

	var (
		stopStep  <-chan time.Time
		stopStage int
		ctxDone   = ctx.Done()
		result    *turnResult
	)
	// stop moves a stop on one step: cancel the turn (session/cancel),
	// close stdin, SIGTERM, SIGKILL, each after Grace.
	stop := func() {
		switch stopStage {
		case 0:
			stopStage = 1
			if id := s.sessionID(); id != "" && result == nil && s.prompting() {
				s.markCancelled()
				_ = conn.Cancel(context.Background(), sdk.CancelNotification{SessionId: sdk.SessionId(id)})
				stopStep = time.After(s.x.cfg.Grace)
				return
			}
			fallthrough
		case 1:
			stopStage = 2
			closeStdin(p)
			if s.x.agent.KeepsRunning {
				stop3(p, &stopStage)
			}
			stopStep = time.After(s.x.cfg.Grace)
		case 2:
			stop3(p, &stopStage)
			stopStep = time.After(s.x.cfg.Grace)
		default:
			p.Signal(syscall.SIGKILL)
			stopStep = nil
		}
	}
	for running := true; running; {
		select {
		case <-ctxDone:
			ctxDone = nil
			cancelAsks()
			exit.Killed = true
			if stopStage == 0 {
				stop()
			}
		case <-stopStep:
			stop()
		case r := <-turnDone:
			turnDone = nil
			result = &r
			// The turn is over: the agent ends now (an agent keeps its
			// tools' processes only as long as it runs).
			if stopStage < 2 {
				stopStage = 1
				stop()
			}
		case <-s.protocolBroken():
			if stopStage < 2 {
				stopStage = 1 // the protocol is broken: no cancel
				stop()
			}
		case <-p.Exited():
			running = false
		}
	}
	cancelAsks()
	p.Sweep()
	// What the agent wrote before it exited still counts: the connection
	// reads it to the end (or to the grace, when something out of reach
	// holds stdout open).
	waitOrClose(conn.Done(), s.x.cfg.Grace, p.Stdout)
	endTurn()
	if turnDone != nil {
		r := <-turnDone
		result = &r
	}
	p.Drain(s.x.cfg.Grace, stderrDone)
	s.mu.Lock()
	s.noAsk = true
	s.mu.Unlock()
	s.asking.Wait()
	exit.SetStatus(p)
	s.conclude(result, &exit)
	return exit
}

// stop3 sends SIGTERM, the third step of a stop.
func stop3(p *proc.Process, stage *int) {
	*stage = 3
	p.Signal(syscall.SIGTERM)
}

func closeStdin(p *proc.Process) {
	if p.Stdin != nil {
		p.Stdin.Close()
	}
}

// waitOrClose waits for done, or, past grace, closes r (held open by
// something out of the attempt's reach) and waits again.
func waitOrClose(done <-chan struct{}, grace time.Duration, r io.Closer) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.Close()
		<-done
	}
}

// stdinWriter writes to the agent's stdin; after it is closed, a write
// fails, as the agent's end would make it.
type stdinWriter struct{ p *proc.Process }

func (w *stdinWriter) Write(b []byte) (int, error) {
	if w.p.Stdin == nil {
		return 0, io.ErrClosedPipe
	}
	return w.p.Stdin.Write(b)
}

// protocolReader is the agent's stdout as the connection reads it.
type protocolReader struct{ r io.Reader }

// newConnection is the SDK's client-side connection with its logger in
// place before it reads: the SDK starts reading in NewClientSideConnection
// and reads its logger unguarded (acp-go-sdk v0.13.0), so SetLogger after
// it races with an agent that ends at once. Its first read waits for the
// logger.
func newConnection(client sdk.Client, w io.Writer, r io.Reader, log *slog.Logger) *sdk.ClientSideConnection {
	g := &gatedReader{r: r, open: make(chan struct{})}
	conn := sdk.NewClientSideConnection(client, w, g)
	conn.SetLogger(log)
	close(g.open)
	return conn
}

// gatedReader holds its reader's reads until open is closed.
type gatedReader struct {
	r    io.Reader
	open chan struct{}
}

func (g *gatedReader) Read(b []byte) (int, error) {
	<-g.open
	return g.r.Read(b)
}

func (r *protocolReader) Read(b []byte) (int, error) { return r.r.Read(b) }

// runShort runs one short command of the agent's under the attempt's
// confinement and returns its stdout (at most 16 MiB), once every process
// of it is gone.
func runShort(ctx context.Context, ps proc.Spec, grace time.Duration) ([]byte, error) {
	p, err := proc.Start(ps)
	if err != nil {
		return nil, err
	}
	var (
		out  []byte
		rerr error
		read = make(chan struct{})
	)
	go func() {
		defer close(read)
		out, rerr = io.ReadAll(io.LimitReader(p.Stdout, 16<<20))
	}()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr) }()
	select {
	case <-p.Exited():
	case <-ctx.Done():
		p.Signal(syscall.SIGKILL)
		<-p.Exited()
	}
	p.Sweep()
	waitOrClose(read, grace, p.Stdout)
	p.Stderr.Close()
	code, sig, serr := p.Status()
	switch {
	case ctx.Err() != nil:
		return out, fmt.Errorf("%s %v: no answer: %w", ps.Name, ps.Args, ctx.Err())
	case serr != nil:
		return out, serr
	case sig != "" || code != 0:
		return out, fmt.Errorf("%s %v: %s", ps.Name, ps.Args, cli.ExitText(runner.Exit{ExitCode: code, Signal: sig}))
	case rerr != nil:
		return out, rerr
	}
	return out, nil
}

// settle asks the agent's own record of the session what the protocol
// did not say (Agent.Settle): the tokens of every model request, and why
// a failed turn failed.
func (s *session) settle(run RunFunc, since time.Time, exit *runner.Exit) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	st, err := s.x.agent.Settle(ctx, run, s.sessionID(), since)
	if err != nil {
		s.send(runner.Event{Type: runner.EventLog, Level: runner.LevelWarn, Notice: true,
			Message: "could not read " + s.agentName() + "'s record of the session: " + runner.Clip(err.Error(), 300)})
		return
	}
	if st.Usage != nil && st.Usage.TotalTokens > s.tokens.TotalTokens {
		s.tokens = *st.Usage
		s.send(runner.UsageEvent(*st.Usage))
	}
	if f := s.failure; f != nil && exit.Turn == runner.TurnFailed {
		refined := *f
		if st.Code != "" {
			refined.Code = st.Code
		}
		if st.RetryAfter > 0 {
			refined.RetryAfterMS = st.RetryAfter.Milliseconds()
		}
		if st.Message != "" && refined.Message == "" {
			refined.Message = st.Message
		}
		if refined.Code != f.Code || refined.RetryAfterMS != f.RetryAfterMS || refined.Message != f.Message {
			// The last error event says why the turn failed.
			s.failure = &refined
			s.send(refined)
		}
	}
}

// finish ends the attempt's events: nothing the protocol library still
// delivers goes out.
func (s *session) finish(*runner.Exit) {
	s.close()
	s.out.Close()
}

// sdkLog takes the protocol library's diagnostics: a line of stdout that
// is not a message breaks the protocol; an update it cannot read is
// said; its other chatter is dropped.
type sdkLog struct {
	s     *session
	attrs []slog.Attr
}

func (h *sdkLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *sdkLog) Handle(_ context.Context, r slog.Record) error {
	detail := ""
	each := func(a slog.Attr) bool {
		if a.Key == "raw" || a.Key == "err" || a.Key == "method" {
			detail += " " + a.Key + "=" + a.Value.String()
		}
		return true
	}
	for _, a := range h.attrs {
		each(a)
	}
	r.Attrs(each)
	msg := r.Message + detail
	if r.Message == "failed to parse incoming message" || r.Message == "received message with neither id nor method" {
		h.s.breakProtocol(fmt.Errorf("%s wrote a line that is not a protocol message:%s", h.s.agentName(), runner.Clip(detail, 200)))
		return nil
	}
	h.s.send(runner.Event{Type: runner.EventLog, Level: runner.LevelWarn, Notice: true, Message: "acp: " + runner.Clip(msg, 500)})
	return nil
}

func (h *sdkLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &sdkLog{s: h.s, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *sdkLog) WithGroup(string) slog.Handler { return h }

// errPeerGone: the agent ended before it answered.
var errPeerGone = errors.New("the agent ended before it answered")

// setupError is a failure before the prompt: the session could not be
// made or the model chosen.
type setupError struct {
	code state.ErrorCode
	msg  string
}

func (e *setupError) Error() string { return e.msg }
