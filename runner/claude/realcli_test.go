package claude_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real Claude Code binary (pinned, from make tools) against
// the mock model on loopback, through the runner: what they check is what
// an operator sees, phases, attempts with their codes and retry decisions,
// results, and no process left behind.

func TestClaudeAgainstTheRealCLI(t *testing.T) {
	for _, c := range []runnertest.CLICase{
		{Name: "text", Prompt: "Say hello", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Hello from the mock model.", Asked: []string{"claude-a"}},
		{Name: "fallback chain on a 429", Prompt: "Say hello\nmock: claude-a=r429 claude-b=text", Models: []string{"claude-a", "claude-b"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"rate_limit", ""}, Asked: []string{"claude-a", "claude-b"}},
		{Name: "bash runs a command", Prompt: "Run it\nmock: shell", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Done: the tool ran."},
		{Name: "side effect then a 500 continues the session", Prompt: "Run it\nmock: shell after=r500", Models: []string{"claude-a"},
			Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}, Continued: true},
		{Name: "write creates a file", Prompt: "Write it\nmock: write", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Done: the tool ran."},
		{Name: "500 is retried", Prompt: "x\nmock: claude-a=r500 claude-b=text", Models: []string{"claude-a", "claude-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"unavailable", ""}},
		{Name: "a cut stream is taken up again by claude itself", Prompt: "x\nmock: cut", Models: []string{"claude-a"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{""},
			Summary: "Hello from the mock model."},
		{Name: "credit balance is quota", Prompt: "x\nmock: quota", Models: []string{"claude-a"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"quota"}},
		{Name: "401 is auth", Prompt: "x\nmock: r401", Models: []string{"claude-a"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"auth"}},
		{Name: "403 is permission", Prompt: "x\nmock: r403", Models: []string{"claude-a"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"permission"}},
		{Name: "prompt too long is context overflow", Prompt: "x\nmock: context", Models: []string{"claude-a"}, Phase: state.PhaseFailed, Codes: []state.ErrorCode{"context_overflow"}},
		{Name: "overloaded is retried", Prompt: "x\nmock: claude-a=overloaded claude-b=text", Models: []string{"claude-a", "claude-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"overloaded", ""}},
		{Name: "no headers times out in claude", Prompt: "x\nmock: claude-a=hang_headers claude-b=text", Models: []string{"claude-a", "claude-b"}, Phase: state.PhaseCompleted, Codes: []state.ErrorCode{"timeout", ""}},
	} {
		t.Run(c.Name, func(t *testing.T) {
			runnertest.RunCLICase(t, c, func(m *mockmodel.Server) runner.Executor {
				return runnertest.ClaudeExec(t, m, claude.Config{AllowedTools: []string{"Bash", "Write"}})
			})
		})
	}
}

// Claude in print mode asks nobody: what it may not do it denies, and
// the denial is a denied call of the attempt; the run still succeeds,
// without the side effect, and the task says it was refused.
func TestClaudePermissionDenialIsADeniedCall(t *testing.T) {
	mock := runnertest.StartMock(t)
	f := runnertest.NewCLIFixture(t, runnertest.ClaudeExec(t, mock, claude.Config{}), "Run it\nmock: shell\nmock-cmd: echo denied > denied.txt", []string{"claude-a"})
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s: %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	d := f.Task.Attempts[0].Denied
	if d.Count != 1 || d.Calls[0].Tool != "Bash" || d.Calls[0].Input != "echo denied > denied.txt" || d.Calls[0].Why != "not allowed by Claude Code's permissions" {
		t.Errorf("denied %+v, want the Bash call, not allowed", d)
	}
	if f.Task.PhaseReason != "1 tool call denied" {
		t.Errorf("the task completed with reason %q, want it to say the denied call", f.Task.PhaseReason)
	}
	if !runnertest.ContainsSub(f.Rec.Logs(), "denied: Bash echo denied > denied.txt (not allowed by Claude Code's permissions)") {
		t.Errorf("no log line for the denial:\n%s", strings.Join(f.Rec.Logs(), "\n"))
	}
	if f.Task.Attempts[0].Facts.SideEffect {
		t.Error("a denied command counted as a side effect")
	}
	if _, err := os.Stat(filepath.Join(f.Runner.WorkRoot, f.Task.ID, "denied.txt")); err == nil {
		t.Error("the denied command ran")
	}
}

// replies is a person answering approval requests by a fixed decision,
// or never (no decision).
type replies struct {
	mu       sync.Mutex
	requests []state.ApprovalRequest
	answer   runner.Approval
}

func (r *replies) Await(ctx context.Context, taskID string, req state.ApprovalRequest) (runner.Approval, error) {
	r.mu.Lock()
	r.requests = append(r.requests, req)
	r.mu.Unlock()
	if r.answer == "" {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return r.answer, nil
}

// With --approval ask, Claude Code asks through the permission prompt
// tool the agent serves, confined: a tool call outside the allowed list
// becomes a question (a Bash command and where it runs; a Write or an
// Edit with its file and diff), a person's answer decides, and what is
// declined, or not answered in time, does not happen and is a denied
// call.
func TestClaudeAsksWhenConfined(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	for _, c := range []struct {
		name    string
		prompt  string
		allowed []string
		policy  runner.ApprovalPolicy
		before  string // the content of the file the turn changes, before it
		answer  runner.Approval
		file    string
		want    string // what the file holds after; "" when it must not be made
		kind    state.ApprovalKind
		diff    []string
		asked   bool
		why     string
		expired bool
	}{
		{name: "Bash, not allowed, a person accepts", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", allowed: []string{"Write"},
			answer: runner.ApprovalAccept, file: "ran.txt", want: "ran\n", kind: state.ApprovalCommand, asked: true},
		{name: "Bash, not allowed, a person declines", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", allowed: []string{"Write"},
			answer: runner.ApprovalDecline, file: "ran.txt", kind: state.ApprovalCommand, asked: true, why: "declined by a person"},
		{name: "Bash, nobody answers in time", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", allowed: []string{"Write"},
			file: "ran.txt", kind: state.ApprovalCommand, asked: true, why: "no answer within 1s", expired: true},
		{name: "Write, not allowed, a person accepts", prompt: "Write it\nmock: write", allowed: []string{"Bash"}, answer: runner.ApprovalAccept,
			file: mockmodel.WriteFile, want: mockmodel.WrittenContent, kind: state.ApprovalFileChange, diff: []string{"+written by the mock model"}, asked: true},
		{name: "Edit, not allowed, a person declines", prompt: "Edit it\nmock: edit", allowed: []string{"Bash"}, before: mockmodel.WrittenContent,
			answer: runner.ApprovalDecline, file: mockmodel.WriteFile, kind: state.ApprovalFileChange,
			diff: []string{"-written by the mock model", "+edited by the mock model"}, asked: true, why: "declined by a person"},
		{name: "Bash, allowed: nobody is asked", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", allowed: []string{"Bash"},
			answer: runner.ApprovalDecline, file: "ran.txt", want: "ran\n"},
		{name: "Bash, declined by the policy", prompt: "Run it\nmock: shell\nmock-cmd: echo ran > ran.txt", policy: runner.ApprovalDeclineAll,
			file: "ran.txt", why: "declined by the approval policy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			policy := c.policy
			if policy == "" {
				policy = runner.ApprovalAsk
			}
			f := runnertest.NewCLIFixture(t, runnertest.ClaudeExec(t, mock, claude.Config{AllowedTools: c.allowed, Approval: policy}), c.prompt, []string{"claude-a"})
			f.Runner.Isolation = &runner.Isolation{}
			rep := &replies{answer: c.answer}
			f.Runner.Replies = rep
			f.Runner.ApprovalTimeout = time.Second
			work := filepath.Join(f.Runner.WorkRoot, f.Task.ID)
			if c.before != "" {
				if err := os.MkdirAll(work, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(work, c.file), []byte(c.before), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			f.Run(t, context.Background())
			logs := strings.Join(f.Rec.Logs(), "\n")
			if f.Task.Phase != state.PhaseCompleted {
				t.Fatalf("task %s (%s); attempts %s; logs:\n%s", f.Task.Phase, f.Task.PhaseReason, runnertest.AttemptsText(f.Task), logs)
			}
			if (len(rep.requests) == 1) != c.asked || len(rep.requests) > 1 {
				t.Fatalf("questions %+v, want one: %v; logs:\n%s", rep.requests, c.asked, logs)
			}
			if c.asked {
				req := rep.requests[0]
				if req.Kind != c.kind || req.ID == "" || req.Deadline.IsZero() {
					t.Errorf("question %+v, want kind %s, an id and a deadline", req, c.kind)
				}
				switch c.kind {
				case state.ApprovalCommand:
					if req.Tool != "Bash" || req.Command != "echo ran > ran.txt" || req.Cwd != work {
						t.Errorf("the question does not say the command and where it runs: %+v (want in %s)", req, work)
					}
				case state.ApprovalFileChange:
					if len(req.Paths) != 1 || req.Paths[0] != filepath.Join(work, c.file) {
						t.Errorf("the question's paths %q, want %s", req.Paths, filepath.Join(work, c.file))
					}
					for _, d := range c.diff {
						if !strings.Contains(req.Diff, d) {
							t.Errorf("the question's diff lacks %q:\n%s", d, req.Diff)
						}
					}
				}
			}
			got, err := os.ReadFile(filepath.Join(work, c.file))
			switch {
			case c.want != "" && string(got) != c.want:
				t.Errorf("%s holds %q (%v), want %q; logs:\n%s", c.file, got, err, c.want, logs)
			case c.want == "" && c.before == "" && err == nil:
				t.Errorf("%s was made though declined: %q", c.file, got)
			case c.before != "" && c.want == "" && string(got) != c.before:
				t.Errorf("%s holds %q though the edit was declined", c.file, got)
			}
			d := f.Task.Attempts[0].Denied
			switch {
			case c.why == "" && (d.Count != 0 || f.Task.PhaseReason != ""):
				t.Errorf("denied %+v, reason %q; want none", d, f.Task.PhaseReason)
			case c.why != "" && (d.Count != 1 || d.Calls[0].Why != c.why || f.Task.PhaseReason != "1 tool call denied"):
				t.Errorf("denied %+v, reason %q; want one call, %s (counted once)", d, f.Task.PhaseReason, c.why)
			}
			if (f.Task.ApprovalExpired != nil) != c.expired {
				t.Errorf("the task's expired question %+v, want one: %v", f.Task.ApprovalExpired, c.expired)
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// A task cannot take the agent's place on the ask socket: the directory
// that holds the socket, its token and the MCP config is the agent's, and
// the attempt reads it only. A hostile command (here one Bash may run
// unasked) finds the directory on the prompt tool's command line and tries
// to plant a file there and to remove the socket, which would let it put a
// listener of its own there and allow every call Claude Code asks about.
func TestAClaudeTaskCannotTakeOverItsAskSocket(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	runnertest.LimitCLIs(t)
	mock := runnertest.StartMock(t)
	attack := `for p in /proc/[0-9]*; do tr '\0' '\n' < $p/cmdline 2>/dev/null | grep -A1 -x -- --dir; done | grep -v -x -- --dir | sort -u > askdirs; ` +
		`for d in $(cat askdirs); do echo x > $d/planted && echo planted >> took; rm -f $d/ask.sock && echo removed >> took; done; echo done`
	f := runnertest.NewCLIFixture(t, runnertest.ClaudeExec(t, mock, claude.Config{AllowedTools: []string{"Bash"}, Approval: runner.ApprovalAsk}),
		"Run it\nmock: shell\nmock-cmd: "+attack, []string{"claude-a"})
	f.Runner.Isolation = &runner.Isolation{}
	f.Runner.Replies = &replies{answer: runner.ApprovalDecline}
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s (%s); logs:\n%s", f.Task.Phase, f.Task.PhaseReason, strings.Join(f.Rec.Logs(), "\n"))
	}
	work := filepath.Join(f.Runner.WorkRoot, f.Task.ID)
	dirs, err := os.ReadFile(filepath.Join(work, "askdirs"))
	if err != nil || len(strings.Fields(string(dirs))) == 0 {
		t.Fatalf("the command found no ask directory (%v): the attack was not tried", err)
	}
	if took, _ := os.ReadFile(filepath.Join(work, "took")); len(took) > 0 {
		t.Errorf("the task changed its ask directory %s: %q", strings.TrimSpace(string(dirs)), took)
	}
	if entries, _ := os.ReadDir(filepath.Join(f.Runner.WorkRoot, runner.ServeDirName)); len(entries) > 0 {
		t.Errorf("the attempt's serve directory outlived it: %v", entries)
	}
	runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
}
