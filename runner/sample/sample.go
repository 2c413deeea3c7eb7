// Package sample is the built-in sample executor: a small program that
// behaves like an AI coding CLI, for the demo and the tests. It reads the
// task as one JSON line on stdin, writes events as JSON lines on stdout,
// and follows directives in the prompt, one per line:
//
//	@progress N        N progress events with rising percent
//	@sleep DURATION    wait (Go duration syntax)
//	@wait-file PATH    wait until PATH exists (a test's way to pace a task)
//	@output TEXT       visible output
//	@tool NAME         a tool call: input, call, result
//	@side-effect TEXT  a side effect
//	@fail CODE [TIMES] fail with CODE on the first TIMES attempts (default 1)
//	@busy DURATION     spin the CPU for DURATION, saying nothing (a long
//	                   silent build or test run)
//	@sigstop           stop itself (SIGSTOP): a hung attempt whose
//	                   process is there but does nothing
//	@exit N            exit with code N and no result
//	@hang              never answer
//	@close-stdout      close stdout and go on running for a while
//	@flood N           write N log lines as fast as it can
//	@ignore-sigterm    ignore SIGTERM
//	@spawn-child       start a grandchild that sleeps
//	@no-session        keep no session, as an executor that cannot
//	                   continue one (wherever the line stands)
//	@sh COMMAND        run COMMAND with sh -c in the work directory, as a
//	                   tool call (its output to stderr; failing ends the
//	                   attempt with exit status 1)
//	@subtask PROMPT    submit a subtask of this task with `agent subtask
//	                   submit` ($AGENT_BIN, else agent on PATH); \n in
//	                   PROMPT is a new line, so it may carry directives
//	@wait-subtasks     wait for the subtasks submitted (`agent subtask
//	                   wait`): their results and timelines are visible
//	                   output and the result's data; one that failed
//	                   fails the attempt
//	@limit DURATION    stop at a usage limit that resets after DURATION:
//	                   an error of code usage_limit with its resets_at
//	                   (a continue goes on past it)
//	@usage N           N more tokens used (four fifths input, one fifth
//	                   output): a usage event with the attempt's total
//	@ask COMMAND       ask before running COMMAND (an approval line,
//	                   {"type":"approval","kind":"command",…}), wait for
//	                   the reply on stdin, and run it with sh -c in the
//	                   work directory, as @sh does, if it was accepted;
//	                   a decline (or no reply: stdin ended) is visible
//	                   output, and the session goes on
//
// Other prompt lines are ignored. Without directives it walks the phases
// turn_started, awaiting_reply and completing, emits a few progress events
// and some output, and returns a result.
//
// Given AGENT_SESSION_DIR, it keeps a session there, as a CLI keeps its
// conversation: a file saying how many directives are done, named on
// stdout ({"type":"session","path":…}). A continue (the task's resume
// field) takes that session up: it says so, skips the directives already
// done, and goes on; a session file that is gone or unreadable ends the
// attempt with an error of code session_lost.
package sample

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Task is what the sample reads from stdin.
type Task struct {
	ID      string `json:"id"`
	Prompt  string `json:"prompt"`
	Attempt int    `json:"attempt"`
	Model   string `json:"model"`
	Resume  *struct {
		SessionID string `json:"session_id"`
		Path      string `json:"path"`
		Prompt    string `json:"prompt"`
	} `json:"resume"`
}

// saved is the session the sample keeps: the directives done, and the
// prompts it was sent (the task's, then each continue's follow-up).
type saved struct {
	Done    int      `json:"done"`
	Prompts []string `json:"prompts"`
	// Subtasks are the ids of the subtasks @subtask submitted.
	Subtasks []string `json:"subtasks,omitempty"`
}

// messages give each failure code the message a real provider would send.
var messages = map[string]string{
	"rate_limit":       "429 Too Many Requests",
	"overloaded":       "529 Overloaded",
	"unavailable":      "503 Service Unavailable",
	"network":          "read tcp: connection reset by peer",
	"timeout":          "upstream request timeout",
	"quota":            "You exceeded your current quota, please check your plan and billing details",
	"auth":             "401 Unauthorized: invalid API key",
	"invalid_request":  "400 Bad Request",
	"context_overflow": "context length exceeded: 210000 tokens > 200000",
	"permission":       "403 Forbidden",
}

