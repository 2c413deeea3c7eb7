// Package claude is the claude executor: it runs Claude Code in print mode
// with stream-json output, one process per attempt, the prompt on stdin,
// and reads its lines as events; the result line decides the outcome. In
// print mode the CLI asks nobody: what its permissions do not allow it
// denies, and each denial is a denied call of the attempt. With an
// approval policy other than never, it asks the agent instead, through
// the permission prompt tool the agent serves (see approvals.go), and the
// agent answers by the policy or asks a person. An attempt that continues
// an earlier one's session runs with --resume and sends the follow-up; a
// session Claude Code cannot resume ends the attempt with code
// session_lost, never a new session.
package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// Config configures the claude executor. Zero fields take the
// defaults their comments give.
type Config struct {
	// Base: Bin defaults to "claude" on PATH; Args are added to the
	// command line after the agent's own; CLAUDE_CONFIG_DIR and
	// ANTHROPIC_* always pass; Grace is each stop step's wait: for the
	// result line after SIGINT, then between SIGTERM and SIGKILL; MaxLine
	// is the longest stdout line read.
	cli.Base
	// AllowedTools (--allowedTools) and PermissionMode (--permission-mode)
	// decide what the CLI may do without asking; what else it wants, it
	// denies, or asks the agent about (Approval).
	AllowedTools   []string
	PermissionMode string
	// Approval answers what Claude Code would ask a person about: never
	// (default: it denies it), accept, decline, or ask a person. Other
	// than never, Claude Code runs with --permission-prompt-tool, served
	// by PromptTool: the command (the agent's own binary and its
	// claude-approval-mcp subcommand) that runs ServeMCP with --dir DIR
	// appended, with PromptEnv (NAME=VALUE) set.
	Approval   runner.ApprovalPolicy
	PromptTool []string
	PromptEnv  []string
	// MaxRetries caps the CLI's own retries (CLAUDE_CODE_MAX_RETRIES), so
	// the agent owns retrying. Default 1; negative for 0.
	MaxRetries int
	// APITimeout bounds the CLI's wait for the model's response headers
	// (API_TIMEOUT_MS). Default: the attempt's first-event limit, so a
	// model that never answers fails inside the CLI first.
	APITimeout time.Duration
	// LimitWait: a retry Claude Code would wait longer than this for, after
	// a 429 (its retry-after: a usage limit's reset), is a usage limit:
	// the attempt is stopped, usage_limit with the wait, and the task
	// parks until then rather than the CLI sleeping through it holding a
	// slot. Default DefaultLimitWait.
	LimitWait time.Duration
}

// DefaultLimitWait is the longest retry wait after a 429 that is left to
// Claude Code itself.
const DefaultLimitWait = time.Minute

// Claude drives Claude Code in print mode with stream-json output: one
// process per attempt; its result line decides the outcome.
type Claude struct{ cfg Config }

