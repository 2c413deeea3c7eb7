package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// session is one attempt's conversation with an agent: the acp.Client
// the protocol library calls for what the agent sends, and the events it
// makes of it. What the library's goroutines and the executor's share is
// under mu.
type session struct {
	x    *Executor
	spec runner.AttemptSpec
	dir  string
	env  []string // the agent's environment
	out  *cli.SessionEmitter
	// askCtx ends the questions put to a person when the attempt stops.
	askCtx context.Context
	// started is when the attempt started its agent.
	started time.Time
	// beforeLoad is why the agent's record of the session it is to load
	// could not be readied (Agent.BeforeLoad).
	beforeLoad error

	mu        sync.Mutex
	closed    bool // no event goes out any more
	noAsk     bool // no permission request is taken any more
	asking    sync.WaitGroup
	id        string // the session, once made or loaded
	name      string // the agent's own name (initialize's agentInfo)
	loads     bool   // the agent loads sessions
	replaying bool   // session/load replays the history: not this attempt's
	inPrompt  bool   // session/prompt sent and not answered
	cancelled bool   // the executor cancelled the turn
	signedIn  bool   // the agent was asked to sign in (auth.go)
	protoErr  error
	broken    chan struct{} // closed at the first protocol error
	tools     map[string]*toolCall
	declined  map[string]bool // tool calls whose permission was declined
	asked     map[string]bool // … of which a person was asked: the runner records those
	text      map[string]*message
	lastMsg   string // the id of the agent message last written
	// msgSeq numbers the messages of an agent that gives them no id
	// (codex-acp): a tool call between two chunks ends a message.
	msgSeq   int
	thinking map[string]bool
	tokens   state.Usage
	cost     *sdk.Cost
	failure  *runner.Event // the error that failed the turn, sent last
}

// message is an agent message being streamed: its text, and how much of
// it went out as output (a whole line at a time).
type message struct {
	text string
	sent int
}

// toolCall is what the agent said of one tool call so far.
type toolCall struct {
	kind      sdk.ToolKind
	title     string
	input     any
	locations []string
	diffs     []sdk.ToolCallContentDiff
	called    bool // reported as called
	done      bool // its result reported
}

func newSession(x *Executor, spec runner.AttemptSpec, dir string, env []string, out *cli.SessionEmitter) *session {
	return &session{x: x, spec: spec, dir: dir, env: env, out: out, broken: make(chan struct{}), tools: map[string]*toolCall{},
		declined: map[string]bool{}, asked: map[string]bool{}, text: map[string]*message{}, thinking: map[string]bool{}}
}

// send passes an event on, unless the session is closed. Callers must
// not hold mu.
func (s *session) send(ev runner.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendLocked(ev)
}

func (s *session) sendLocked(ev runner.Event) {
	if !s.closed {
		s.out.Send(ev)
	}
}

// close stops every event: nothing the library still delivers goes out.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

func (s *session) sessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

func (s *session) prompting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inPrompt
}

func (s *session) markCancelled() {
	s.mu.Lock()
	s.cancelled = true
	s.mu.Unlock()
}

// agentName is what messages call the agent: its profile's name, else
// what it calls itself, else the executor's kind.
func (s *session) agentName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.x.agent.Name != "":
		return s.x.agent.Name
	case s.name != "":
		return s.name
	}
	return "the " + s.x.cfg.Kind + " agent"
}

// breakProtocol records the first protocol error: the attempt stops.
func (s *session) breakProtocol(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.protoErr == nil {
		s.protoErr = err
		close(s.broken)
	}
}

func (s *session) protocolBroken() <-chan struct{} { return s.broken }

// readStderr passes the agent's stderr on as log lines; its profile's
// noise as the executor's.
func (s *session) readStderr(r io.Reader) {
	lr := proc.NewLineReader(r, 64<<10)
	for {
		line, err := lr.Next()
		if err != nil {
			return
		}
		stream := runner.StreamStderr
		if s.x.agent.Noise != nil && s.x.agent.Noise(line) {
			stream, line = state.LogExecutor, "(noise "+s.agentName()+" prints at every start) "+state.PlainText(line)
		}
		s.send(runner.Event{Type: runner.EventLines, Stream: stream, Lines: []string{line}, Notice: true})
	}
}