// Main runs the sample executor and returns its exit code.
func Main(stdin io.Reader, stdout, stderr io.Writer) int {
	var task Task
	in := bufio.NewReader(stdin)
	line, err := in.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		fmt.Fprintln(stderr, "sample-executor: no task on stdin:", err)
		return 2
	}
	if err := json.Unmarshal(line, &task); err != nil {
		fmt.Fprintln(stderr, "sample-executor: task is not JSON:", err)
		return 2
	}
	if n, err := strconv.Atoi(os.Getenv("AGENT_ATTEMPT")); err == nil {
		task.Attempt = n // @fail counts attempts by AGENT_ATTEMPT
	}
	out := bufio.NewWriter(stdout)
	s := &session{task: task, out: out, stderr: stderr, in: in}
	code := s.run()
	out.Flush()
	return code
}

type session struct {
	task   Task
	out    *bufio.Writer
	stderr io.Writer
	in     *bufio.Reader // after the task: the replies to @ask
	asked  int
	path   string // the session file, if one is kept
	saved  saved
	report string // what @wait-subtasks reported
	tokens int64  // used by this attempt (@usage)
}

// open takes up the session a continue names, or starts one in
// AGENT_SESSION_DIR; false when a continue's session cannot be read.
func (s *session) open() bool {
	if r := s.task.Resume; r != nil {
		b, err := os.ReadFile(r.Path)
		if err == nil {
			err = json.Unmarshal(b, &s.saved)
		}
		if err != nil {
			s.emit(map[string]any{"type": "error", "code": "session_lost", "message": fmt.Sprintf("session %s cannot be continued: %v", r.SessionID, err)})
			return false
		}
		s.path = r.Path
		s.saved.Prompts = append(s.saved.Prompts, r.Prompt)
	} else if dir := os.Getenv("AGENT_SESSION_DIR"); dir != "" && !strings.Contains("\n"+s.task.Prompt+"\n", "\n@no-session\n") {
		s.path = filepath.Join(dir, "sample-session.json")
		s.saved.Prompts = []string{s.task.Prompt}
	}
	if s.path != "" {
		s.save()
		s.emit(map[string]any{"type": "session", "path": s.path})
	}
	return true
}

// save writes the session down, as a CLI writes its transcript.
func (s *session) save() {
	if s.path == "" {
		return
	}
	// Whole or not at all, as a CLI's transcript: an attempt stopped
	// mid-write must not leave a session that cannot be read.
	b, _ := json.Marshal(s.saved)
	tmp := s.path + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		fmt.Fprintln(s.stderr, "sample-executor: session not saved:", err)
	}
}

func (s *session) emit(ev map[string]any) {
	b, _ := json.Marshal(ev)
	s.out.Write(append(b, '\n'))
	s.out.Flush()
}

func (s *session) run() int {
	fmt.Fprintf(s.stderr, "sample-executor: task %s attempt %d model %q\n", s.task.ID, s.task.Attempt, s.task.Model)
	if !s.open() {
		return 1
	}
	s.emit(map[string]any{"type": "phase", "phase": "turn_started"})
	if s.task.Resume != nil {
		s.emit(map[string]any{"type": "output", "text": fmt.Sprintf("Continuing session %s: %d steps were done before the cut; not doing them again.", s.task.Resume.SessionID, s.saved.Done)})
	}
	directives := 0
	for _, raw := range strings.Split(s.task.Prompt, "\n") {
		fields := strings.Fields(raw)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], "@") {
			continue
		}
		directives++
		if directives <= s.saved.Done {
			continue // done before a continue took the session up
		}
		arg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(raw), fields[0]))
		if recordedFirst[fields[0]] {
			// As a CLI writes a tool call to its transcript before it
			// runs it: cut from here on, the session knows it began.
			s.saved.Done = directives
			s.save()
		}
		if code, done := s.directive(fields[0], fields[1:], arg); done {
			return code
		}
		s.saved.Done = directives
		s.save()
	}
	if directives == 0 {
		s.progress(3)
		s.emit(map[string]any{"type": "output", "text": "I looked at the code and made the change."})
		s.emit(map[string]any{"type": "phase", "phase": "awaiting_reply"})
	}
	s.emit(map[string]any{"type": "phase", "phase": "completing"})
	data := map[string]any{"attempt": s.task.Attempt}
	if s.report != "" {
		data["subtasks"] = s.report
	}
	s.emit(map[string]any{"type": "result", "summary": "done: " + firstLine(s.task.Prompt), "data": data})
	return 0
}

