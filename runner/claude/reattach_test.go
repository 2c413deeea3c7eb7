package claude

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// waitingAsker is a person who has not answered yet: each question waits
// until its context ends (the agent going), then is declined as the
// runner's asker declines it, or is answered by answer when that is set.
type waitingAsker struct {
	mu     sync.Mutex
	asked  []state.ApprovalRequest
	answer runner.Approval // "": nobody answers
}

func (a *waitingAsker) ask(ctx context.Context, req state.ApprovalRequest) runner.Approval {
	a.mu.Lock()
	a.asked = append(a.asked, req)
	answer := a.answer
	a.mu.Unlock()
	if answer != "" {
		return answer
	}
	<-ctx.Done()
	return runner.ApprovalDecline
}

func (a *waitingAsker) ids() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []string
	for _, q := range a.asked {
		ids = append(ids, q.ID)
	}
	return ids
}

// mcpCall sends a tools/call for a Bash command, as Claude Code does; its
// decision comes in decisions.
func (c *mcpClient) mcpCall(t *testing.T, id int, toolUseID, command string, mu *sync.Mutex) {
	t.Helper()
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": "approve",
		"arguments": map[string]any{"tool_name": "Bash", "input": map[string]any{"command": command}, "tool_use_id": toolUseID}}})
	mu.Lock()
	defer mu.Unlock()
	if _, err := c.in.Write(append(msg, '\n')); err != nil {
		t.Fatal(err)
	}
}