// New returns a claude executor.
func New(cfg Config) (*Claude, error) {
	switch cfg.PermissionMode {
	case "", "default", "acceptEdits", "dontAsk", "plan", "bypassPermissions":
	default:
		return nil, fmt.Errorf("claude executor: permission mode %q: want default, acceptEdits, dontAsk, plan or bypassPermissions", cfg.PermissionMode)
	}
	switch cfg.Approval {
	case "":
		cfg.Approval = runner.ApprovalNever
	case runner.ApprovalNever:
	case runner.ApprovalAcceptAll, runner.ApprovalDeclineAll, runner.ApprovalAsk:
		if err := CanAsk(cfg.PermissionMode); err != nil {
			return nil, fmt.Errorf("claude executor: --approval %s: %w", cfg.Approval, err)
		}
		if len(cfg.PromptTool) == 0 {
			return nil, fmt.Errorf("claude executor: --approval %s needs the command that serves the permission prompt tool", cfg.Approval)
		}
	default:
		return nil, fmt.Errorf("claude executor: approval policy %q: want never, accept, decline or ask", cfg.Approval)
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = 1
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.LimitWait <= 0 {
		cfg.LimitWait = DefaultLimitWait
	}
	if err := cfg.Defaults("claude"); err != nil {
		return nil, err
	}
	return &Claude{cfg: cfg}, nil
}

// CanAsk says why Claude Code in a permission mode never asks, nil when
// it does: dontAsk denies whatever is not allowed and bypassPermissions
// allows everything, without asking the permission prompt tool (seen on
// 2.1.330). default asks for what is not allowed, and acceptEdits for
// what it does not accept on its own (edits in the work directory and
// some file commands it takes as edits).
func CanAsk(permissionMode string) error {
	switch permissionMode {
	case "dontAsk", "bypassPermissions":
		return fmt.Errorf("in permission mode %s Claude Code never asks; use --claude-permission-mode default (or acceptEdits) to be asked", permissionMode)
	}
	return nil
}

// Name implements runner.Executor.
func (c *Claude) Name() string { return "claude" }

// Resumes implements runner.Resumer: Claude Code keeps every session in a
// transcript, and --resume takes it up.
func (c *Claude) Resumes() bool { return true }

// Probe implements runner.Executor.
func (c *Claude) Probe(ctx context.Context) error { return c.cfg.Probe(ctx) }

// args is the command line after the binary. The prompt goes to stdin, so
// no prompt can pass for a flag.
func (c *Claude) args(spec runner.AttemptSpec, ask *askServer) []string {
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	if ask != nil {
		args = append(args, "--mcp-config", ask.configPath(), "--permission-prompt-tool", PromptToolID)
	}
	if r := spec.Resume; r != nil {
		// The same session goes on (2.1.330 keeps its id in print mode).
		args = append(args, "--resume", r.SessionID)
	}
	if model := spec.Task.Model; model != "" {
		args = append(args, "--model", model)
	}
	if len(c.cfg.AllowedTools) > 0 {
		args = append(args, "--allowedTools", strings.Join(c.cfg.AllowedTools, ","))
	}
	if c.cfg.PermissionMode != "" {
		args = append(args, "--permission-mode", c.cfg.PermissionMode)
	}
	return append(args, c.cfg.Args...)
}

// env is what the CLI is told besides the allowlist: no traffic but the
// model's, few retries of its own, and a bound on the wait for headers.
func (c *Claude) env(spec runner.AttemptSpec) []string {
	timeout := c.cfg.APITimeout
	if timeout <= 0 {
		timeout = spec.FirstEventLimit
	}
	if timeout <= 0 {
		timeout = time.Minute
	}
	set := []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=" + strconv.Itoa(c.cfg.MaxRetries),
		"API_TIMEOUT_MS=" + strconv.FormatInt(timeout.Milliseconds(), 10)}
	return spec.Environ(append([]string{"CLAUDE_CONFIG_DIR", "ANTHROPIC_*"}, c.cfg.EnvPass...), append(set, c.cfg.Env...))
}