// recordedFirst are the directives the session records as done before
// they act: what they do is work a continue must not do again.
var recordedFirst = map[string]bool{"@limit": true, "@usage": true, "@output": true, "@tool": true, "@side-effect": true, "@sh": true, "@subtask": true, "@ask": true}

// directive runs one directive; done says the session ends with code.
func (s *session) directive(name string, args []string, arg string) (code int, done bool) {
	n := func(def int) int {
		if len(args) > 0 {
			if v, err := strconv.Atoi(args[0]); err == nil {
				return v
			}
		}
		return def
	}
	switch name {
	case "@progress":
		s.progress(n(3))
	case "@sleep":
		d, err := time.ParseDuration(arg)
		if err != nil {
			fmt.Fprintf(s.stderr, "sample-executor: @sleep %q: %v\n", arg, err)
			return 2, true
		}
		time.Sleep(d)
	case "@wait-file":
		s.out.Flush() // what came before is out while it waits
		for {
			if _, err := os.Stat(arg); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	case "@output":
		s.emit(map[string]any{"type": "output", "text": arg})
	case "@tool":
		for _, stage := range []string{"input", "call", "result"} {
			s.emit(map[string]any{"type": "tool", "name": arg, "stage": stage})
		}
	case "@side-effect":
		s.emit(map[string]any{"type": "side_effect", "description": arg})
	case "@fail":
		if len(args) == 0 {
			fmt.Fprintln(s.stderr, "sample-executor: @fail needs a code")
			return 2, true
		}
		times := 1
		if len(args) > 1 {
			times, _ = strconv.Atoi(args[1])
		}
		if s.task.Attempt <= times {
			msg := messages[args[0]]
			if msg == "" {
				msg = args[0]
			}
			ev := map[string]any{"type": "error", "code": args[0], "message": msg}
			if args[0] == "rate_limit" {
				ev["retry_after_ms"] = 300
			}
			s.emit(ev)
			return 1, true
		}
	case "@limit":
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			fmt.Fprintf(s.stderr, "sample-executor: @limit %q: want a duration, as 5s\n", arg)
			return 2, true
		}
		resets := time.Now().Add(d).UTC()
		s.emit(map[string]any{"type": "error", "code": "usage_limit", "resets_at": resets.Format(time.RFC3339Nano),
			"message": "You've hit your usage limit. It resets at " + resets.Format(time.RFC3339) + "."})
		return 1, true
	case "@busy":
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			fmt.Fprintf(s.stderr, "sample-executor: @busy %q: want a duration, as 5s\n", arg)
			return 2, true
		}
		s.out.Flush()
		x := uint64(1)
		for end := time.Now().Add(d); time.Now().Before(end); {
			for range 1_000_000 {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		runtime.KeepAlive(x) // the loop is the work: not optimized away
	case "@sigstop":
		s.out.Flush()
		if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
			fmt.Fprintln(s.stderr, "sample-executor: @sigstop:", err)
			return 2, true
		}
	case "@exit":
		return n(1), true
	case "@hang":
		// Never answer. A sleep rather than an empty select: with no other
		// goroutine the runtime would call that a deadlock and exit.
		for {
			time.Sleep(time.Hour)
		}
	case "@close-stdout":
		s.out.Flush()
		os.Stdout.Close()
		time.Sleep(time.Minute)
		return 0, true
	case "@flood":
		for i := range n(1000) {
			fmt.Fprintf(s.out, "flood line %d of the sample executor\n", i)
		}
		s.out.Flush()
	case "@ignore-sigterm":
		signal.Ignore(syscall.SIGTERM)
	case "@sh":
		s.emit(map[string]any{"type": "tool", "name": "sh", "stage": "call"})
		cmd := exec.Command("sh", "-c", arg)
		cmd.Stdout, cmd.Stderr = s.stderr, s.stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(s.stderr, "sample-executor: @sh %s: %v\n", arg, err)
			return 1, true
		}
		s.emit(map[string]any{"type": "tool", "name": "sh", "stage": "result"})
	case "@ask":
		if s.ask(arg) {
			return s.directive("@sh", args, arg)
		}
	case "@subtask":
		s.emit(map[string]any{"type": "tool", "name": "agent subtask submit", "stage": "call"})
		out, err := s.agentCmd("submit", strings.ReplaceAll(arg, `\n`, "\n"))
		if err != nil {
			s.emit(map[string]any{"type": "error", "code": "subtask_failed", "message": err.Error()})
			return 1, true
		}
		id := strings.TrimSpace(out)
		s.saved.Subtasks = append(s.saved.Subtasks, id)
		s.emit(map[string]any{"type": "tool", "name": "agent subtask submit", "stage": "result"})
		s.emit(map[string]any{"type": "output", "text": "submitted subtask " + id})
	case "@wait-subtasks":
		if len(s.saved.Subtasks) == 0 {
			fmt.Fprintln(s.stderr, "sample-executor: @wait-subtasks: no subtask was submitted")
			return 2, true
		}
		s.out.Flush() // what came before is out while it waits
		out, err := s.agentCmd(append([]string{"wait"}, s.saved.Subtasks...)...)
		s.report = strings.TrimRight(out, "\n")
		if s.report != "" {
			s.emit(map[string]any{"type": "output", "text": s.report})
		}
		if err != nil {
			s.emit(map[string]any{"type": "error", "code": "subtask_failed", "message": err.Error()})
			return 1, true
		}
	case "@usage":
		used, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || used < 0 {
			fmt.Fprintf(s.stderr, "sample-executor: @usage %q: want a count of tokens\n", arg)
			return 2, true
		}
		s.tokens += used
		out := s.tokens / 5
		s.emit(map[string]any{"type": "usage", "input_tokens": s.tokens - out, "output_tokens": out, "total_tokens": s.tokens})
	case "@no-session": // read by open
	case "@spawn-child":
		child := exec.Command("sleep", "600")
		if err := child.Start(); err != nil {
			fmt.Fprintln(s.stderr, "sample-executor: spawn child:", err)
			return 2, true
		}
		fmt.Fprintf(s.stderr, "grandchild pid %d\n", child.Process.Pid)
	default:
		fmt.Fprintf(s.stderr, "sample-executor: unknown directive %s\n", name)
	}
	return 0, false
}

