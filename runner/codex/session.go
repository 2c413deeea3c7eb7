package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// codexMsg is one line from the app server: a response (ID and Result or
// Error), a notification (Method), or a request (ID and Method).
type codexMsg struct {
	ID     *json.RawMessage `json:"id"`
	Method string           `json:"method"`
	Params json.RawMessage  `json:"params"`
	Result json.RawMessage  `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`

	bad error // the line was not a message
	end int64 // where its line ends in the app server's stdout
}

// codexApproval is a person's answer, coming back from Ask.
type codexApproval struct {
	id       json.RawMessage
	decision runner.Approval
}

// codexSession is one attempt's conversation with an app server. Its
// fields are owned by run's goroutine.
type codexSession struct {
	cfg  Config
	spec runner.AttemptSpec
	dir  string
	p    *proc.Process
	out  *cli.SessionEmitter

	nextID  int64
	pending map[int64]string // request id → method
	stdinMu sync.Mutex
	stdin   io.WriteCloser
	// stdinClosed: a spooled attempt's stdin (its keeper's) is closed.
	stdinClosed bool

	thread, turn string
	done         bool // turn/completed seen
	interrupted  bool // we asked for the interrupt
	lastMessage  string
	streamed     map[string]int // agent message item → bytes already sent as output
	partial      map[string]string
	usage        json.RawMessage
	// limitResets is when the account's reached rate-limit window resets,
	// as the last account/rateLimits/updated said (zero when none is
	// reached): what a usageLimitExceeded turn waits for.
	limitResets time.Time
	// base is the thread's token count before this attempt's first turn
	// (a continued thread's earlier turns), known from its first usage
	// report.
	base   *state.Usage
	tokens state.Usage // this attempt's

	exit      runner.Exit
	msgs      chan codexMsg // closed at the end of stdout
	approvals chan codexApproval
	asking    sync.WaitGroup
	// changes are the file changes of the fileChange items started and
	// not yet completed, by item: Codex's approval request for one names
	// only the item.
	changes map[string][]codexChange
	// asked are the items a person was asked about: their decline is
	// recorded with the answer, not again when the item completes.
	asked map[string]bool
	// waiting are the app server's requests a person is asked about and
	// has not answered, by request id: an agent that takes the attempt
	// up again asks again (the runner knows what was answered).
	waiting map[string]codexMsg

	// A spooled attempt's (runner.Reattacher): what is reported of the
	// output moves with what is emitted, under emitMu, so that a
	// checkpoint taken under it says exactly what was reported. Before
	// the session is named nothing is (it is held), and a checkpoint says
	// where reading started (initial).
	emit               func(runner.Event)
	emitMu             sync.Mutex
	stdoutAt, stderrAt int64
	initial            codexState
}

// codexState is where a spooled attempt is, as its checkpoints say: how
// far the app server's stdout and stderr are reported (offsets in the
// spool), and the conversation's state up to there.
type codexState struct {
	Stdout      int64                    `json:"stdout"`
	Stderr      int64                    `json:"stderr"`
	Session     string                   `json:"session,omitempty"`
	SessionPath string                   `json:"session_path,omitempty"`
	NextID      int64                    `json:"next_id"`
	Pending     map[int64]string         `json:"pending,omitempty"`
	Thread      string                   `json:"thread,omitempty"`
	Turn        string                   `json:"turn,omitempty"`
	Done        bool                     `json:"done,omitempty"`
	TurnEnd     runner.TurnEnd           `json:"turn_end,omitempty"`
	LastMessage string                   `json:"last_message,omitempty"`
	Streamed    map[string]int           `json:"streamed,omitempty"`
	Partial     map[string]string        `json:"partial,omitempty"`
	Usage       json.RawMessage          `json:"usage,omitempty"`
	Base        *state.Usage             `json:"base,omitempty"`
	Tokens      state.Usage              `json:"tokens"`
	Changes     map[string][]codexChange `json:"changes,omitempty"`
	Asked       map[string]bool          `json:"asked,omitempty"`
	Waiting     map[string]codexMsg      `json:"waiting,omitempty"`
}