// converse is the turn: initialize, the session (new, or loaded to
// continue), the model, the prompt.
func (s *session) converse(ctx context.Context, conn *sdk.ClientSideConnection) turnResult {
	init, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientInfo: &sdk.Implementation{Name: "edge-agent", Version: "1"}})
	if err != nil {
		return turnResult{err: err}
	}
	loads := init.AgentCapabilities.LoadSession
	s.mu.Lock()
	if init.AgentInfo != nil {
		s.name = init.AgentInfo.Name
	}
	s.loads = loads
	s.mu.Unlock()
	if !loads {
		s.x.noLoad.Store(true)
	}
	if int(init.ProtocolVersion) != sdk.ProtocolVersionNumber {
		s.breakProtocol(fmt.Errorf("%s speaks ACP version %d, the agent version %d", s.agentName(), init.ProtocolVersion, sdk.ProtocolVersionNumber))
		return turnResult{err: errPeerGone}
	}
	var (
		options []sdk.SessionConfigOption
		models  *sdk.SessionModelState
		prompt  = s.spec.Task.Prompt
	)
	if r := s.spec.Resume; r != nil {
		if err := s.load(ctx, conn, r, loads, init.AuthMethods, &options, &models); err != nil {
			return turnResult{err: err}
		}
		prompt = r.Prompt
	} else {
		resp, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: s.dir, McpServers: []sdk.McpServer{}})
		if s.signIn(ctx, conn, init.AuthMethods, err) {
			resp, err = conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: s.dir, McpServers: []sdk.McpServer{}})
		}
		if err != nil {
			return turnResult{err: err}
		}
		if resp.SessionId == "" {
			s.breakProtocol(fmt.Errorf("%s made a session without an id", s.agentName()))
			return turnResult{err: errPeerGone}
		}
		s.bind(string(resp.SessionId), "")
		options, models = resp.ConfigOptions, resp.Models
	}
	if model := s.spec.Task.Model; model != "" {
		if err := s.chooseModel(ctx, conn, model, options, models); err != nil {
			return turnResult{err: err}
		}
	}
	s.mu.Lock()
	s.inPrompt = true
	id := s.id
	s.sendLocked(runner.Event{Type: runner.EventPhase, Phase: state.PhaseTurnStarted, Notice: true})
	s.mu.Unlock()
	resp, err := conn.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(id), Prompt: []sdk.ContentBlock{sdk.TextBlock(prompt)}})
	s.mu.Lock()
	s.inPrompt = false
	s.mu.Unlock()
	if err != nil {
		return turnResult{err: err}
	}
	return turnResult{resp: &resp}
}

// load continues an earlier attempt's session (session/load). The
// history the agent replays while it loads is not this attempt's: it is
// not reported. A session the agent cannot load ends the attempt as
// session_lost; none is made in its place.
func (s *session) load(ctx context.Context, conn *sdk.ClientSideConnection, r *runner.Resume, loads bool, methods []sdk.AuthMethod, options *[]sdk.SessionConfigOption, models **sdk.SessionModelState) error {
	lost := func(why string) error {
		return &setupError{code: state.CodeSessionLost, msg: s.agentName() + " could not continue session " + r.SessionID + ": " + why}
	}
	if !loads {
		return lost("it does not load sessions (no loadSession in its capabilities)")
	}
	if r.Path != "" {
		if _, err := os.Stat(r.Path); err != nil {
			return lost("its record is gone: " + err.Error())
		}
	}
	if s.beforeLoad != nil {
		return lost(s.beforeLoad.Error())
	}
	s.mu.Lock()
	s.replaying = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.replaying = false
		s.mu.Unlock()
	}()
	req := sdk.LoadSessionRequest{SessionId: sdk.SessionId(r.SessionID), Cwd: s.dir, McpServers: []sdk.McpServer{}}
	resp, err := conn.LoadSession(ctx, req)
	if s.signIn(ctx, conn, methods, err) {
		resp, err = conn.LoadSession(ctx, req)
	}
	if err == nil && s.x.agent.ReplaysAfterLoad {
		err = s.awaitReplay(ctx, conn, r.SessionID, resp.Modes)
	}
	if err != nil {
		if s.peerGone(err) {
			return err
		}
		return lost(errorText(err))
	}
	s.bind(r.SessionID, r.Path)
	*options, *models = resp.ConfigOptions, resp.Models
	return nil
}

