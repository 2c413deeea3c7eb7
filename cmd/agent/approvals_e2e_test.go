package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// inboxJSON is agent tasks inbox --json.
func inboxJSON(t *testing.T, c *cp) []taskview.InboxEntry {
	t.Helper()
	r := runAgent(t, "tasks", "inbox", "--json", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if r.code != 0 {
		t.Fatalf("tasks inbox --json: %+v", r)
	}
	var entries []taskview.InboxEntry
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil {
		t.Fatalf("tasks inbox --json: %v\n%s", err, r.stdout)
	}
	return entries
}

// Both real CLIs, confined by the agent (isolation auto, Landlock), ask
// through the control plane with what they would do: Codex before a file
// change (its path and diff), Claude Code before a Bash call outside its
// allowed tools (the command and its directory). The question is in agent
// tasks inbox, tasks show and tasks reply; an accept makes the change, a
// decline keeps the command from running and the task says it was denied.
func TestRealCLIApprovalsThroughTheInbox(t *testing.T) {
	t.Parallel()
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	for _, c := range []struct {
		cli, prompt, answer string
		file, want          string // the file the turn makes, and what it holds ("" when it must not be made)
		kind                state.ApprovalKind
		shows               []string // tasks inbox, show and reply print these
		reason              string   // the completed task's reason
		denied              string   // tasks show prints this denied call
	}{
		{cli: "codex", prompt: "Write the notes\nmock: write\nmock-file: notes.txt", answer: "--accept", file: "notes.txt", want: mockmodel.WrittenContent,
			kind: state.ApprovalFileChange, shows: []string{"change:", "/notes.txt", "+written by the mock model", "diff:     +1 -0"}},
		{cli: "claude", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", answer: "--decline", file: "ran.txt",
			kind: state.ApprovalCommand, shows: []string{"command:  echo ran > ran.txt", "(command, Bash)"},
			reason: "1 tool call denied", denied: "Bash run echo ran > ran.txt in "},
	} {
		t.Run(c.cli, func(t *testing.T) {
			mock, err := mockmodel.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer mock.Close()
			cp := startCP(t, freeAddr(t), t.TempDir())
			defer cp.stop()
			dataDir := t.TempDir()
			var env, args []string
			if c.cli == "codex" {
				env = clitest.CodexEnv(t, mock, clitest.CodexOptions{})
				args = []string{"--executor", "codex", "--executor-bin", clitest.CodexBin(t), "--executor-env", "MOCK_API_KEY"}
			} else {
				env = clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})
				args = []string{"--executor", "claude", "--executor-bin", clitest.ClaudeBin(t), "--claude-allowed-tools", "Write"}
			}
			ag := startProc(t, "agent", env, append([]string{"run", "--control-plane", cp.url(), "--token-file", cp.tokenFile, "--data-dir", dataDir,
				"--approval", "ask", "--heartbeat-interval", "1s", "--shutdown-grace", "2s", "--kill-grace", "1s"}, args...)...)
			id := submit(t, cp, c.prompt)
			cp.waitPhase(t, id, "awaiting_reply", func(p state.Phase) bool { return p == state.PhaseAwaitingReply || p.Terminal() })
			work := filepath.Join(dataDir, "work", id)

			entries := inboxJSON(t, cp)
			if len(entries) != 1 || entries[0].TaskID != id || entries[0].Agent == "" || entries[0].Attempt != 1 {
				t.Fatalf("the inbox %+v, want the task's one question; agent:\n%s", entries, tail(ag.output(), 30))
			}
			q := entries[0].Request
			if q.Kind != c.kind || q.Asked.IsZero() || q.Deadline.Sub(q.Asked) != time.Hour {
				t.Errorf("question %+v, want kind %s, asked, declined an hour later", q, c.kind)
			}
			switch c.kind {
			case state.ApprovalFileChange:
				if len(q.Paths) != 1 || q.Paths[0] != filepath.Join(work, c.file) || !strings.Contains(q.Diff, "+"+strings.TrimSuffix(c.want, "\n")) {
					t.Errorf("the question's paths %q and diff %q, want %s and its line", q.Paths, q.Diff, c.file)
				}
			case state.ApprovalCommand:
				if q.Command != "echo ran > ran.txt" || q.Cwd != work || q.Tool != "Bash" {
					t.Errorf("the question %+v, want the command in %s", q, work)
				}
			}
			inbox := runAgent(t, "tasks", "inbox", "--control-plane", cp.url(), "--token-file", cp.operatorFile)
			show := runAgent(t, "tasks", "show", id, "--remote", "--control-plane", cp.url(), "--token-file", cp.operatorFile)
			for _, want := range append([]string{"declined:", "if nobody answers"}, c.shows...) {
				if !strings.Contains(inbox.stdout, want) {
					t.Errorf("tasks inbox lacks %q:\n%s", want, inbox.stdout)
				}
				if !strings.Contains(show.stdout, want) {
					t.Errorf("tasks show lacks %q:\n%s", want, show.stdout)
				}
			}
			if !strings.Contains(inbox.stdout, "answer:   ") || !strings.Contains(inbox.stdout, "tasks reply "+id+" --accept|--decline") {
				t.Errorf("tasks inbox does not say how to answer:\n%s", inbox.stdout)
			}
			reply := runAgent(t, "tasks", "reply", id, c.answer, "--control-plane", cp.url(), "--token-file", cp.operatorFile)
			if reply.code != 0 {
				t.Fatalf("tasks reply: %+v", reply)
			}
			for _, want := range c.shows {
				if !strings.Contains(reply.stdout, want) {
					t.Errorf("tasks reply lacks %q: it does not say what it answered:\n%s", want, reply.stdout)
				}
			}
			v := cp.waitDone(t, id)
			if v.Phase != state.PhaseCompleted || v.PhaseReason != c.reason {
				t.Fatalf("task %s (%q), want completed (%q); agent:\n%s", v.Phase, v.PhaseReason, c.reason, tail(ag.output(), 30))
			}
			got, err := os.ReadFile(filepath.Join(work, c.file))
			switch {
			case c.want != "" && string(got) != c.want:
				t.Errorf("%s holds %q (%v), want %q", c.file, got, err, c.want)
			case c.want == "" && err == nil:
				t.Errorf("%s was made though declined", c.file)
			}
			if c.denied != "" {
				if v.Denied != 1 {
					t.Errorf("the control plane counts %d denied calls, want 1", v.Denied)
				}
				show = runAgent(t, "tasks", "show", id, "--remote", "--control-plane", cp.url(), "--token-file", cp.operatorFile)
				if !strings.Contains(show.stdout, "denied:   1 tool call denied") || !strings.Contains(show.stdout, c.denied) ||
					!strings.Contains(show.stdout, "(declined by a person)") || !strings.Contains(show.stdout, "phase:    completed (1 tool call denied)") {
					t.Errorf("tasks show does not say the denied call:\n%s", show.stdout)
				}
			}
			if entries := inboxJSON(t, cp); len(entries) != 0 {
				t.Errorf("the inbox still holds %+v", entries)
			}
			if code := ag.stop(); code != 0 {
				t.Errorf("agent exit %d", code)
			}
		})
	}
}

