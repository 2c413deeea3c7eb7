package mockmodel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
)

// escalate makes Codex ask before it runs the command, under approval
// policy on-request: the app server sends
// item/commandExecution/requestApproval with the mock's justification,
// and runs the command only when the answer is accept. Either way the
// turn completes after the model saw the outcome.
func TestCodexAppServerAsksBeforeAnEscalatedCommand(t *testing.T) {
	for _, c := range []struct {
		decision string
		ran      bool
	}{
		{decision: "accept", ran: true},
		{decision: "decline", ran: false},
	} {
		t.Run(c.decision, func(t *testing.T) {
			t.Parallel()
			mock := startMock(t)
			s := startAppServer(t, mock)
			s.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "mockmodel-test", "title": "mockmodel test", "version": "0.0.1"}})
			s.send(map[string]any{"method": "initialized"})
			th := s.call("thread/start", map[string]any{"cwd": s.dir, "approvalPolicy": "on-request", "sandbox": "read-only"})
			prompt := "Escalate\nmock: escalate\nmock-cmd: echo approved > approved.txt"
			s.call("turn/start", map[string]any{"threadId": str(th, "thread", "id"),
				"input": []any{map[string]any{"type": "text", "text": prompt, "text_elements": []any{}}}})
			ask := s.next(func(m map[string]any) bool { return m["method"] == "item/commandExecution/requestApproval" })
			if p, _ := ask["params"].(map[string]any); !strings.Contains(str(p, "command"), "approved.txt") || !strings.Contains(str(p, "reason"), "outside the sandbox") {
				t.Errorf("the approval request does not carry the command and the justification: %v", p)
			}
			s.send(map[string]any{"id": ask["id"], "result": map[string]any{"decision": c.decision}})
			done := s.next(func(m map[string]any) bool { return m["method"] == "turn/completed" })
			if status := str(done, "params", "turn", "status"); status != "completed" {
				t.Errorf("turn %s, want completed", status)
			}
			_, err := os.Stat(filepath.Join(s.dir, "approved.txt"))
			if ran := err == nil; ran != c.ran {
				t.Errorf("the command ran: %v, want %v", ran, c.ran)
			}
			checkRequests(t, mock, mockmodel.APIOpenAI, "gpt-5.5", []step{{"escalate", true}, {mockmodel.ScenarioFinal, true}})
		})
	}
}

// appServer is a codex app-server spoken to over JSON-RPC lines.
type appServer struct {
	t          *testing.T
	dir        string
	ctx        context.Context
	stdin      interface{ Write([]byte) (int, error) }
	lines      chan map[string]any
	transcript []string
	id         int
}

// startAppServer starts codex app-server against mock; cleanup closes its
// stdin (it exits) and waits for it, killing it at the hang guard.
func startAppServer(t *testing.T, mock *mockmodel.Server) *appServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	s := &appServer{t: t, dir: t.TempDir(), ctx: ctx, lines: make(chan map[string]any)}
	cmd := exec.CommandContext(ctx, clitest.CodexBin(t), "app-server")
	cmd.Dir, cmd.Env = s.dir, clitest.CodexEnv(t, mock, clitest.CodexOptions{})
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.stdin = stdin
	stop := make(chan struct{})
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			select {
			case s.lines <- m:
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		close(stop)
		_ = cmd.Wait()
		cancel()
		if t.Failed() {
			t.Logf("app-server transcript:\n%s\nstderr:\n%s", strings.Join(s.transcript, "\n"), stderr.String())
		}
	})
	return s
}

func (s *appServer) send(v any) {
	b, _ := json.Marshal(v)
	s.transcript = append(s.transcript, "-> "+string(b))
	if _, err := s.stdin.Write(append(b, '\n')); err != nil {
		s.t.Fatalf("write to app-server: %v", err)
	}
}

// next returns the next line that matches, failing when the turn
// completes, the app server exits or the hang guard passes first.
func (s *appServer) next(match func(map[string]any) bool) map[string]any {
	s.t.Helper()
	for {
		select {
		case m, ok := <-s.lines:
			if !ok {
				s.t.Fatal("app-server closed its output")
			}
			b, _ := json.Marshal(m)
			s.transcript = append(s.transcript, "<- "+string(b))
			if match(m) {
				return m
			}
			if m["method"] == "turn/completed" {
				s.t.Fatal("the turn completed first")
			}
		case <-s.ctx.Done():
			s.t.Fatal("app-server: hang guard passed")
		}
	}
}

// call sends a request and returns its result.
func (s *appServer) call(method string, params any) map[string]any {
	s.t.Helper()
	s.id++
	id := float64(s.id)
	s.send(map[string]any{"id": s.id, "method": method, "params": params})
	m := s.next(func(m map[string]any) bool { return m["id"] == id && m["method"] == nil })
	res, ok := m["result"].(map[string]any)
	if !ok {
		s.t.Fatalf("%s: %v", method, m["error"])
	}
	return res
}