// awaitReplay waits for the end of the history an agent replays after
// its answer to session/load (Agent.ReplaysAfterLoad): it asks for the
// session's own mode again (session/set_mode, which changes nothing), and
// the protocol library hands over the answer only once every update
// that came before it has been taken (and dropped as the replay).
func (s *session) awaitReplay(ctx context.Context, conn *sdk.ClientSideConnection, id string, modes *sdk.SessionModeState) error {
	if modes == nil || modes.CurrentModeId == "" {
		return fmt.Errorf("its answer to session/load names no mode, so the end of its replay of the session cannot be told from the new turn")
	}
	_, err := conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: sdk.SessionId(id), ModeId: modes.CurrentModeId})
	return err
}

// bind names the attempt's session, with where it is kept: a record in
// the task's session directory when the agent loads sessions (the path
// the runner continues it by), none when it cannot.
func (s *session) bind(id, path string) {
	s.mu.Lock()
	s.id = id
	loads := s.loads
	s.mu.Unlock()
	if path == "" && loads {
		path = sessionRecord(s.spec.SessionDir, s.x.cfg.Kind, s.agentName(), id, s.dir)
	}
	s.out.BindAt(id, path)
}

// chooseModel sets the session's model: its model option
// (session/set_config_option), or session/set_model. An agent that
// offers neither cannot be given a model.
func (s *session) chooseModel(ctx context.Context, conn *sdk.ClientSideConnection, model string, options []sdk.SessionConfigOption, models *sdk.SessionModelState) error {
	id := sdk.SessionId(s.sessionID())
	refused := func(err error) error {
		var re *sdk.RequestError
		_ = errors.As(err, &re)
		msg := errorText(err)
		// An agent may ask the model API to take the name first
		// (claude-code-acp 0.16.2: a one-token request): a rate limit,
		// a spent quota or a login the API refuses then fails the
		// choice, and is what it is, not a wrong name.
		if c := s.classifyLocked(re, msg); c != "" && c != state.CodeInvalidRequest {
			return &setupError{code: c, msg: fmt.Sprintf("%s could not choose model %s: %s", s.agentName(), model, msg)}
		}
		return &setupError{code: state.CodeInvalidRequest, msg: fmt.Sprintf("%s refused model %s: %s", s.agentName(), model, msg)}
	}
	for _, o := range options {
		sel := o.Select
		if sel == nil || !(sel.Category != nil && *sel.Category == sdk.SessionConfigOptionCategoryModel || sel.Id == "model") {
			continue
		}
		if string(sel.CurrentValue) == model {
			return nil
		}
		_, err := conn.SetSessionConfigOption(ctx, sdk.SetSessionConfigOptionRequest{ValueId: &sdk.SetSessionConfigOptionValueId{
			ConfigId: sel.Id, SessionId: id, Value: sdk.SessionConfigValueId(model)}})
		if err != nil {
			return refused(err)
		}
		return nil
	}
	if models != nil {
		if string(models.CurrentModelId) == model {
			return nil
		}
		if _, err := conn.UnstableSetSessionModel(ctx, sdk.UnstableSetSessionModelRequest{SessionId: id, ModelId: sdk.UnstableModelId(model)}); err != nil {
			return refused(err)
		}
		return nil
	}
	return &setupError{code: state.CodeInvalidRequest,
		msg: fmt.Sprintf("%s offers no way to choose a model (its session has no model option): leave --models empty to use its own, or choose it in its settings", s.agentName())}
}

// peerGone reports whether err says the agent went away before it
// answered (the library's own error, not the agent's).
func (s *session) peerGone(err error) bool {
	if errors.Is(err, errPeerGone) {
		return true
	}
	var re *sdk.RequestError
	if errors.As(err, &re) && re.Code == -32603 {
		if d, ok := re.Data.(map[string]any); ok {
			if e, ok := d["error"].(string); ok && strings.HasPrefix(e, "peer disconnected") {
				return true
			}
		}
	}
	return false
}

