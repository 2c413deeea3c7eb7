package claude

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// Claude Code in print mode asks nobody: what it may not do it denies.
// With --permission-prompt-tool it asks a tool instead, an MCP tool, for
// each call its permissions would have asked a person about. The agent
// serves that tool from its own binary (ServeMCP, `agent
// claude-approval-mcp`), which Claude Code starts as an MCP server over
// stdio, inside the attempt's confinement. The server reaches the agent
// through a Unix socket in the attempt's serve directory
// (runner.AttemptSpec.ServeDir), and proves it is the attempt's with a
// token kept beside it (0600). Under Landlock the attempt can only read
// that directory, and no other task can read it at all (a Unix socket's
// path is not something Landlock guards, the token is).
//
// Read only, because the socket and the MCP config there are what stands
// between the task and a person's answers: a task that could write the
// directory (its TMPDIR, once) could put a socket of its own in the
// agent's place and allow every call its Claude Code asks about, or
// point the config of the next attempt's Claude Code at a prompt tool of
// its own.
//
// The task's own processes can read the token, and so talk to the
// socket. The worst they can do is what the protocol allows: ask a
// question (one at a time, bounded in size, each one a person sees as
// the task's) and read its answer. Nothing said on the socket is taken
// for a person's answer: answers come from the control plane, and the
// decision is only ever the MCP server's to relay to Claude Code, inside
// the same confinement the task already has.

// An attempt that outlives the agent (runner.Reattacher) keeps its ask
// directory, token and MCP server: the agent leaves, with the attempt's
// spool (out of every task's reach), where the directory is and the
// token, and the agent that takes the attempt up serves the socket again
// there with the same token. The MCP server, meanwhile, holds each
// question it could not get an answer to and asks it again until an
// agent answers (see ServeMCP): a question is never declined because the
// agent went away, and one asked again has the same id (its
// tool_use_id), so that the runner shows it once, with its first
// deadline.

// Names of what the attempt's ask directory holds, of what its spool
// keeps of it, and of the MCP server and tool as Claude Code knows them.
const (
	askSocket    = "ask.sock"
	askToken     = "ask.token"
	askSaved     = "claude-ask.json"
	mcpConfig    = "mcp.json"
	mcpServer    = "edgeagent"
	mcpTool      = "approve"
	PromptToolID = "mcp__" + mcpServer + "__" + mcpTool // --permission-prompt-tool
)

// maxAskLine bounds a question on the socket: a tool's whole input (a
// Write's content) comes with it.
const maxAskLine = 4 << 20

// askReadTimeout bounds the wait for a question once connected: a client
// that says nothing does not hold the next one up for long.
const askReadTimeout = 10 * time.Second