// claudeConfigDir is where Claude Code keeps its state:
// CLAUDE_CONFIG_DIR, else ~/.claude.
func claudeConfigDir(env []string) string {
	if d := cli.EnvValue(env, "CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	return cli.HomeDir(env, ".claude")
}

// ConfigDir is where Claude Code keeps its state (CLAUDE_CONFIG_DIR,
// else ~/.claude), for the executors that run it under another name
// (the acp executor's claude-code-acp).
func ConfigDir(env []string) string { return claudeConfigDir(env) }

// Endpoints are the hosts Claude Code reaches its model at, given its
// environment, for the executors that run it under another name.
func Endpoints(env []string) []egress.Rule { return endpoints(env) }

// defaultEndpoints are where Claude Code reaches its model: the API, and
// the token refresh of a subscription login.
var defaultEndpoints = []string{"api.anthropic.com", "platform.claude.com"}

// endpoints are the hosts an attempt's Claude Code must reach, for its
// confined network (runner.AttemptSpec.EgressPolicy): its own and
// ANTHROPIC_BASE_URL's.
func endpoints(env []string) []egress.Rule {
	var out []egress.Rule
	for _, h := range defaultEndpoints {
		if r, err := egress.ParseRule(h); err == nil {
			out = append(out, r)
		}
	}
	if r, ok := egress.Endpoint(cli.EnvValue(env, "ANTHROPIC_BASE_URL")); ok {
		out = append(out, r)
	}
	return out
}

// Reattaches implements runner.Reattacher: an attempt outlives the agent.
// Its prompt is all it reads, written by the keeper; its stream-json
// output is spooled and read again from the last checkpoint. With an
// approval policy that may ask, the permission prompt tool's MCP server
// (a child of Claude Code's, under the same keeper) outlives the agent
// too, and the agent's next life serves its socket again (approvals.go).
func (c *Claude) Reattaches() bool { return true }

// claudeState is where a spooled attempt is, as its checkpoints say: how
// far its stdout and stderr are reported (offsets in the spool), and what
// the session had read up to there.
type claudeState struct {
	Stdout      int64                  `json:"stdout"`
	Stderr      int64                  `json:"stderr"`
	Session     string                 `json:"session,omitempty"`
	SessionPath string                 `json:"session_path,omitempty"`
	Started     bool                   `json:"started,omitempty"`
	Tools       map[string]savedTool   `json:"tools,omitempty"`
	Streaming   bool                   `json:"streaming,omitempty"`
	Synthetic   string                 `json:"synthetic,omitempty"`
	RetryDelay  time.Duration          `json:"retry_delay,omitempty"`
	Messages    map[string]state.Usage `json:"messages,omitempty"`
	Tokens      state.Usage            `json:"tokens"`
	Turn        runner.TurnEnd         `json:"turn,omitempty"`
	// Answered are the tool calls the agent answered (a denial of which
	// the result line must not report again).
	Answered []string `json:"answered,omitempty"`
}

// savedTool is a claudeTool as a checkpoint holds it.
type savedTool struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// save is the session's state at stdout and stderr.
func (s *claudeSession) save(stdout, stderr int64) claudeState {
	id, path := s.out.Session()
	st := claudeState{Stdout: stdout, Stderr: stderr, Session: id, SessionPath: path, Started: s.started, Streaming: s.streaming,
		Synthetic: s.synthetic, RetryDelay: s.retryDelay, Messages: s.messages, Tokens: s.tokens, Turn: s.turn}
	if len(s.tools) > 0 {
		st.Tools = make(map[string]savedTool, len(s.tools))
		for id, t := range s.tools {
			st.Tools[id] = savedTool{Name: t.name, Input: t.input}
		}
	}
	if s.ask != nil {
		st.Answered = s.ask.answeredIDs()
	}
	return st
}

// restore takes the session up from st.
func (s *claudeSession) restore(st claudeState) {
	s.out.Restore(st.Session, st.SessionPath)
	s.started, s.streaming, s.synthetic, s.retryDelay, s.tokens, s.turn = st.Started, st.Streaming, st.Synthetic, st.RetryDelay, st.Tokens, st.Turn
	s.messages = st.Messages
	for id, t := range st.Tools {
		s.tools[id] = claudeTool{name: t.Name, input: t.Input}
	}
	if s.ask != nil {
		s.ask.restoreAnswered(st.Answered)
	}
}

// spooledLine is a line of stdout and the spool offset it ends at.
type spooledLine struct {
	text string
	end  int64
}

// Run implements runner.Executor.
func (c *Claude) Run(ctx context.Context, spec runner.AttemptSpec, emit func(runner.Event)) runner.Exit {
	dir := spec.WorkDir
	if dir == "" {
		dir = c.cfg.Dir
	}
	env := c.env(spec)
	configDir := claudeConfigDir(env)
	var (
		p   *proc.Process
		ask *askServer
		st  claudeState // where reading starts: the last checkpoint's, or the start
	)
	askWorkDir := dir
	if askWorkDir == "" {
		askWorkDir, _ = os.Getwd()
	}
	// The ask server closes with the attempt, or is left to the agent's
	// next life with it.
	detached := false
	defer func() {
		switch {
		case ask == nil:
		case detached:
			ask.detach()
		default:
			ask.close()
		}
	}()
	if re := spec.Reattach; re != nil {
		p = re.Process
		if re.State != nil {
			if err := json.Unmarshal(re.State, &st); err != nil {
				return runner.Exit{StartErr: fmt.Errorf("the attempt's checkpoint: %w", err), ExitCode: -1}
			}
		}
		if c.cfg.Approval != runner.ApprovalNever {
			var err error
			if ask, err = reopenAskServer(ctx, spec, c.cfg.Approval, askWorkDir); err != nil {
				return runner.Exit{StartErr: err, ExitCode: -1}
			}
		}
		p.ReadFrom(st.Stdout, st.Stderr)
	} else {
		path, err := proc.Resolve(c.cfg.Bin)
		if err != nil {
			return runner.Exit{StartErr: err, ExitCode: -1}
		}
		prompt := spec.Task.Prompt
		if spec.Resume != nil {
			prompt = spec.Resume.Prompt
		}
		if c.cfg.Approval != runner.ApprovalNever {
			ask, err = newAskServer(ctx, spec, c.cfg.Approval, c.cfg.PromptTool, c.cfg.PromptEnv, askWorkDir)
			if err != nil {
				return runner.Exit{StartErr: err, ExitCode: -1}
			}
		}
		ps := proc.Spec{Name: c.cfg.Bin, Path: path, Args: c.args(spec, ask), Dir: dir,
			Env: env, Mark: spec.ProcessMark(), Stdin: strings.NewReader(prompt), Grace: c.cfg.Grace,
			Confine: spec.Confinement(configDir), Egress: spec.EgressPolicy(endpoints(env)...), User: spec.ProcUser()}
		if spec.Spool != nil {
			ps.Spool = spec.Spool.Proc() // the keeper writes the prompt, then closes stdin
		}
		if p, err = proc.Start(ps); err != nil {
			return runner.Exit{StartErr: err, ExitCode: -1}
		}
	}
	var wanted <-chan struct{}
	if spec.Spool != nil {
		spec.Spool.Started(p)
		wanted = spec.Spool.Wanted()
	}
	out := cli.NewSessionEmitter(emit, "claude", p.Pid())
	if ask != nil {
		ask.start(out.Send) // its events wait for the session as the CLI's do
	}
	s := &claudeSession{tools: map[string]claudeTool{}, out: out, configDir: configDir, resume: spec.Resume, ask: ask, limitWait: c.cfg.LimitWait}
	s.restore(st)
	// What is reported of the output moves with what is emitted, under
	// emitMu: a checkpoint taken under it says exactly what was reported.
	// Before the session is named nothing is (it is held), and a
	// checkpoint says where reading started.
	var emitMu sync.Mutex
	initial, stdoutAt, stderrAt := st, st.Stdout, st.Stderr
	checkpoint := func() {
		emitMu.Lock()
		defer emitMu.Unlock()
		at := initial
		if s.out.Bound() {
			at = s.save(stdoutAt, stderrAt)
		}
		b, _ := json.Marshal(at)
		emit(runner.Event{Type: runner.EventCheckpoint, State: b})
	}
	lines := make(chan spooledLine, 64)
	stderrDone := make(chan struct{})
	go func() {
		defer close(lines)
		lr := proc.NewLineReaderAt(p.Stdout, c.cfg.MaxLine, st.Stdout)
		for {
			line, err := lr.Next()
			if err != nil {
				return
			}
			lines <- spooledLine{line, lr.Offset()}
		}
	}()
	go func() {
		defer close(stderrDone)
		lr := proc.NewLineReaderAt(p.Stderr, 64<<10, st.Stderr)
		for {
			line, err := lr.Next()
			if err != nil {
				return
			}
			emitMu.Lock()
			s.out.Send(runner.Event{Type: runner.EventLines, Stream: runner.StreamStderr, Lines: []string{line}, Notice: true})
			stderrAt = lr.Offset()
			emitMu.Unlock()
		}
	}()

	var (
		exit      runner.Exit
		stopStep  <-chan time.Time
		stopStage int
		ctxDone   = ctx.Done()
	)
	// stop: SIGINT (Claude ends the turn and writes its result line), then
	// SIGTERM, then SIGKILL, each after Grace.
	stop := func() {
		switch stopStage {
		case 0:
			p.SignalLeader(syscall.SIGINT)
		case 1:
			p.Signal(syscall.SIGTERM)
		default:
			p.Signal(syscall.SIGKILL)
		}
		stopStage++
		stopStep = time.After(c.cfg.Grace)
	}
	take := func(l spooledLine) {
		if err := s.line(l.text); err != nil && exit.ProtocolErr == nil {
			exit.ProtocolErr = err
			if stopStage == 0 {
				stop() // a broken stream cannot be trusted to say how the turn ended
			}
		}
		emitMu.Lock()
		stdoutAt = l.end
		emitMu.Unlock()
		if s.limit != nil && stopStage == 0 {
			stop() // a usage limit: the task parks, the session kept
		}
	}
	for running := true; running; {
		select {
		case <-ctxDone:
			ctxDone = nil
			if p.Spooled() && errors.Is(context.Cause(ctx), runner.ErrDetach) {
				// The agent stops; the attempt goes on. What was read and
				// not taken is read again by its next life.
				p.Detach()
				for range lines {
				}
				<-stderrDone
				if ask != nil {
					// Before the checkpoint: it says which questions
					// were answered, and none is after this.
					ask.detach()
				}
				detached = true
				checkpoint()
				return runner.Exit{Detached: true}
			}
			exit.Killed = true
			s.interrupted = true
			stop()
		case <-wanted:
			checkpoint()
		case <-stopStep:
			stop()
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			take(l)
		case <-p.Exited():
			running = false
		}
	}
	p.Sweep()
	cli.DrainAfterExit(lines, c.cfg.Grace, p.Stdout, take)
	p.Drain(c.cfg.Grace, stderrDone)
	if ask != nil {
		ask.close() // before the emitter: it may still say something
	}
	s.checkTranscript()
	if s.limit != nil {
		// Last: why the attempt ended, whatever Claude said as it was
		// stopped.
		s.out.Send(*s.limit)
	}
	s.out.Close()
	if p.Spooled() {
		checkpoint() // the output's end, read
	}
	exit.SetStatus(p)
	switch {
	case s.limit != nil:
		exit.Turn, exit.ProtocolErr = runner.TurnFailed, nil
	case s.turn == runner.TurnCompleted:
		exit.Turn, exit.ProtocolErr = runner.TurnCompleted, nil
	case s.turn == runner.TurnFailed:
		exit.Turn = runner.TurnFailed
	default:
		exit.Turn = runner.TurnFailed
		if exit.ProtocolErr == nil && !exit.Killed {
			exit.ProtocolErr = fmt.Errorf("claude ended (%s) without a result line", cli.ExitText(exit))
		}
	}
	return exit
}

// claudeTool is a tool call, remembered until its result.
type claudeTool struct {
	name  string
	input json.RawMessage
}

// claudeSession maps one attempt's stream-json lines to events.
type claudeSession struct {
	out        *cli.SessionEmitter
	configDir  string         // where Claude Code keeps its state
	resume     *runner.Resume // the session continued, if one is
	ask        *askServer     // the permission prompt tool's, if Claude Code asks
	started    bool           // system/init seen: the session is on
	tools      map[string]claudeTool
	streaming  bool // a progress event went out for the message being streamed
	synthetic  string
	retryDelay time.Duration
	// limitWait is Config.LimitWait; limit, once an api_retry after a 429
	// would wait longer, is the usage limit the attempt stops at.
	limitWait   time.Duration
	limit       *runner.Event
	interrupted bool
	turn        runner.TurnEnd
	// messages are the tokens of each model message of the attempt, by
	// id (Claude Code writes a message's usage on each of its lines), and
	// tokens what was last reported.
	messages map[string]state.Usage
	tokens   state.Usage
}

// claudeLine is the part of a stream-json line the executor reads.
type claudeLine struct {
	Type       string          `json:"type"`
	Subtype    string          `json:"subtype"`
	SessionID  string          `json:"session_id"`
	Cwd        string          `json:"cwd"`
	Model      string          `json:"model"`
	Event      json.RawMessage `json:"event"`
	Message    json.RawMessage `json:"message"`
	Error      json.RawMessage `json:"error"`
	Attempt    int             `json:"attempt"`
	MaxRetries int             `json:"max_retries"`
	RetryDelay float64         `json:"retry_delay_ms"`
	Status     json.RawMessage `json:"error_status"`

	IsError           bool            `json:"is_error"`
	Result            string          `json:"result"`
	APIErrorStatus    *int            `json:"api_error_status"`
	APIErrorType      string          `json:"api_error_type"`
	APIError          string          `json:"api_error"`
	TerminalReason    string          `json:"terminal_reason"`
	Usage             json.RawMessage `json:"usage"`
	TotalCostUSD      *float64        `json:"total_cost_usd"`
	NumTurns          int             `json:"num_turns"`
	Errors            []string        `json:"errors"`
	PermissionDenials []struct {
		ToolName  string          `json:"tool_name"`
		ToolUseID string          `json:"tool_use_id"`
		ToolInput json.RawMessage `json:"tool_input"`
	} `json:"permission_denials"`
}

type claudeMessage struct {
	ID      string       `json:"id"`
	Usage   *claudeUsage `json:"usage"`
	Model   string       `json:"model"`
	Content []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		IsError   bool            `json:"is_error"`
	} `json:"content"`
}