// ask asks before running command and reports whether it was accepted:
// the reply to its question on stdin.
func (s *session) ask(command string) bool {
	s.asked++
	id := fmt.Sprintf("ask-%d-%d", s.task.Attempt, s.asked)
	wd, _ := os.Getwd()
	s.emit(map[string]any{"type": "approval", "id": id, "kind": "command", "tool": "sh", "command": command, "cwd": wd,
		"reason": "the sample executor asks before it runs a command"})
	for {
		line, err := s.in.ReadBytes('\n')
		var r struct {
			Type     string `json:"type"`
			ID       string `json:"id"`
			Decision string `json:"decision"`
		}
		if json.Unmarshal(line, &r) == nil && r.Type == "reply" && r.ID == id {
			if r.Decision == "accept" {
				return true
			}
			s.emit(map[string]any{"type": "output", "text": "declined: " + command})
			return false
		}
		if err != nil {
			s.emit(map[string]any{"type": "output", "text": "no reply, not run: " + command})
			return false
		}
	}
}

// agentCmd runs `agent subtask ARGS…` with the binary the agent names
// (AGENT_BIN), else agent on PATH, and returns its stdout; its stderr goes
// to the sample's. A failure says the command's own last line.
func (s *session) agentCmd(args ...string) (string, error) {
	bin := os.Getenv("AGENT_BIN")
	if bin == "" {
		bin = "agent"
	}
	var out, errb strings.Builder
	cmd := exec.Command(bin, append([]string{"subtask"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(s.stderr, &errb)
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), fmt.Errorf("agent subtask %s: %s", args[0], msg)
	}
	return out.String(), nil
}

func (s *session) progress(n int) {
	for i := 1; i <= n; i++ {
		s.emit(map[string]any{"type": "progress", "message": fmt.Sprintf("step %d of %d", i, n), "percent": i * 100 / n, "step": fmt.Sprint(i)})
		time.Sleep(20 * time.Millisecond)
	}
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "@") {
			return l
		}
	}
	return "the task"
}