// askQuestion is what the MCP server sends the agent: the permission
// prompt tool's arguments, with the attempt's token.
type askQuestion struct {
	Token     string          `json:"token"`
	ToolName  string          `json:"tool_name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
}

// askAnswer is the agent's answer: allow, or not and why.
type askAnswer struct {
	Allow   bool   `json:"allow"`
	Message string `json:"message,omitempty"`
}

// askServer is the agent's side of the socket for one attempt.
type askServer struct {
	dir      string
	token    string
	ln       net.Listener
	policy   runner.ApprovalPolicy
	ask      func(context.Context, state.ApprovalRequest) runner.Approval
	timeout  time.Duration // the agent's approval timeout; 0: none
	workDir  string
	out      func(runner.Event)
	cleanup  func()
	done     sync.WaitGroup
	mu       sync.Mutex
	asked    map[string]bool // tool_use_ids answered here
	ids      map[string]bool // question ids used
	n        int
	closeCtx context.CancelFunc
	ctx      context.Context
	closing  sync.Once
	// detached: the agent leaves the attempt to its next life; a question
	// waiting is left unanswered, for the MCP server to ask again.
	detached atomic.Bool
	spooled  bool // the attempt can outlive the agent
}

// savedAsk is what an attempt's spool keeps of its ask server: where its
// directory is, the token, and whether the directory is the server's own
// to remove (not the attempt's serve directory, which the runner removes).
type savedAsk struct {
	Dir   string `json:"dir"`
	Token string `json:"token"`
	Own   bool   `json:"own,omitempty"`
}

// newAskServer makes the attempt's ask directory (its serve directory
// when confined, else a private one) with the socket, the token and the
// MCP config Claude Code is given, each the task user's when there is
// one. It serves questions from start until close.
func newAskServer(ctx context.Context, spec runner.AttemptSpec, policy runner.ApprovalPolicy, prompt []string, promptEnv []string, workDir string) (*askServer, error) {
	s := &askServer{policy: policy, ask: spec.Ask, timeout: spec.ApprovalTimeout, workDir: workDir, asked: map[string]bool{}, ids: map[string]bool{}, cleanup: func() {}}
	s.dir = spec.ServeDir
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "agent-ask-")
		if err != nil {
			return nil, fmt.Errorf("claude approvals: %w", err)
		}
		s.dir, s.cleanup = dir, func() { os.RemoveAll(dir) }
	}
	fail := func(err error) (*askServer, error) {
		s.cleanup()
		return nil, fmt.Errorf("claude approvals: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return fail(err)
	}
	s.token = hex.EncodeToString(b)
	if err := os.WriteFile(filepath.Join(s.dir, askToken), []byte(s.token), 0o600); err != nil {
		return fail(err)
	}
	if spec.Spool != nil {
		// Kept with the spool, for the agent that takes the attempt up:
		// not in the ask directory, which the task may write.
		saved, _ := json.Marshal(savedAsk{Dir: s.dir, Token: s.token, Own: spec.ServeDir == ""})
		if err := writePrivate(filepath.Join(spec.Spool.Dir, askSaved), saved); err != nil {
			return fail(err)
		}
	}
	ln, err := listenIn(s.dir, askSocket)
	if err != nil {
		return fail(err)
	}
	s.ln = ln
	cfg, err := mcpConfigJSON(prompt, promptEnv, s.dir, spec.ApprovalTimeout)
	if err == nil {
		err = os.WriteFile(filepath.Join(s.dir, mcpConfig), cfg, 0o600)
	}
	if err == nil {
		err = s.giveToTask(spec)
	}
	if err != nil {
		ln.Close()
		return fail(err)
	}
	s.ctx, s.closeCtx = context.WithCancel(ctx)
	s.spooled = spec.Spool != nil
	return s, nil
}

// giveToTask gives what the task's Claude Code and its prompt tool open
// to the task user, when the attempt runs as one: the directory stays the
// agent's.
func (s *askServer) giveToTask(spec runner.AttemptSpec) error {
	return spec.GiveToTask(filepath.Join(s.dir, askToken), filepath.Join(s.dir, askSocket), filepath.Join(s.dir, mcpConfig))
}

// reopenAskServer serves an attempt taken up again (spec.Reattach) where
// its first life did, with the same token, as its spool says: the MCP
// server Claude Code started then asks here what it could not ask then.
func reopenAskServer(ctx context.Context, spec runner.AttemptSpec, policy runner.ApprovalPolicy, workDir string) (*askServer, error) {
	if spec.Spool == nil {
		return nil, errors.New("claude approvals: an attempt taken up again without its spool")
	}
	raw, err := os.ReadFile(filepath.Join(spec.Spool.Dir, askSaved))
	if err != nil {
		return nil, fmt.Errorf("claude approvals: where the attempt asks: %w", err)
	}
	var saved savedAsk
	if err := json.Unmarshal(raw, &saved); err != nil || saved.Dir == "" || len(saved.Token) != 64 {
		return nil, fmt.Errorf("claude approvals: %s in the attempt's spool cannot be read", askSaved)
	}
	s := &askServer{dir: saved.Dir, token: saved.Token, policy: policy, ask: spec.Ask, timeout: spec.ApprovalTimeout, workDir: workDir,
		asked: map[string]bool{}, ids: map[string]bool{}, cleanup: func() {}}
	if saved.Own {
		s.cleanup = func() { os.RemoveAll(saved.Dir) }
	}
	// A socket left by a life that was killed is in the way; so is
	// whatever the task put there meanwhile (Remove does not follow a
	// link).
	if err := os.Remove(filepath.Join(s.dir, askSocket)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("claude approvals: %w", err)
	}
	if s.ln, err = listenIn(s.dir, askSocket); err != nil {
		return nil, fmt.Errorf("claude approvals: %w", err)
	}
	if err := s.giveToTask(spec); err != nil {
		s.ln.Close()
		return nil, fmt.Errorf("claude approvals: %w", err)
	}
	s.ctx, s.closeCtx = context.WithCancel(ctx)
	s.spooled = spec.Spool != nil
	return s, nil
}

// writePrivate writes a file only its owner may read, replacing none.
func writePrivate(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// start serves questions, saying what it does with out. A connection made
// before it waits.
func (s *askServer) start(out func(runner.Event)) {
	s.out = out
	s.done.Add(1)
	go s.serve()
}

// listenIn listens on a Unix socket named name in dir. A socket's path is
// short (108 bytes on Linux): a longer one is reached through the
// directory's descriptor (/proc/self/fd/N/name).
func listenIn(dir, name string) (net.Listener, error) {
	path := filepath.Join(dir, name)
	if len(path) < 100 || runtime.GOOS != "linux" {
		return net.Listen("unix", path)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return net.Listen("unix", "/proc/self/fd/"+strconv.Itoa(int(d.Fd()))+"/"+name)
}

// mcpConfigJSON is the --mcp-config that starts the prompt tool's server:
// prompt and --dir DIR, with promptEnv. Claude Code bounds a tool call by
// the server's timeout: it is longer than the agent's approval timeout,
// so that the agent's decline answers first (the longest Claude Code
// takes, about 24.8 days, when the agent waits for ever).
func mcpConfigJSON(prompt, promptEnv []string, dir string, approvalTimeout time.Duration) ([]byte, error) {
	if len(prompt) == 0 {
		return nil, errors.New("no command serves the permission prompt tool")
	}
	env := map[string]string{}
	for _, kv := range promptEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	timeout := int64(1<<31 - 1)
	if approvalTimeout > 0 {
		timeout = min(timeout, (approvalTimeout + 5*time.Minute).Milliseconds())
	}
	args := append(append([]string(nil), prompt[1:]...), "--dir", dir)
	return json.Marshal(map[string]any{"mcpServers": map[string]any{mcpServer: map[string]any{
		"type": "stdio", "command": prompt[0], "args": args, "env": env, "timeout": timeout}}})
}

// configPath is the MCP config to give Claude Code.
func (s *askServer) configPath() string { return filepath.Join(s.dir, mcpConfig) }

// close stops serving: a question still waiting is declined, and the
// directory made for an attempt that is not confined is removed.
func (s *askServer) close() {
	s.closing.Do(func() {
		s.closeCtx()
		s.ln.Close()
		s.done.Wait()
		os.Remove(filepath.Join(s.dir, askSocket))
		os.Remove(filepath.Join(s.dir, askToken))
		s.cleanup()
	})
}

// detach stops serving for an attempt that goes on without the agent: a
// question still waiting is left unanswered (the MCP server asks it
// again of the agent's next life), and the directory and token stay.
func (s *askServer) detach() {
	s.closing.Do(func() {
		s.detached.Store(true)
		s.closeCtx()
		s.ln.Close()
		s.done.Wait()
	})
}

// answeredIDs are the tool calls answered here, for a checkpoint.
func (s *askServer) answeredIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.asked))
	for id := range s.asked {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// restoreAnswered takes up the tool calls a checkpoint says were
// answered here.
func (s *askServer) restoreAnswered(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.asked[id] = true
	}
}

// answered reports whether the tool call was answered here (its decline,
// if it was one, is recorded already).
func (s *askServer) answered(toolUseID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[toolUseID]
}

// serve answers one connection at a time: one question at a time.
func (s *askServer) serve() {
	defer s.done.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.handle(c)
	}
}

func (s *askServer) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(askReadTimeout))
	r := bufio.NewReaderSize(c, 64<<10)
	line, err := readLine(r, maxAskLine)
	if err != nil {
		return
	}
	var q askQuestion
	if json.Unmarshal(line, &q) != nil || subtle.ConstantTimeCompare([]byte(q.Token), []byte(s.token)) != 1 || q.ToolName == "" {
		s.out(runner.Event{Type: runner.EventLog, Level: runner.LevelWarn, Message: "claude approvals: refused a question without the attempt's token", Notice: true})
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	ans := s.decide(q)
	if s.detached.Load() || s.spooled && errors.Is(context.Cause(s.ctx), runner.ErrDetach) {
		// Left unanswered: what ended the wait is the agent going, not a
		// person or the policy.
		return
	}
	b, _ := json.Marshal(ans)
	_ = c.SetWriteDeadline(time.Now().Add(askReadTimeout))
	_, _ = c.Write(append(b, '\n'))
}

// readLine reads one line of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, part...)
		if len(line) > max {
			return nil, errors.New("line too long")
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// decide answers a question by the approval policy, asking a person
// when it says so.
func (s *askServer) decide(q askQuestion) askAnswer {
	req := s.request(q)
	s.mu.Lock()
	if q.ToolUseID != "" {
		s.asked[q.ToolUseID] = true
	}
	s.mu.Unlock()
	var answer runner.Approval
	why := "declined by the approval policy"
	switch s.policy {
	case runner.ApprovalAcceptAll:
		answer = runner.ApprovalAccept
	case runner.ApprovalAsk:
		if s.ask == nil {
			answer, why = runner.ApprovalDecline, "nobody can be asked"
			break
		}
		// The runner records a person's answer, and a question that
		// expired; what the model is told says which.
		asked := time.Now()
		if s.ask(s.ctx, req) == runner.ApprovalAccept {
			return askAnswer{Allow: true}
		}
		if s.timeout > 0 && time.Since(asked) >= s.timeout {
			return askAnswer{Message: "Nobody answered in time; the agent declined this " + q.ToolName + " call. Do not try it again; go on without it, or stop and say what you needed."}
		}
		return askAnswer{Message: "A person declined this " + q.ToolName + " call. Do not try it again; go on without it, or stop and say what you needed."}
	default:
		answer = runner.ApprovalDecline
	}
	s.out(runner.Event{Type: runner.EventLog, Level: runner.LevelInfo, Message: fmt.Sprintf("approval %s by policy %s: %s", answer, s.policy, req.What())})
	if answer == runner.ApprovalAccept {
		return askAnswer{Allow: true}
	}
	s.out(runner.Event{Type: runner.EventDenied, Name: req.Tool, Description: req.What(), Message: why})
	return askAnswer{Message: "The agent's approval policy declined this " + q.ToolName + " call."}
}

// idPattern is a tool_use_id fit to name a question.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)

// request is the question a tool call asks a person: a Bash command and
// where it runs; the file and the change of a Write, Edit or MultiEdit;
// any other tool and its input.
func (s *askServer) request(q askQuestion) state.ApprovalRequest {
	s.mu.Lock()
	s.n++
	id := q.ToolUseID
	if !idPattern.MatchString(id) || s.ids[id] {
		id = fmt.Sprintf("claude-ask-%d", s.n)
	}
	s.ids[id] = true
	s.mu.Unlock()
	var in struct {
		Command      string `json:"command"`
		Description  string `json:"description"`
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
		Content      string `json:"content"`
		OldString    string `json:"old_string"`
		NewString    string `json:"new_string"`
		ReplaceAll   bool   `json:"replace_all"`
		Edits        []struct {
			OldString string `json:"old_string"`
			NewString string `json:"new_string"`
		} `json:"edits"`
	}
	_ = json.Unmarshal(q.Input, &in)
	req := state.ApprovalRequest{ID: id, Tool: q.ToolName, Kind: state.ApprovalTool, Input: compactJSON(q.Input)}
	switch {
	case q.ToolName == "Bash" && in.Command != "":
		req.Kind, req.Command, req.Cwd, req.Reason, req.Input = state.ApprovalCommand, in.Command, s.workDir, in.Description, ""
	case q.ToolName == "Write" && in.FilePath != "":
		req.Kind, req.Paths, req.Input = state.ApprovalFileChange, []string{in.FilePath}, ""
		lines := diffLines(in.Content)
		req.Diff = fmt.Sprintf("--- %s\n+++ %s\n@@ -0,0 +1,%d @@ the whole file, as written\n", in.FilePath, in.FilePath, len(lines)) + prefixed("+", lines)
	case (q.ToolName == "Edit" || q.ToolName == "MultiEdit") && in.FilePath != "":
		req.Kind, req.Paths, req.Input = state.ApprovalFileChange, []string{in.FilePath}, ""
		edits := in.Edits
		if q.ToolName == "Edit" {
			edits = append(edits[:0], struct {
				OldString string `json:"old_string"`
				NewString string `json:"new_string"`
			}{in.OldString, in.NewString})
		}
		var b strings.Builder
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", in.FilePath, in.FilePath)
		for _, e := range edits {
			b.WriteString("@@ @@\n" + prefixed("-", diffLines(e.OldString)) + prefixed("+", diffLines(e.NewString)))
		}
		req.Diff = b.String()
		if in.ReplaceAll {
			req.Reason = "every occurrence is replaced"
		}
	case q.ToolName == "NotebookEdit" && in.NotebookPath != "":
		req.Kind, req.Paths = state.ApprovalFileChange, []string{in.NotebookPath}
	}
	return req
}

// diffLines splits text into lines for a diff, without a last empty one.
func diffLines(text string) []string {
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

func prefixed(p string, lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(p + l + "\n")
	}
	return b.String()
}

// compactJSON is raw as one line of JSON, or as it came when it is not
// JSON.
func compactJSON(raw json.RawMessage) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	var v any
	if json.Unmarshal(raw, &v) != nil || enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