// save is the session's state with its output read to stdoutAt and
// stderrAt. Maps are shared, not copied: it is marshalled at once.
func (s *codexSession) save() codexState {
	if !s.out.Bound() {
		return s.initial
	}
	id, path := s.out.Session()
	return codexState{Stdout: s.stdoutAt, Stderr: s.stderrAt, Session: id, SessionPath: path, NextID: s.nextID, Pending: s.pending,
		Thread: s.thread, Turn: s.turn, Done: s.done, TurnEnd: s.exit.Turn, LastMessage: s.lastMessage, Streamed: s.streamed,
		Partial: s.partial, Usage: s.usage, Base: s.base, Tokens: s.tokens, Changes: s.changes, Asked: s.asked, Waiting: s.waiting}
}

// restore takes the session up from st: a checkpoint, or the start.
func (s *codexSession) restore(st codexState) {
	s.initial, s.stdoutAt, s.stderrAt = st, st.Stdout, st.Stderr
	s.out.Restore(st.Session, st.SessionPath)
	s.nextID, s.thread, s.turn, s.done, s.exit.Turn, s.lastMessage = st.NextID, st.Thread, st.Turn, st.Done, st.TurnEnd, st.LastMessage
	s.usage, s.base, s.tokens = st.Usage, st.Base, st.Tokens
	for k, v := range st.Pending {
		s.pending[k] = v
	}
	for k, v := range st.Streamed {
		s.streamed[k] = v
	}
	for k, v := range st.Partial {
		s.partial[k] = v
	}
	for k, v := range st.Changes {
		s.changes[k] = v
	}
	for k, v := range st.Asked {
		s.asked[k] = v
	}
	for k, v := range st.Waiting {
		s.waiting[k] = v
	}
}

// checkpoint emits the session's checkpoint.
func (s *codexSession) checkpoint() {
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	b, _ := json.Marshal(s.save())
	s.emit(runner.Event{Type: runner.EventCheckpoint, State: b})
}

func (s *codexSession) run(ctx context.Context) runner.Exit {
	s.stdin = s.p.Stdin
	stderrDone := make(chan struct{})
	go s.readStdout()
	go func() {
		defer close(stderrDone)
		s.readStderr()
	}()
	askCtx, cancelAsks := context.WithCancel(context.Background())
	defer cancelAsks()

	if s.nextID == 0 {
		// A new app server (or one taken up again before any checkpoint:
		// the keeper drops what it had written already).
		s.request("initialize", map[string]any{"clientInfo": map[string]string{"name": "edge-agent", "title": "Edge agent", "version": "1"}})
	}
	var wanted <-chan struct{}
	if s.spec.Spool != nil {
		wanted = s.spec.Spool.Wanted()
	}
	// Taken up again: the questions a person had not answered are asked
	// again (the runner gives the answer if one came meanwhile).
	for _, id := range sortedKeys(s.waiting) {
		s.take(askCtx, s.waiting[id])
	}

	var (
		stopStep  <-chan time.Time // the next step of a stop
		stopStage int
		ctxDone   = ctx.Done()
	)
	// stop moves a stop forward one step: interrupt the turn, close stdin,
	// SIGTERM, SIGKILL. Each step waits Grace for the process to end.
	stop := func() {
		switch stopStage {
		case 0:
			stopStage = 1
			if s.turn != "" && !s.done {
				s.interrupted = true
				s.request("turn/interrupt", map[string]string{"threadId": s.thread, "turnId": s.turn})
				stopStep = time.After(s.cfg.Grace)
				return
			}
			fallthrough
		case 1:
			stopStage = 2
			s.closeStdin()
			stopStep = time.After(s.cfg.Grace)
		case 2:
			stopStage = 3
			s.p.Signal(syscall.SIGTERM)
			stopStep = time.After(s.cfg.Grace)
		default:
			s.p.Signal(syscall.SIGKILL)
			stopStep = nil
		}
	}
	if s.done {
		// Taken up again after the turn ended: the app server ends.
		stopStage = 1
		stop()
	}
	msgs := s.msgs
	for running := true; running; {
		select {
		case <-ctxDone:
			ctxDone = nil
			cancelAsks()
			if s.p.Spooled() && errors.Is(context.Cause(ctx), runner.ErrDetach) {
				// The agent stops; the attempt goes on. What was read and
				// not taken is read again by its next life.
				s.p.Detach()
				for range msgs {
				}
				<-stderrDone
				s.asking.Wait()
				s.checkpoint()
				return runner.Exit{Detached: true}
			}
			s.exit.Killed = true
			if stopStage == 0 {
				stop()
			}
		case <-stopStep:
			stop()
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			s.take(askCtx, m)
			s.emitMu.Lock()
			s.stdoutAt = m.end
			s.emitMu.Unlock()
			switch {
			case s.exit.ProtocolErr != nil && stopStage < 2:
				stopStage = 1 // no interrupt: the protocol is broken
				stop()
			case s.done && stopStage == 0:
				// The turn is over. Codex keeps commands running after it,
				// so the app server ends now.
				stopStage = 1
				stop()
			case s.done && stopStage == 1:
				stop() // the interrupt was answered: close stdin
			}
		case <-wanted:
			s.checkpoint()
		case a := <-s.approvals:
			delete(s.waiting, string(a.id))
			s.respond(a.id, map[string]any{"decision": string(a.decision)})
		case <-s.p.Exited():
			running = false
		}
	}
	cancelAsks()
	s.asking.Wait()
	s.p.Sweep()
	// What the app server said before it exited still counts.
	cli.DrainAfterExit(msgs, s.cfg.Grace, s.p.Stdout, func(m codexMsg) { s.take(askCtx, m) })
	s.p.Drain(s.cfg.Grace, stderrDone)
	s.out.Close()
	if s.p.Spooled() {
		s.checkpoint() // the output's end, read
	}
	s.exit.SetStatus(s.p)
	switch {
	case s.done && s.exit.Turn == runner.TurnCompleted:
		s.exit.ProtocolErr = nil
	case !s.done:
		s.exit.Turn = runner.TurnFailed
		if s.exit.ProtocolErr == nil && !s.exit.Killed {
			s.exit.ProtocolErr = fmt.Errorf("codex app-server ended (%s) before the turn completed", cli.ExitText(s.exit))
		}
	}
	return s.exit
}