// A question nobody answers within --approval-timeout is declined: the
// child goes on without it, the task keeps the expired question and the
// denied call, and the person hears of it (task.approval_expired), and of
// a completion that was not plain success.
func TestE2EApprovalExpires(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	rv := &webhookReceiver{secret: []byte("0123456789abcdef0123456789abcdef-secret"), byID: map[string][]byte{}, count: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rv}
	go srv.Serve(ln)
	defer srv.Close()
	c := startCP(t, freeAddr(t), dir, "--notify-webhook", "http://"+ln.Addr().String()+"/agent", "--notify-secret-file", secret)
	defer c.stop()
	ag := startAgentProc(t, c, t.TempDir(), "--approval", "ask", "--approval-timeout", "1s")
	id := submit(t, c, "Tidy up\n@ask echo tidied > tidied.txt\n@output after the question")
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || v.PhaseReason != "1 tool call denied" || v.Denied != 1 {
		t.Fatalf("task %s (%q), %d denied; agent:\n%s", v.Phase, v.PhaseReason, v.Denied, tail(ag.output(), 30))
	}
	if e := v.ApprovalExpired; e == nil || e.ID != "ask-1-1" || e.Command != "echo tidied > tidied.txt" {
		t.Errorf("the task's expired question %+v", e)
	}
	if d := v.Attempts[0].Denied; d.Count != 1 || d.Calls[0].Why != "no answer within 1s" {
		t.Errorf("the attempt's denied calls %+v", d)
	}
	testkit.WaitFor(t, "the notifications", func() bool {
		n := rv.notes()
		return len(n[id+" task.approval_expired"]) == 1 && len(n[id+" task.completed"]) == 1
	})
	rv.mu.Lock()
	defer rv.mu.Unlock()
	for _, body := range rv.byID {
		var n struct {
			Event string `json:"event"`
			Text  string `json:"text"`
		}
		json.Unmarshal(body, &n)
		switch n.Event {
		case "task.approval_expired":
			if !strings.Contains(n.Text, `nobody answered in time, so the agent declined (agent `) || !strings.Contains(n.Text, ` asks to run "echo tidied > tidied.txt" in "`) {
				t.Errorf("the expiry's text %q", n.Text)
			}
		case "task.completed":
			if !strings.Contains(n.Text, "completed (1 tool call denied)") {
				t.Errorf("the completion's text %q does not say the denied call", n.Text)
			}
		}
	}
	if len(rv.bad) > 0 {
		t.Errorf("deliveries that failed verification: %q", rv.bad)
	}
}