// sideEffectTools change something when they succeed.
var sideEffectTools = map[string]bool{"Bash": true, "Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true}

// line maps one stdout line. An error is a protocol error.
func (s *claudeSession) line(line string) error {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	var l claudeLine
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Type == "" {
		return fmt.Errorf("claude wrote a line that is not stream-json: %s", runner.Clip(line, 200))
	}
	ev := s.out.Send
	switch l.Type {
	case "system":
		switch l.Subtype {
		case "init":
			s.started = true
			s.out.BindAt(l.SessionID, transcriptPath(s.configDir, l.Cwd, l.SessionID))
			if s.resume != nil && l.SessionID != s.resume.SessionID {
				ev(runner.Event{Type: runner.EventLog, Level: runner.LevelWarn, Notice: true,
					Message: "claude continued session " + s.resume.SessionID + " as " + l.SessionID})
			}
			ev(runner.Event{Type: runner.EventPhase, Phase: state.PhaseTurnStarted, Notice: true})
		case "api_retry":
			s.retryDelay = time.Duration(l.RetryDelay * float64(time.Millisecond))
			why := strings.Trim(string(l.Error), `"`)
			if st := string(l.Status); st != "" && st != "null" {
				why = st + " " + why
			}
			ev(runner.Event{Type: runner.EventProgress, Step: "retry", Notice: true, Message: fmt.Sprintf("Claude retries %d/%d in %s: %s",
				l.Attempt, l.MaxRetries, s.retryDelay.Round(time.Millisecond), why)})
			if string(l.Status) == "429" && s.retryDelay > s.limitWait && s.limit == nil {
				s.limit = &runner.Event{Type: runner.EventError, Code: state.CodeUsageLimit, RetryAfterMS: s.retryDelay.Milliseconds(),
					Message: fmt.Sprintf("429 %s: Claude would wait %s for the limit to reset", why, s.retryDelay.Round(time.Second))}
			}
		}
	case "stream_event":
		var e struct {
			Type         string `json:"type"`
			ContentBlock struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"content_block"`
		}
		_ = json.Unmarshal(l.Event, &e)
		switch {
		case e.Type == "message_start":
			s.streaming = false
		case e.Type == "content_block_start" && e.ContentBlock.Type == "tool_use":
			ev(runner.Event{Type: runner.EventTool, Name: e.ContentBlock.Name, Stage: runner.StageInput})
		case e.Type == "content_block_delta" && !s.streaming:
			// The model answers: once per message, not per delta (the
			// assistant message is the record).
			s.streaming = true
			ev(runner.Event{Type: runner.EventProgress, Message: "the model is answering", Step: "streaming"})
		}
	case "assistant":
		var m claudeMessage
		_ = json.Unmarshal(l.Message, &m)
		if m.Model == "<synthetic>" {
			// An error dressed as a message: never output.
			var code string
			_ = json.Unmarshal(l.Error, &code)
			s.synthetic = code
			return nil
		}
		if m.Usage != nil && m.ID != "" {
			if s.messages == nil {
				s.messages = map[string]state.Usage{}
			}
			s.messages[m.ID] = m.Usage.usage()
			var u state.Usage
			for _, mu := range s.messages {
				u = u.Add(mu)
			}
			s.reportUsage(u, ev)
		}
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				if strings.TrimSpace(b.Text) != "" {
					ev(runner.Event{Type: runner.EventOutput, Text: b.Text})
				}
			case "tool_use":
				s.tools[b.ID] = claudeTool{name: b.Name, input: b.Input}
				ev(runner.Event{Type: runner.EventTool, Name: b.Name, Stage: runner.StageCall})
			}
		}
	case "user":
		var m claudeMessage
		_ = json.Unmarshal(l.Message, &m)
		for _, b := range m.Content {
			if b.Type != "tool_result" {
				continue
			}
			t := s.tools[b.ToolUseID]
			ev(runner.Event{Type: runner.EventTool, Name: t.name, Stage: runner.StageResult})
			if !b.IsError && sideEffectTools[t.name] {
				ev(runner.Event{Type: runner.EventSideEffect, Description: toolText(t)})
			}
		}
	case "result":
		s.result(l, ev)
	}
	return nil // other lines (rate limit info, …) say nothing the runner needs
}

// checkTranscript, once the CLI has ended, makes sure the session is bound
// where its transcript is: where Claude Code was expected to keep it, or,
// when it is not there, wherever under the config directory it is.
func (s *claudeSession) checkTranscript() {
	id, path := s.out.Session()
	if id == "" || !s.started {
		return
	}
	if _, err := os.Stat(path); err == nil {
		return
	}
	if found := findTranscript(s.configDir, id); found != "" {
		s.out.BindAt(id, found)
	}
}

// toolInputText says what a tool call asked: its command or file, else
// its input.
func toolInputText(name string, input json.RawMessage) string {
	if s := strings.TrimSpace(strings.TrimPrefix(toolText(claudeTool{name: name, input: input}), name)); s != "" {
		return s
	}
	return compactJSON(input)
}

// toolText says what a tool call did: the command, or the file.
func toolText(t claudeTool) string {
	var in struct {
		Command  string `json:"command"`
		FilePath string `json:"file_path"`
		Path     string `json:"notebook_path"`
	}
	_ = json.Unmarshal(t.input, &in)
	return strings.TrimSpace(t.name + " " + runner.Clip(in.Command+in.FilePath+in.Path, 500))
}

// result ends the attempt: success needs is_error false.
func (s *claudeSession) result(l claudeLine, ev func(runner.Event)) {
	var total claudeUsage
	if json.Unmarshal(l.Usage, &total) == nil && total != (claudeUsage{}) {
		// The run's own account: it has the last message's final output
		// count, which its assistant lines may not.
		s.reportUsage(total.usage(), ev)
	}
	for _, d := range l.PermissionDenials {
		if s.ask != nil && s.ask.answered(d.ToolUseID) {
			continue // the agent's answer: recorded when it was given
		}
		ev(runner.Event{Type: runner.EventDenied, Name: d.ToolName, Description: toolInputText(d.ToolName, d.ToolInput),
			Message: "not allowed by Claude Code's permissions"})
	}
	if !l.IsError && l.Subtype == "success" {
		s.turn = runner.TurnCompleted
		ev(runner.Event{Type: runner.EventPhase, Phase: state.PhaseCompleting})
		data, _ := json.Marshal(map[string]any{"usage": l.Usage, "total_cost_usd": l.TotalCostUSD, "num_turns": l.NumTurns,
			"permission_denials": len(l.PermissionDenials)})
		ev(runner.Event{Type: runner.EventResult, Summary: l.Result, Data: data})
		return
	}
	s.turn = runner.TurnFailed
	if s.resume != nil && !s.started {
		// Claude Code refused the session before starting it ("No
		// conversation found with session ID: …"): nothing was sent.
		why := strings.Join(l.Errors, "; ")
		if why == "" {
			why = l.Result
		}
		ev(runner.Event{Type: runner.EventError, Code: state.CodeSessionLost,
			Message: strings.TrimSpace("claude could not resume session " + s.resume.SessionID + ": " + why)})
		return
	}
	if s.interrupted && l.Subtype == "error_during_execution" {
		return // our own SIGINT: the runner knows why it stopped
	}
	msg := l.Result
	if msg == "" {
		msg = strings.Join(l.Errors, "; ")
	}
	if msg == "" {
		msg = "claude: " + strings.ReplaceAll(l.Subtype, "_", " ")
	}
	ev(runner.Event{Type: runner.EventError, Code: s.classify(l), Message: msg, RetryAfterMS: s.retryDelay.Milliseconds()})
}

// classify maps a failed result to the runner's error codes (see
// EXECUTORS.md): the terminal reason, the synthetic message's error, the
// API's error type, then the HTTP status, then the message.
func (s *claudeSession) classify(l claudeLine) state.ErrorCode {
	switch {
	case l.TerminalReason == "prompt_too_long":
		return state.CodeContextOverflow
	case s.synthetic == "billing_error":
		return state.CodeQuota
	case l.APIError == "connection_failed":
		return state.CodeNetwork
	}
	switch l.APIErrorType {
	case "rate_limit_error":
		return state.CodeRateLimit
	case "overloaded_error":
		return state.CodeOverloaded
	case "api_error":
		return state.CodeUnavailable
	case "authentication_error":
		return state.CodeAuth
	case "permission_error":
		return state.CodePermission
	case "invalid_request_error":
		return state.CodeInvalidRequest
	}
	if l.APIErrorStatus != nil {
		return cli.HTTPStatusCode(*l.APIErrorStatus)
	}
	msg := strings.ToLower(l.Result)
	switch {
	case strings.Contains(msg, "timed out"):
		return state.CodeTimeout
	case strings.Contains(msg, "unable to connect"), strings.Contains(msg, "connection"), strings.Contains(msg, "econnreset"):
		return state.CodeNetwork
	}
	return ""
}

// VersionCommand implements cli.Versioned.
func (c *Claude) VersionCommand() (bin string, env []string) {
	return c.cfg.Bin, c.env(runner.AttemptSpec{})
}

// Describe says what the executor runs, for the agent's start banner.
func (c *Claude) Describe() string { return "claude -p (" + proc.Located(c.cfg.Bin) + ")" }

// claudeUsage is the usage of a model message, or of the run in its result
// line. The input it read is its input tokens and those written to and
// read from the prompt cache.
type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

func (c claudeUsage) usage() state.Usage {
	in := c.InputTokens + c.CacheCreationInputTokens + c.CacheReadInputTokens
	return state.Usage{InputTokens: in, OutputTokens: c.OutputTokens, TotalTokens: in + c.OutputTokens}
}

// reportUsage reports u, the tokens the attempt used so far, when it says
// more than was reported.
func (s *claudeSession) reportUsage(u state.Usage, ev func(runner.Event)) {
	if u.TotalTokens <= s.tokens.TotalTokens {
		return
	}
	s.tokens = u
	ev(runner.UsageEvent(u))
}