// take handles one message; the first protocol error is kept.
func (s *codexSession) take(askCtx context.Context, m codexMsg) {
	if err := s.handle(askCtx, m); err != nil && s.exit.ProtocolErr == nil {
		s.exit.ProtocolErr = err
	}
}

// readStdout turns the app server's stdout into messages.
func (s *codexSession) readStdout() {
	defer close(s.msgs)
	lr := proc.NewLineReaderAt(s.p.Stdout, s.cfg.MaxLine, s.stdoutAt)
	for {
		line, err := lr.Next()
		if err != nil {
			return
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m codexMsg
		if err := json.Unmarshal([]byte(line), &m); err != nil || (m.ID == nil && m.Method == "") {
			m = codexMsg{bad: fmt.Errorf("codex app-server wrote a line that is not a protocol message: %s", runner.Clip(line, 200))}
		}
		m.end = lr.Offset()
		s.msgs <- m
	}
}

// readStderr passes the app server's stderr on as log lines.
func (s *codexSession) readStderr() {
	lr := proc.NewLineReaderAt(s.p.Stderr, 64<<10, s.stderrAt)
	for {
		line, err := lr.Next()
		if err != nil {
			return
		}
		stream := runner.StreamStderr
		if s.spec.Confine != nil && sandboxIrrelevant(line) {
			// Codex's own sandbox is not used under the agent's
			// confinement (see Sandbox): its complaint is noise, said so.
			stream, line = state.LogExecutor, "(not a problem: the agent confines this attempt itself; Codex's own sandbox is not used) "+state.PlainText(line)
		}
		s.emitMu.Lock()
		s.out.Send(runner.Event{Type: runner.EventLines, Stream: stream, Lines: []string{line}, Notice: true})
		s.stderrAt = lr.Offset()
		s.emitMu.Unlock()
	}
}

// sandboxIrrelevant reports whether a line of Codex's stderr is its
// complaint about its own Linux sandbox (bubblewrap missing, or no user
// namespaces), which does not apply where the agent confines the
// attempt: Codex 0.169.0 prints it at every start.
func sandboxIrrelevant(line string) bool {
	return strings.Contains(line, "could not find bubblewrap") || strings.Contains(line, "sandbox uses bubblewrap and needs access to create user namespaces")
}

// request sends a request and remembers its method for the response.
func (s *codexSession) request(method string, params any) {
	s.nextID++
	s.pending[s.nextID] = method
	s.write("request:"+strconv.FormatInt(s.nextID, 10), map[string]any{"id": s.nextID, "method": method, "params": params})
}

func (s *codexSession) notify(method string) {
	s.write("notify:"+method, map[string]any{"method": method})
}

func (s *codexSession) respond(id json.RawMessage, result any) {
	s.write("response:"+string(id), map[string]any{"id": id, "result": result})
}

// write writes msg to the app server's stdin. The id names what the
// message is (its request's id, the request it answers): a spooled
// attempt's keeper writes each id once, so that what an agent taken up
// again re-makes, re-reading the output after its last checkpoint, is
// not sent twice.
func (s *codexSession) write(id string, msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		return
	}
	s.stdinMu.Lock()
	defer s.stdinMu.Unlock()
	if s.spooled() {
		if !s.stdinClosed {
			_ = s.p.Input(id, append(b, '\n'))
		}
		return
	}
	if s.stdin != nil {
		_, _ = s.stdin.Write(append(b, '\n')) // a closed pipe shows as the process's end
	}
}