// errorText is an agent's error as a person reads it: its message, the
// JSON-RPC boilerplate taken off.
func errorText(err error) string {
	var re *sdk.RequestError
	if !errors.As(err, &re) {
		return err.Error()
	}
	msg := strings.TrimSpace(re.Message)
	generic := false
	for _, g := range []string{"Internal error", "Invalid params", "Invalid request"} {
		if rest, ok := strings.CutPrefix(msg, g); ok {
			rest = strings.TrimSpace(strings.TrimPrefix(rest, ":"))
			msg, generic = rest, true
			if rest == "" {
				msg = g
			}
			break
		}
	}
	if d, ok := re.Data.(map[string]any); ok {
		for _, k := range []string{"details", "message", "error"} {
			v, ok := d[k].(string)
			switch {
			case !ok || v == "" || strings.Contains(msg, v):
				continue
			case generic && (msg == "Internal error" || msg == "Invalid params" || msg == "Invalid request"):
				msg = v
			default:
				msg += ": " + v
			}
			break
		}
	}
	return msg
}

// conclude makes the turn's outcome: the result of a turn that ended,
// the error of one that failed, or a protocol error.
func (s *session) conclude(r *turnResult, exit *runner.Exit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		// Said at once: it shows the model answered (the first-event
		// limit stops); the agent's own record may say it better later.
		if s.failure != nil {
			s.sendLocked(*s.failure)
		}
	}()
	s.flushLocked("")
	exit.Turn = runner.TurnFailed
	if s.protoErr != nil {
		exit.ProtocolErr = s.protoErr
		return
	}
	if r == nil {
		return
	}
	if s.declinedEndLocked(r) {
		r = &turnResult{resp: &sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}}
	}
	if r.err != nil {
		var se *setupError
		switch {
		case errors.As(r.err, &se):
			s.failure = &runner.Event{Type: runner.EventError, Code: se.code, Message: se.msg}
		case s.peerGone(r.err) || errors.Is(r.err, context.Canceled):
			if !exit.Killed {
				exit.ProtocolErr = fmt.Errorf("%s ended (%s) before the turn ended", s.nameLocked(), cli.ExitText(*exit))
			}
		case exit.Killed && s.cancelled:
			// Our own cancel: the runner knows why it stopped.
		default:
			var re *sdk.RequestError
			_ = errors.As(r.err, &re)
			msg := errorText(r.err)
			s.failure = &runner.Event{Type: runner.EventError, Code: s.classifyLocked(re, msg), Message: msg,
				RetryAfterMS: RetryHint(msg).Milliseconds()}
		}
		return
	}
	if got, ok := promptUsage(r.resp); ok && got.TotalTokens > s.tokens.TotalTokens {
		s.tokens = got
		s.sendLocked(runner.UsageEvent(got))
	}
	complete := func() {
		exit.Turn, exit.ProtocolErr = runner.TurnCompleted, nil
		s.sendLocked(runner.Event{Type: runner.EventPhase, Phase: state.PhaseCompleting})
		data, _ := json.Marshal(map[string]any{"stop_reason": r.resp.StopReason, "usage": r.resp.Usage, "cost": s.cost, "agent": s.nameLocked()})
		summary := ""
		if m := s.text[s.lastMsg]; m != nil {
			summary = strings.TrimSpace(m.text)
		}
		s.sendLocked(runner.Event{Type: runner.EventResult, Summary: summary, Data: data})
	}
	switch r.resp.StopReason {
	case sdk.StopReasonEndTurn:
		if s.cancelled {
			// Asked to stop, the agent may still say its turn ended
			// (OpenCode 1.18.33, cancelled while it waits to retry):
			// nothing came of it.
			return
		}
		reported, _ := promptUsage(r.resp)
		if cut := s.turnCutLocked(reported); cut != "" {
			s.failure = &runner.Event{Type: runner.EventError, Code: state.CodeNetwork, Message: cut}
			return
		}
		complete()
	case sdk.StopReasonCancelled:
		switch {
		case s.cancelled:
		case len(s.declined) > 0:
			// The agent ends its turn when a call is declined (codex-acp
			// 0.16.0 offers Codex's abort as its only way to decline):
			// the turn is over by the answer, not failed.
			complete()
		default:
			s.failure = &runner.Event{Type: runner.EventError, Message: s.nameLocked() + " cancelled the turn itself"}
		}
	case sdk.StopReasonMaxTokens:
		s.failure = &runner.Event{Type: runner.EventError, Message: "the model's answer was cut at its output limit (stop reason max_tokens)"}
	case sdk.StopReasonMaxTurnRequests:
		s.failure = &runner.Event{Type: runner.EventError, Message: s.nameLocked() + " reached its most model requests in one turn (stop reason max_turn_requests)"}
	case sdk.StopReasonRefusal:
		s.failure = &runner.Event{Type: runner.EventError, Message: "the model refused to go on (stop reason refusal)"}
	default:
		s.failure = &runner.Event{Type: runner.EventError, Message: fmt.Sprintf("%s ended the turn with stop reason %q", s.nameLocked(), r.resp.StopReason)}
	}
}