// One inbox: an exec task's approval line and a subtask's stand beside
// each other, oldest first, the subtask's with its parent; each answer
// reaches its own task.
func TestE2EInboxHoldsExecTasksAndSubtasks(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	defer c.stop()
	dataDir := t.TempDir()
	ag := startAgentProc(t, c, dataDir, "--approval", "ask", "--max-concurrent", "4")
	defer ag.stop()
	first := submit(t, c, "Clean\n@ask echo cleaned > cleaned.txt")
	c.waitPhase(t, first, "awaiting_reply", func(p state.Phase) bool { return p == state.PhaseAwaitingReply || p.Terminal() })
	parent := submit(t, c, "Plan\n@subtask Fetch\\n@ask echo fetched > fetched.txt\n@wait-subtasks")
	var entries []taskview.InboxEntry
	testkit.WaitFor(t, "the subtask's question", func() bool {
		entries = inboxJSON(t, c)
		return len(entries) == 2
	})
	if entries[0].TaskID != first || entries[1].Parent != parent || entries[1].Request.Command != "echo fetched > fetched.txt" {
		t.Fatalf("the inbox %+v, want the exec task's question, then the subtask's with its parent %s", entries, parent)
	}
	kid := entries[1].TaskID
	text := runAgent(t, "tasks", "inbox", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if !strings.Contains(text.stdout, "subtask of "+parent) || strings.Index(text.stdout, first) > strings.Index(text.stdout, kid) {
		t.Errorf("tasks inbox:\n%s", text.stdout)
	}
	for id, answer := range map[string]string{first: "--decline", kid: "--accept"} {
		if r := runAgent(t, "tasks", "reply", id, answer, "--control-plane", c.url(), "--token-file", c.operatorFile); r.code != 0 {
			t.Fatalf("tasks reply %s: %+v", id, r)
		}
	}
	if v := c.waitDone(t, parent); v.Phase != state.PhaseCompleted {
		t.Errorf("the parent: %s (%s)", v.Phase, v.PhaseReason)
	}
	if v := c.waitDone(t, first); v.Phase != state.PhaseCompleted || v.Denied != 1 {
		t.Errorf("the declined task: %s (%s), %d denied", v.Phase, v.PhaseReason, v.Denied)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "work", kid, "fetched.txt")); err != nil {
		t.Errorf("the subtask's accepted command did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "work", first, "cleaned.txt")); err == nil {
		t.Error("the declined command ran")
	}
}

// Approval settings: a combination that cannot ask is refused, in one
// line saying which does, by agent run and by doctor; --reply-timeout,
// its variable and its key are still taken, for --approval-timeout.
func TestApprovalSettings(t *testing.T) {
	t.Parallel()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("registration-secret-0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", "--control-plane", "http://127.0.0.1:1", "--token-file", token, "--data-dir", t.TempDir()}
	fake := filepath.Join(t.TempDir(), "cli")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	codexUnconfined := []string{"--executor", "codex", "--executor-bin", fake, "--approval", "ask", "--codex-sandbox", "danger-full-access", "--isolation", "none"}
	wantOneLineError(t, runAgent(t, append(base, codexUnconfined...)...), 2, "Codex never asks; use --codex-sandbox workspace-write")
	wantOneLineError(t, runAgent(t, append(base, "--executor", "claude", "--executor-bin", fake, "--approval", "ask", "--claude-permission-mode", "dontAsk")...), 2,
		"in permission mode dontAsk Claude Code never asks; use --claude-permission-mode default")
	r := runAgent(t, append([]string{"doctor", "--json"}, append(base[1:], codexUnconfined...)...)...)
	if !strings.Contains(r.stdout, `"check": "executor"`) || !strings.Contains(r.stdout, "Codex never asks") {
		t.Errorf("doctor does not fail the executor check with the reason:\n%s", r.stdout)
	}

	conf := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(conf, []byte("[executor]\nreply-timeout = \"9m\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{args: []string{"--reply-timeout", "5m"}, want: `approval-timeout = "5m0s"`},
		{env: []string{"AGENT_REPLY_TIMEOUT=7m"}, want: `approval-timeout = "7m0s"`},
		{env: []string{"AGENT_CONFIG=" + conf}, want: `approval-timeout = "9m0s"`},
		{args: []string{"--approval-timeout", "0"}, want: `approval-timeout = "0s"`},
		{want: `approval-timeout = "1h0m0s"`},
	} {
		r := runAgentEnv(t, append([]string{"AGENT_CONFIG="}, c.env...), append([]string{"config", "print"}, c.args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("%v %v: config print exit %d, lacks %s:\n%s%s", c.env, c.args, r.code, c.want, r.stdout, r.stderr)
		}
	}
}