func (s *codexSession) closeStdin() {
	s.stdinMu.Lock()
	defer s.stdinMu.Unlock()
	if s.spooled() {
		// The keeper closes it once what was sent is written; again is
		// nothing.
		if !s.stdinClosed {
			_ = s.p.CloseInput()
			s.stdinClosed = true
		}
		return
	}
	if s.stdin != nil {
		s.stdin.Close()
		s.stdin = nil
	}
}

// spooled reports whether the app server runs under a spooling keeper,
// its stdin the keeper's.
func (s *codexSession) spooled() bool { return s.p != nil && s.p.Spooled() }

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// handle applies one message from the app server. An error is a protocol
// error: the attempt cannot go on.
func (s *codexSession) handle(askCtx context.Context, m codexMsg) error {
	switch {
	case m.bad != nil:
		return m.bad
	case m.ID != nil && m.Method != "":
		return s.serverRequest(askCtx, m)
	case m.ID != nil:
		return s.response(m)
	}
	return s.notification(m.Method, m.Params)
}

// response handles the answer to one of our requests.
func (s *codexSession) response(m codexMsg) error {
	id, err := strconv.ParseInt(string(*m.ID), 10, 64)
	method, ok := s.pending[id]
	if err != nil || !ok {
		return fmt.Errorf("codex app-server answered a request it was not sent (id %s)", *m.ID)
	}
	delete(s.pending, id)
	if m.Error != nil {
		switch method {
		case "turn/interrupt":
			return nil // the turn ended meanwhile
		case "thread/resume":
			s.sessionLost("codex could not resume thread " + s.spec.Resume.SessionID + ": " + m.Error.Message)
			return nil
		}
		return fmt.Errorf("codex app-server refused %s: %s", method, m.Error.Message)
	}
	switch method {
	case "initialize":
		s.notify("initialized")
		confined := s.spec.Confine != nil
		params := map[string]any{"cwd": s.dir, "approvalPolicy": approvalPolicy(s.cfg.Approval, confined), "sandbox": codexSandbox(s.cfg.Sandbox, confined)}
		if s.spec.Task.Model != "" {
			params["model"] = s.spec.Task.Model
		}
		if r := s.spec.Resume; r != nil {
			// The thread's history stays on disk: the answer need not
			// carry it.
			params["threadId"], params["excludeTurns"] = r.SessionID, true
			s.request("thread/resume", params)
			return nil
		}
		s.request("thread/start", params)
	case "thread/start", "thread/resume":
		var r struct {
			Thread struct {
				ID   string `json:"id"`
				Path string `json:"path"`
			} `json:"thread"`
		}
		if err := json.Unmarshal(m.Result, &r); err != nil || r.Thread.ID == "" {
			return fmt.Errorf("codex app-server: %s answer without a thread id", method)
		}
		prompt := s.spec.Task.Prompt
		if res := s.spec.Resume; res != nil {
			if r.Thread.ID != res.SessionID {
				// Never go on in another thread than the one asked for.
				s.sessionLost(fmt.Sprintf("codex resumed thread %s when asked for %s", r.Thread.ID, res.SessionID))
				return nil
			}
			prompt = res.Prompt
		}
		s.thread = r.Thread.ID
		s.out.BindAt(s.thread, r.Thread.Path)
		s.request("turn/start", map[string]any{"threadId": s.thread,
			"input": []map[string]any{{"type": "text", "text": prompt, "text_elements": []any{}}}})
	case "turn/start":
		var r struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		if err := json.Unmarshal(m.Result, &r); err != nil || r.Turn.ID == "" {
			return fmt.Errorf("codex app-server: turn/start answer without a turn id")
		}
		if s.turn == "" {
			s.turn = r.Turn.ID
		}
	}
	return nil
}