// declinedEndLocked reports whether the prompt's error is how the agent
// ends its turn after a call was declined (Agent.DeclineFailsTurn): the
// turn is then over by the answer, as when codex-acp cancels it. An
// error of a class of its own (the model API's) is still a failure.
func (s *session) declinedEndLocked(r *turnResult) bool {
	var re *sdk.RequestError
	if !s.x.agent.DeclineFailsTurn || r.err == nil || len(s.declined) == 0 || s.cancelled || !errors.As(r.err, &re) {
		return false
	}
	return s.classifyLocked(re, errorText(r.err)) == ""
}

// turnCutLocked is why a turn the agent said ended did not, by its own
// record (Agent.TurnCut), "" when it did or the record cannot tell.
func (s *session) turnCutLocked(reported state.Usage) string {
	if s.x.agent.TurnCut == nil || s.id == "" {
		return ""
	}
	why, err := s.x.agent.TurnCut(s.env, s.id, s.started, reported)
	if err != nil {
		s.sendLocked(runner.Event{Type: runner.EventLog, Level: runner.LevelWarn, Notice: true,
			Message: "could not read " + s.nameLocked() + "'s record of the session: " + runner.Clip(err.Error(), 300)})
		return ""
	}
	return why
}

func (s *session) nameLocked() string {
	switch {
	case s.x.agent.Name != "":
		return s.x.agent.Name
	case s.name != "":
		return s.name
	}
	return "the " + s.x.cfg.Kind + " agent"
}

func (s *session) classifyLocked(re *sdk.RequestError, msg string) state.ErrorCode {
	var (
		data map[string]any
		code int
	)
	if re != nil {
		data, _ = re.Data.(map[string]any)
		code = re.Code
		if code == -32000 { // the protocol's auth_required
			return state.CodeAuth
		}
	}
	if s.x.agent.Classify != nil {
		if c := s.x.agent.Classify(code, msg, data); c != "" {
			return c
		}
	}
	c := Classify(msg)
	if code >= 400 && code < 600 && c != state.CodeQuota && c != state.CodeContextOverflow && c != state.CodeOverloaded {
		// An agent that answers with the API's HTTP status as the
		// error's code (Gemini CLI): the status says the class.
		return cli.HTTPStatusCode(code)
	}
	return c
}

// SessionUpdate implements acp.Client: what the agent reports of the
// turn.
func (s *session) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replaying || s.closed || s.id != "" && string(n.SessionId) != s.id {
		return nil // the history of a loaded session, or another session's
	}
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		s.agentText(msgID(u.AgentMessageChunk.MessageId), u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		id := msgID(u.AgentThoughtChunk.MessageId)
		if !s.thinking[id] {
			s.thinking[id] = true
			s.sendLocked(runner.Event{Type: runner.EventProgress, Message: "thinking", Step: "thought"})
		}
	case u.ToolCall != nil:
		s.msgSeq++
		t := u.ToolCall
		call := &toolCall{kind: t.Kind, title: t.Title, input: t.RawInput}
		s.tools[string(t.ToolCallId)] = call
		call.merge(nil, nil, t.RawInput, t.Locations, t.Content)
		s.toolStatus(string(t.ToolCallId), call, t.Status)
	case u.ToolCallUpdate != nil:
		t := u.ToolCallUpdate
		call := s.tools[string(t.ToolCallId)]
		if call == nil {
			if len(s.tools) >= maxTools {
				return nil
			}
			call = &toolCall{}
			s.tools[string(t.ToolCallId)] = call
		}
		call.merge(t.Kind, t.Title, t.RawInput, t.Locations, t.Content)
		if t.Status != nil {
			s.toolStatus(string(t.ToolCallId), call, *t.Status)
		}
	case u.Plan != nil:
		var steps []string
		for _, e := range u.Plan.Entries {
			steps = append(steps, fmt.Sprintf("[%s] %s", e.Status, runner.Clip(e.Content, 120)))
		}
		s.sendLocked(runner.Event{Type: runner.EventProgress, Step: "plan", Message: runner.Clip("plan: "+strings.Join(steps, "; "), 500)})
	case u.UsageUpdate != nil:
		if c := u.UsageUpdate.Cost; c != nil {
			s.cost = c
		}
	}
	// The rest (the user's echoed prompt, commands, modes, options, the
	// session's title) says nothing the runner needs.
	return nil
}