// decisions reads the decisions Claude Code gets off the MCP server's
// stdout: get is "behavior:message" by JSON-RPC id, "" until it comes.
func (c *mcpClient) decisions(t *testing.T) (get func(id int) string) {
	var (
		mu  sync.Mutex
		got = map[int]string{}
	)
	go func() {
		for {
			line, err := c.out.ReadBytes('\n')
			if err != nil {
				return
			}
			var r struct {
				ID     int `json:"id"`
				Result struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"result"`
			}
			if json.Unmarshal(line, &r) != nil || len(r.Result.Content) != 1 {
				t.Errorf("the MCP server said %s", line)
				continue
			}
			var d struct {
				Behavior string `json:"behavior"`
				Message  string `json:"message"`
			}
			_ = json.Unmarshal([]byte(r.Result.Content[0].Text), &d)
			mu.Lock()
			got[r.ID] = d.Behavior + ":" + d.Message
			mu.Unlock()
		}
	}()
	return func(id int) string {
		mu.Lock()
		defer mu.Unlock()
		return got[id]
	}
}

// An attempt that outlives the agent keeps its questions: one waiting for
// a person when the agent goes (stopped, or killed and its socket left
// behind), and one Claude Code asks while no agent is there, are asked
// again of the agent's next life, which serves the same socket with the
// same token; the same question keeps its id, and nothing is answered
// because the agent went. Once an agent ends the attempt (the socket
// closed for good, the token gone), a question is declined at once.
func TestQuestionsOutliveTheAgent(t *testing.T) {
	for _, killed := range []bool{false, true} {
		name := map[bool]string{false: "stopped", true: "killed"}[killed]
		t.Run(name, func(t *testing.T) {
			spool, tmp := t.TempDir(), t.TempDir()
			first := &waitingAsker{}
			ctx, stop := context.WithCancelCause(context.Background())
			defer stop(nil)
			spec := runner.AttemptSpec{ServeDir: tmp, Ask: first.ask, Spool: &runner.Spool{Dir: spool}}
			s1, err := newAskServer(ctx, spec, runner.ApprovalAsk, []string{"/bin/agent", "claude-approval-mcp"}, nil, "/work")
			if err != nil {
				t.Fatal(err)
			}
			evs := &events{}
			s1.start(evs.add)
			// What the next life finds: the spool's record, private, the
			// token in it and not in the ask directory.
			if fi, err := os.Stat(filepath.Join(spool, askSaved)); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %v %v", askSaved, fi, err)
			}
			m := startMCP(t, s1.dir)
			var inMu sync.Mutex
			decision := m.decisions(t)
			m.mcpCall(t, 1, "toolu_pending", "make deploy", &inMu)
			testkit.WaitFor(t, "the first life to be asked", func() bool { return len(first.ids()) == 1 })

			// The agent goes, the question unanswered.
			stop(runner.ErrDetach)
			s1.detach()
			if killed {
				// A killed agent leaves its socket file, nobody behind it.
				ln, err := net.Listen("unix", filepath.Join(tmp, askSocket))
				if err != nil {
					t.Fatal(err)
				}
				ln.(*net.UnixListener).SetUnlinkOnClose(false)
				ln.Close()
			}
			m.mcpCall(t, 2, "toolu_meanwhile", "make test", &inMu)
			if d := decision(1) + decision(2); d != "" {
				t.Fatalf("answered while no agent is there: %q", d)
			}

			next := &waitingAsker{answer: runner.ApprovalAccept}
			spec2 := runner.AttemptSpec{ServeDir: t.TempDir(), Ask: next.ask, Spool: &runner.Spool{Dir: spool}}
			s2, err := reopenAskServer(context.Background(), spec2, runner.ApprovalAsk, "/work")
			if err != nil {
				t.Fatal(err)
			}
			if s2.dir != tmp || s2.token != s1.token {
				t.Fatalf("the next life serves %s, want %s with the same token", s2.dir, tmp)
			}
			s2.start(evs.add)
			testkit.WaitFor(t, "both questions to be answered by the next life", func() bool {
				return decision(1) != "" && decision(2) != ""
			})
			for id := 1; id <= 2; id++ {
				if d := decision(id); d != "allow:" {
					t.Errorf("question %d: %q, want the next life's accept", id, d)
				}
			}
			if got := strings.Join(next.ids(), ","); got != "toolu_pending,toolu_meanwhile" && got != "toolu_meanwhile,toolu_pending" {
				t.Errorf("the next life was asked %q, want each question once by its own id", got)
			}
			if !s2.answered("toolu_pending") {
				t.Error("the question answered by the next life is not known as answered there")
			}

			// The attempt ends: no agent will come back to the question.
			s2.close()
			m.mcpCall(t, 3, "toolu_late", "make clean", &inMu)
			testkit.WaitFor(t, "the question after the end to be declined", func() bool { return decision(3) != "" })
			if d := decision(3); !strings.HasPrefix(d, "deny:The agent could not be asked") {
				t.Errorf("after the end: %q, want declined", d)
			}
			for _, ev := range evs.all() {
				if b, _ := json.Marshal(ev); strings.Contains(string(b), s1.token) {
					t.Errorf("the token is in an event: %s", b)
				}
			}
		})
	}
}

// An attempt that is not confined has an ask directory of the agent's
// own making: it outlives the agent that made it, and the agent that ends
// the attempt removes it.
func TestAnAskDirectoryOfItsOwnOutlivesTheAgent(t *testing.T) {
	spool := t.TempDir()
	spec := runner.AttemptSpec{Ask: (&waitingAsker{}).ask, Spool: &runner.Spool{Dir: spool}}
	s1, err := newAskServer(context.Background(), spec, runner.ApprovalAsk, []string{"/bin/agent", "claude-approval-mcp"}, nil, "/work")
	if err != nil {
		t.Fatal(err)
	}
	s1.start(func(runner.Event) {})
	s1.detach()
	if _, err := os.Stat(filepath.Join(s1.dir, askToken)); err != nil {
		t.Fatalf("the token is gone with the agent: %v", err)
	}
	s2, err := reopenAskServer(context.Background(), spec, runner.ApprovalAsk, "/work")
	if err != nil {
		t.Fatal(err)
	}
	if s2.dir != s1.dir || s2.token != s1.token {
		t.Fatalf("the next life serves %s, want %s with the same token", s2.dir, s1.dir)
	}
	s2.start(func(runner.Event) {})
	s2.close()
	if _, err := os.Stat(s1.dir); !os.IsNotExist(err) {
		t.Errorf("the ask directory is left after the attempt: %v", err)
	}
	// A spool without the record, or with one that is not the agent's,
	// is a clear error, not a socket served somewhere else.
	for _, body := range []string{"", "{}", `{"dir":"/tmp","token":"short"}`} {
		other := t.TempDir()
		if body != "" {
			if err := os.WriteFile(filepath.Join(other, askSaved), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := reopenAskServer(context.Background(), runner.AttemptSpec{Spool: &runner.Spool{Dir: other}}, runner.ApprovalAsk, "/work")
		if err == nil || !strings.HasPrefix(err.Error(), "claude approvals: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("spool record %q: %v, want a one-line error", body, err)
		}
	}
}