// sessionLost ends an attempt that could not resume its thread: an error
// of code session_lost, no turn, and the app server ends. The thread is
// not started anew.
func (s *codexSession) sessionLost(msg string) {
	s.done = true
	s.exit.Turn = runner.TurnFailed
	s.out.Send(runner.Event{Type: runner.EventError, Code: state.CodeSessionLost, Message: msg})
}

// approvalPolicy is the thread's approval policy for the agent's:
// never asks never. The others answer what Codex asks under on-request,
// where its sandbox works: a command the model wants run outside it, a
// file change outside its writable roots. Confined by the agent, Codex's
// sandbox cannot run (see codexSandbox), so nothing would be outside its
// reach and nobody asked: ask then starts the thread untrusted, under
// which Codex 0.169.0 asks before every command (ls included) and every
// file change, and runs what is accepted inside the agent's confinement.
func approvalPolicy(p runner.ApprovalPolicy, confined bool) string {
	switch {
	case p == runner.ApprovalNever:
		return "never"
	case p == runner.ApprovalAsk && confined:
		return "untrusted"
	}
	return "on-request"
}

// codexItem is the part of a thread item the executor reads.
type codexItem struct {
	Type     string        `json:"type"`
	ID       string        `json:"id"`
	Text     string        `json:"text"`
	Command  string        `json:"command"`
	Status   string        `json:"status"`
	ExitCode *int          `json:"exitCode"`
	Server   string        `json:"server"`
	Tool     string        `json:"tool"`
	Changes  []codexChange `json:"changes"`
}

// codexChange is one file of a fileChange item: its path, the kind of
// change ({"type": "add"|"delete"|"update", "move_path"}, or a bare
// string in older versions) and the diff: a new file's content, or the
// hunks of an update.
type codexChange struct {
	Path string          `json:"path"`
	Kind json.RawMessage `json:"kind"`
	Diff string          `json:"diff"`
}

// kind is the change's kind and where an update moves the file.
func (c codexChange) kind() (kind, movePath string) {
	var k struct {
		Type     string `json:"type"`
		MovePath string `json:"move_path"`
	}
	if json.Unmarshal(c.Kind, &k) != nil {
		_ = json.Unmarshal(c.Kind, &k.Type)
	}
	return k.Type, k.MovePath
}