// maxTools bounds the tool calls remembered in one turn.
const maxTools = 4096

func msgID(id *string) string {
	if id == nil {
		return ""
	}
	return *id
}

// agentText streams an agent message as output, a whole line at a time;
// a message that follows another ends it (the rest of it goes out).
func (s *session) agentText(id string, c sdk.ContentBlock) {
	if c.Text == nil || c.Text.Text == "" {
		return
	}
	if id == "" {
		id = "#" + strconv.Itoa(s.msgSeq)
	}
	if id != s.lastMsg {
		s.flushLocked(s.lastMsg)
		if len(s.text) >= maxTools {
			delete(s.text, s.lastMsg)
		}
		s.lastMsg = id
	}
	m := s.text[id]
	if m == nil {
		m = &message{}
		s.text[id] = m
		s.sendLocked(runner.Event{Type: runner.EventProgress, Message: "the model is answering", Step: "message"})
	}
	if len(m.text) < maxMessage {
		m.text += c.Text.Text
	}
	if i := strings.LastIndexByte(m.text, '\n'); i >= m.sent {
		s.sendLocked(runner.Event{Type: runner.EventOutput, Text: strings.TrimSuffix(m.text[m.sent:i], "\r")})
		m.sent = i + 1
	}
}

// maxMessage bounds the text kept of one agent message.
const maxMessage = 4 << 20

// flushLocked sends what is left of a message (the last one when id is
// "" and no message has that id).
func (s *session) flushLocked(id string) {
	if id == "" {
		id = s.lastMsg
	}
	m := s.text[id]
	if m == nil || m.sent >= len(m.text) {
		return
	}
	if rest := m.text[m.sent:]; strings.TrimSpace(rest) != "" {
		s.sendLocked(runner.Event{Type: runner.EventOutput, Text: strings.TrimSuffix(rest, "\n")})
	}
	m.sent = len(m.text)
}

// merge takes what an update says of a tool call.
func (t *toolCall) merge(kind *sdk.ToolKind, title *string, input any, locations []sdk.ToolCallLocation, content []sdk.ToolCallContent) {
	if kind != nil && *kind != "" {
		t.kind = *kind
	}
	if title != nil && *title != "" {
		t.title = *title
	}
	if m, ok := input.(map[string]any); ok && len(m) > 0 {
		old, _ := t.input.(map[string]any)
		merged := map[string]any{}
		for k, v := range old {
			merged[k] = v
		}
		for k, v := range m {
			merged[k] = v
		}
		t.input = merged
	} else if input != nil {
		t.input = input
	}
	for _, l := range locations {
		if l.Path != "" && !contains(t.locations, l.Path) && len(t.locations) < 64 {
			t.locations = append(t.locations, l.Path)
		}
	}
	for _, c := range content {
		if c.Diff != nil && len(t.diffs) < 64 {
			t.diffs = append(t.diffs, *c.Diff)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// name is the tool's name in events: its kind (execute, edit, read, …).
func (t *toolCall) name() string {
	if t.kind != "" {
		return string(t.kind)
	}
	return "tool"
}

// str is the string input key of a tool call's raw input, "" when it has
// none.
func (t *toolCall) str(keys ...string) string {
	m, _ := t.input.(map[string]any)
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case []any:
			var parts []string
			for _, p := range v {
				if ps, ok := p.(string); ok {
					parts = append(parts, ps)
				}
			}
			if len(parts) > 0 {
				return strings.Join(parts, " ")
			}
		}
	}
	return ""
}

// command is what an execute call runs.
func (t *toolCall) command() string {
	if c := t.str("command", "cmd"); c != "" {
		return c
	}
	return t.title
}

// paths are the files a call changes or reads.
func (t *toolCall) paths() []string {
	paths := append([]string{}, t.locations...)
	for _, d := range t.diffs {
		if d.Path != "" && !contains(paths, d.Path) {
			paths = append(paths, d.Path)
		}
	}
	if len(paths) == 0 {
		if p := t.str("filePath", "file_path", "path", "filepath"); p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

// sideEffectKinds change something when their call completes.
var sideEffectKinds = map[sdk.ToolKind]bool{sdk.ToolKindExecute: true, sdk.ToolKindEdit: true, sdk.ToolKindDelete: true, sdk.ToolKindMove: true}

// toolStatus reports a tool call's progress: pending is the model
// writing its input; in progress, called; completed or failed, its
// result, and what it changed.
func (s *session) toolStatus(id string, t *toolCall, status sdk.ToolCallStatus) {
	switch status {
	case sdk.ToolCallStatusPending, "":
		if !t.called {
			s.sendLocked(runner.Event{Type: runner.EventTool, Name: t.name(), Stage: runner.StageInput})
		}
		return
	}
	if !t.called {
		t.called = true
		s.sendLocked(runner.Event{Type: runner.EventTool, Name: t.name(), Stage: runner.StageCall})
		s.sendLocked(runner.Event{Type: runner.EventProgress, Step: t.name(), Message: runner.Clip(t.name()+": "+t.what(), 200)})
	}
	if status == sdk.ToolCallStatusInProgress || t.done {
		return
	}
	t.done = true
	s.sendLocked(runner.Event{Type: runner.EventTool, Name: t.name(), Stage: runner.StageResult})
	if !sideEffectKinds[t.kind] || s.declined[id] {
		return
	}
	switch {
	case t.kind == sdk.ToolKindExecute:
		desc := "ran " + runner.Clip(t.command(), 500)
		if status == sdk.ToolCallStatusFailed {
			// Conservative: a command that failed may have done part of
			// its work.
			desc += " (failed)"
		}
		s.sendLocked(runner.Event{Type: runner.EventSideEffect, Description: desc})
	case status == sdk.ToolCallStatusCompleted:
		for _, p := range t.paths() {
			s.sendLocked(runner.Event{Type: runner.EventSideEffect, Description: string(t.kind) + " " + p})
		}
		if len(t.paths()) == 0 {
			s.sendLocked(runner.Event{Type: runner.EventSideEffect, Description: string(t.kind) + " " + runner.Clip(t.title, 300)})
		}
	}
}

// what says what a call does, in a line.
func (t *toolCall) what() string {
	switch t.kind {
	case sdk.ToolKindExecute:
		return t.command()
	case sdk.ToolKindEdit, sdk.ToolKindDelete, sdk.ToolKindMove, sdk.ToolKindRead:
		if p := t.paths(); len(p) > 0 {
			return strings.Join(p, ", ")
		}
	}
	return t.title
}

// promptUsage is the tokens a prompt's answer says the turn used: its
// usage, else Gemini CLI's _meta.quota.token_count.
func promptUsage(resp *sdk.PromptResponse) (state.Usage, bool) {
	var u state.Usage
	if pu := resp.Usage; pu != nil {
		u = state.Usage{InputTokens: int64(pu.InputTokens), OutputTokens: int64(pu.OutputTokens), TotalTokens: int64(pu.TotalTokens)}
	} else if q, ok := resp.Meta["quota"].(map[string]any); ok {
		tc, _ := q["token_count"].(map[string]any)
		in, _ := tc["input_tokens"].(float64)
		out, _ := tc["output_tokens"].(float64)
		u = state.Usage{InputTokens: int64(max(in, 0)), OutputTokens: int64(max(out, 0))}
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.InputTokens + u.OutputTokens
	}
	return u, u.TotalTokens > 0
}