// unifiedDiff renders a fileChange item's changes as one unified diff,
// as a person reads a patch: a new file's content as added lines, a
// deleted one's as removed lines, an update's hunks under its paths.
func unifiedDiff(changes []codexChange) string {
	var b strings.Builder
	for _, c := range changes {
		kind, move := c.kind()
		lines := splitLines(c.Diff)
		switch kind {
		case "add":
			fmt.Fprintf(&b, "--- /dev/null\n+++ %s\n@@ -0,0 +1,%d @@\n", c.Path, len(lines))
			for _, l := range lines {
				b.WriteString("+" + l + "\n")
			}
		case "delete":
			fmt.Fprintf(&b, "--- %s\n+++ /dev/null\n@@ -1,%d +0,0 @@\n", c.Path, len(lines))
			for _, l := range lines {
				b.WriteString("-" + l + "\n")
			}
		default:
			to := c.Path
			if move != "" {
				to = move
			}
			fmt.Fprintf(&b, "--- %s\n+++ %s\n", c.Path, to)
			for _, l := range lines {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// notification maps one notification to the runner's events.
func (s *codexSession) notification(method string, params json.RawMessage) error {
	ev := s.out.Send
	switch method {
	case "turn/started":
		var p struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		_ = json.Unmarshal(params, &p)
		if s.turn == "" {
			s.turn = p.Turn.ID
		}
		ev(runner.Event{Type: runner.EventPhase, Phase: state.PhaseTurnStarted, Notice: true})
	case "item/started":
		var p struct{ Item codexItem }
		if err := json.Unmarshal(params, &p); err != nil {
			return fmt.Errorf("codex app-server: bad item/started: %v", err)
		}
		s.itemStarted(p.Item, ev)
	case "item/completed":
		var p struct{ Item codexItem }
		if err := json.Unmarshal(params, &p); err != nil {
			return fmt.Errorf("codex app-server: bad item/completed: %v", err)
		}
		s.itemCompleted(p.Item, ev)
	case "item/agentMessage/delta":
		var p struct {
			ItemID string `json:"itemId"`
			Delta  string `json:"delta"`
		}
		_ = json.Unmarshal(params, &p)
		s.delta(p.ItemID, p.Delta, ev)
	case "item/commandExecution/outputDelta":
		var p struct {
			Delta string `json:"delta"`
		}
		_ = json.Unmarshal(params, &p)
		if lines := splitLines(p.Delta); len(lines) > 0 {
			ev(runner.Event{Type: runner.EventLines, Stream: runner.StreamCommand, Lines: lines})
		}
	case "error":
		var p struct {
			Error     codexError `json:"error"`
			WillRetry bool       `json:"willRetry"`
		}
		_ = json.Unmarshal(params, &p)
		msg := p.Error.text()
		if p.WillRetry {
			// Codex retries on its own: progress, not a failure.
			ev(runner.Event{Type: runner.EventProgress, Message: msg, Step: "retry", Notice: true})
		} else {
			ev(runner.Event{Type: runner.EventLog, Level: runner.LevelError, Message: msg, Notice: true})
		}
	case "warning", "configWarning", "deprecationNotice":
		var p struct {
			Message string `json:"message"`
			Summary string `json:"summary"`
		}
		_ = json.Unmarshal(params, &p)
		ev(runner.Event{Type: runner.EventLog, Level: runner.LevelWarn, Message: strings.TrimSpace(method + ": " + p.Message + " " + p.Summary), Notice: true})
	case "thread/tokenUsage/updated":
		var p struct {
			TokenUsage json.RawMessage `json:"tokenUsage"`
		}
		if json.Unmarshal(params, &p) == nil && len(p.TokenUsage) > 0 {
			s.usage = p.TokenUsage
			if u, ok := s.attemptUsage(p.TokenUsage); ok {
				ev(runner.UsageEvent(u))
			}
		}
	case "account/rateLimits/updated":
		var p struct {
			RateLimits codexRateLimits `json:"rateLimits"`
		}
		if json.Unmarshal(params, &p) == nil {
			s.limitResets = p.RateLimits.resetsAt()
		}
	case "turn/completed":
		return s.turnCompleted(params, ev)
	}
	return nil // other notifications (status, rate limits, diffs) say nothing the runner needs
}

func (s *codexSession) itemStarted(it codexItem, ev func(runner.Event)) {
	switch it.Type {
	case "userMessage":
		return // our own prompt, echoed: not the model
	case "commandExecution":
		ev(runner.Event{Type: runner.EventTool, Name: "shell", Stage: runner.StageCall})
		ev(runner.Event{Type: runner.EventProgress, Message: "running " + runner.Clip(it.Command, 200), Step: it.Type})
	case "fileChange":
		if len(s.changes) < 64 { // an approval asked for it comes right after: the few open are enough
			s.changes[it.ID] = it.Changes
		}
		ev(runner.Event{Type: runner.EventTool, Name: "apply_patch", Stage: runner.StageCall})
		ev(runner.Event{Type: runner.EventProgress, Message: "changing files", Step: it.Type})
	case "mcpToolCall":
		ev(runner.Event{Type: runner.EventTool, Name: strings.Trim(it.Server+"."+it.Tool, "."), Stage: runner.StageCall})
	case "webSearch":
		ev(runner.Event{Type: runner.EventTool, Name: "web_search", Stage: runner.StageCall})
	case "agentMessage":
		ev(runner.Event{Type: runner.EventProgress, Message: "writing a reply", Step: it.Type})
	case "reasoning":
		ev(runner.Event{Type: runner.EventProgress, Message: "thinking", Step: it.Type})
	default: // the model is at work
		ev(runner.Event{Type: runner.EventProgress, Message: it.Type, Step: it.Type})
	}
}

func (s *codexSession) itemCompleted(it codexItem, ev func(runner.Event)) {
	switch it.Type {
	case "agentMessage":
		// The completed text is the record; what was streamed of it is
		// not sent twice.
		sent, rest := s.streamed[it.ID], it.Text
		if sent > 0 && strings.HasPrefix(it.Text, s.partial[it.ID][:sent]) {
			rest = it.Text[sent:]
		}
		delete(s.streamed, it.ID)
		delete(s.partial, it.ID)
		if strings.TrimSpace(rest) != "" {
			ev(runner.Event{Type: runner.EventOutput, Text: strings.TrimSuffix(rest, "\n")})
		}
		s.lastMessage = it.Text
	case "commandExecution":
		ev(runner.Event{Type: runner.EventTool, Name: "shell", Stage: runner.StageResult})
		if it.Status != "declined" {
			// Conservative: a command that ran may have changed something.
			desc := "ran " + runner.Clip(it.Command, 500)
			if it.ExitCode != nil {
				desc += fmt.Sprintf(" (exit %d)", *it.ExitCode)
			}
			ev(runner.Event{Type: runner.EventSideEffect, Description: desc})
		} else if !s.asked[it.ID] {
			ev(runner.Event{Type: runner.EventDenied, Name: "shell", Description: it.Command, Message: "declined by Codex"})
		}
		delete(s.asked, it.ID)
	case "fileChange":
		delete(s.changes, it.ID)
		ev(runner.Event{Type: runner.EventTool, Name: "apply_patch", Stage: runner.StageResult})
		switch it.Status {
		case "completed":
			for _, c := range it.Changes {
				kind, _ := c.kind()
				ev(runner.Event{Type: runner.EventSideEffect, Description: strings.TrimSpace(kind + " " + c.Path)})
			}
		case "declined":
			if !s.asked[it.ID] {
				ev(runner.Event{Type: runner.EventDenied, Name: "apply_patch", Description: changedPaths(it.Changes), Message: "declined by Codex"})
			}
		}
		delete(s.asked, it.ID)
	case "mcpToolCall", "webSearch":
		ev(runner.Event{Type: runner.EventTool, Name: it.Type, Stage: runner.StageResult})
	}
}

// delta streams an agent message as output, a whole line at a time; the
// rest goes out when the item completes.
func (s *codexSession) delta(item, delta string, ev func(runner.Event)) {
	s.partial[item] += delta
	text := s.partial[item]
	sent := s.streamed[item]
	if i := strings.LastIndexByte(text, '\n'); i >= sent {
		ev(runner.Event{Type: runner.EventOutput, Text: strings.TrimSuffix(text[sent:i], "\r")})
		s.streamed[item] = i + 1
	}
}

// turnCompleted ends the attempt by the turn's status.
func (s *codexSession) turnCompleted(params json.RawMessage, ev func(runner.Event)) error {
	var p struct {
		Turn struct {
			ID         string      `json:"id"`
			Status     string      `json:"status"`
			Error      *codexError `json:"error"`
			DurationMS int64       `json:"durationMs"`
		} `json:"turn"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return fmt.Errorf("codex app-server: bad turn/completed: %v", err)
	}
	if s.turn != "" && p.Turn.ID != "" && p.Turn.ID != s.turn {
		return nil // not our turn
	}
	s.done = true
	switch p.Turn.Status {
	case "completed":
		s.exit.Turn = runner.TurnCompleted
		ev(runner.Event{Type: runner.EventPhase, Phase: state.PhaseCompleting})
		data, _ := json.Marshal(map[string]any{"turn_id": p.Turn.ID, "duration_ms": p.Turn.DurationMS, "usage": s.usage})
		ev(runner.Event{Type: runner.EventResult, Summary: s.lastMessage, Data: data})
	case "interrupted":
		s.exit.Turn = runner.TurnFailed
		if !s.interrupted {
			ev(runner.Event{Type: runner.EventError, Message: "the turn was interrupted"})
		}
	default:
		s.exit.Turn = runner.TurnFailed
		e := codexError{Message: "the turn failed with status " + p.Turn.Status}
		if p.Turn.Error != nil {
			e = *p.Turn.Error
		}
		code, retryAfter := e.classify()
		out := runner.Event{Type: runner.EventError, Code: code, Message: e.text(), RetryAfterMS: retryAfter.Milliseconds()}
		if code == state.CodeUsageLimit && !s.limitResets.IsZero() {
			out.ResetsAt = s.limitResets // the task parks until then
		}
		ev(out)
	}
	return nil
}

// changedPaths lists a file change's paths, for a log line.
func changedPaths(changes []codexChange) string {
	paths := make([]string, len(changes))
	for i, c := range changes {
		paths[i] = c.Path
	}
	return strings.Join(paths, ", ")
}

// serverRequest answers a request from the app server: approvals by the
// policy (asking a person when it says so), anything else with an error.
// A file change's request names only its item: its paths and diff are
// the item's, as item/started gave them.
func (s *codexSession) serverRequest(askCtx context.Context, m codexMsg) error {
	var p struct {
		ItemID  string        `json:"itemId"`
		Reason  string        `json:"reason"`
		Command string        `json:"command"`
		Cwd     string        `json:"cwd"`
		Changes []codexChange `json:"changes"`
	}
	_ = json.Unmarshal(m.Params, &p)
	var req state.ApprovalRequest
	switch m.Method {
	case "item/commandExecution/requestApproval":
		req = state.ApprovalRequest{Kind: state.ApprovalCommand, Tool: "shell", Command: p.Command, Cwd: p.Cwd}
	case "item/fileChange/requestApproval":
		changes := p.Changes
		if len(changes) == 0 {
			changes = s.changes[p.ItemID]
		}
		req = state.ApprovalRequest{Kind: state.ApprovalFileChange, Tool: "apply_patch", Diff: unifiedDiff(changes)}
		for _, c := range changes {
			req.Paths = append(req.Paths, c.Path)
		}
	default:
		s.write("response:"+string(*m.ID), map[string]any{"id": m.ID, "error": map[string]any{"code": -32601, "message": "the agent does not handle " + m.Method}})
		s.out.Send(runner.Event{Type: runner.EventLog, Level: runner.LevelWarn, Message: "declined an unknown request from codex: " + m.Method})
		return nil
	}
	req.ID, req.Reason = p.ItemID, p.Reason
	if req.ID == "" {
		req.ID = string(*m.ID)
	}
	id := *m.ID
	var answer runner.Approval
	why := "declined by the approval policy"
	switch s.cfg.Approval {
	case runner.ApprovalAcceptAll:
		answer = runner.ApprovalAccept
	case runner.ApprovalAsk:
		if s.spec.Ask == nil {
			answer, why = runner.ApprovalDecline, "nobody can be asked"
			break
		}
		s.asked[p.ItemID] = true
		s.waiting[string(id)] = m
		s.asking.Add(1)
		go func() {
			defer s.asking.Done()
			a := s.spec.Ask(askCtx, req)
			select {
			case s.approvals <- codexApproval{id: id, decision: a}:
			case <-askCtx.Done():
			}
		}()
		return nil
	default:
		answer = runner.ApprovalDecline
	}
	s.out.Send(runner.Event{Type: runner.EventLog, Level: runner.LevelInfo, Message: fmt.Sprintf("approval %s by policy %s: %s", answer, s.cfg.Approval, req.What())})
	if answer != runner.ApprovalAccept {
		s.asked[p.ItemID] = true // recorded here, not again when the item completes
		s.out.Send(runner.Event{Type: runner.EventDenied, Name: req.Tool, Description: req.What(), Message: why})
	}
	s.respond(id, map[string]any{"decision": string(answer)})
	return nil
}

// codexTokens is a TokenUsageBreakdown of thread/tokenUsage/updated.
type codexTokens struct {
	TotalTokens  int64 `json:"totalTokens"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

func (c codexTokens) usage() state.Usage {
	return state.Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, TotalTokens: c.TotalTokens}
}

// attemptUsage reads a thread/tokenUsage/updated report (the thread's
// total, and its last request's) as the tokens this attempt used: a
// continued thread's total holds its earlier attempts' turns too, so what
// it held before this attempt's first request is taken off. ok is false
// when the report says nothing new.
func (s *codexSession) attemptUsage(raw json.RawMessage) (u state.Usage, ok bool) {
	var tu struct {
		Total codexTokens `json:"total"`
		Last  codexTokens `json:"last"`
	}
	if json.Unmarshal(raw, &tu) != nil {
		return state.Usage{}, false
	}
	total := tu.Total.usage()
	if s.base == nil {
		last := tu.Last.usage()
		s.base = &state.Usage{InputTokens: max(total.InputTokens-last.InputTokens, 0), OutputTokens: max(total.OutputTokens-last.OutputTokens, 0),
			TotalTokens: max(total.TotalTokens-last.TotalTokens, 0)}
	}
	u = state.Usage{InputTokens: max(total.InputTokens-s.base.InputTokens, 0), OutputTokens: max(total.OutputTokens-s.base.OutputTokens, 0),
		TotalTokens: max(total.TotalTokens-s.base.TotalTokens, 0)}
	if u == s.tokens {
		return u, false
	}
	s.tokens = u
	return u, true
}
