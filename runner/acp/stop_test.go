package acp_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/opencode"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// agents are the real ACP agents tested, each with the executor that
// runs it against the mock and a model it takes: OpenCode (its own
// executor, over ACP), codex-acp, Gemini CLI and claude-code-acp. Gemini
// CLI and claude-code-acp ask before a command: the policy accepts.
var agents = []struct {
	name  string
	model string
	exe   func(*testing.T, *mockmodel.Server) runner.Executor
	// silent is the first-event limit of the silent-model test: long
	// enough for the agent to start on a loaded machine, shorter than
	// its own limit on a silent request (Gemini CLI's fetch fails in
	// about a minute), and than the fixture's attempt limit (2 min).
	silent time.Duration
}{
	{"opencode", clitest.OpenCodeModels[0], func(t *testing.T, m *mockmodel.Server) runner.Executor {
		return runnertest.OpenCodeExec(t, m, opencode.Config{})
	}, 90 * time.Second},
	{"codex-acp", "gpt-5.5", func(t *testing.T, m *mockmodel.Server) runner.Executor {
		return runnertest.CodexACPExec(t, m, acp.Config{})
	}, 90 * time.Second},
	{"gemini", "gemini-2.5-pro", func(t *testing.T, m *mockmodel.Server) runner.Executor {
		return runnertest.GeminiExec(t, m, acp.Config{Approval: runner.ApprovalAcceptAll})
	}, 50 * time.Second},
	{"claude-code-acp", "claude-a", func(t *testing.T, m *mockmodel.Server) runner.Executor {
		return runnertest.ClaudeCodeACPExec(t, m, acp.Config{Approval: runner.ApprovalAcceptAll})
	}, 90 * time.Second},
}

// A model that accepts the request and never answers (nor sends a
// header) is stopped by the agent's own first-event limit: the session
// and the turn's start do not count as an answer.
func TestSilentModelHitsTheFirstEventLimit(t *testing.T) {
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			f := runnertest.NewCLIFixture(t, a.exe(t, mock), "x\nmock: hang_headers", []string{a.model})
			runnertest.Confine(t, f)
			f.Runner.Policy.MaxAttempts = 1
			// The model never answers, so the limit fires anyway.
			f.Runner.Timeouts.FirstEvent = []time.Duration{a.silent}
			f.Run(t, context.Background())
			at := f.Task.Attempts[0]
			if at.Error == nil || at.Error.Code != "first_event_timeout" {
				t.Fatalf("attempt %s, want first_event_timeout; logs:\n%s", runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
			}
			if !slices.Contains(f.Rec.Kinds(), "phase:turn_started") {
				t.Errorf("the turn started before the silence (the limit still fired): %v", f.Rec.Kinds())
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// Cancel while a tool command runs: the agent is stopped (session/cancel,
// then its end), the task ends cancelled, and no process of the attempt
// is left, the command's among them.
func TestCancelDuringAToolCommandLeavesNoProcess(t *testing.T) {
	for _, a := range agents {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			marker := "sleep-" + strconv.Itoa(os.Getpid()) + "-" + a.name
			f := runnertest.NewCLIFixture(t, a.exe(t, mock), "Sleep\nmock: shell\nmock-cmd: bash -c 'exec -a "+marker+" sleep 300'", []string{a.model})
			runnertest.Confine(t, f)
			runnertest.SlowStart(f)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var once sync.Once
			f.Rec.OnReport = func(runner.Report) {
				if len(pidsNamed(marker)) > 0 {
					once.Do(func() { cancel(runner.ErrCancelled) })
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.Run(t, ctx)
			}()
			deadline := time.Now().Add(60 * time.Second)
			for len(pidsNamed(marker)) == 0 && time.Now().Before(deadline) {
				select {
				case <-done:
					t.Fatalf("the attempt ended before its command ran: %s; logs:\n%s", runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
				case <-time.After(50 * time.Millisecond):
				}
			}
			once.Do(func() { cancel(runner.ErrCancelled) })
			<-done
			if f.Task.Phase != state.PhaseCancelled {
				t.Fatalf("task %s, want cancelled; %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
			}
			if pids := pidsNamed(marker); len(pids) > 0 {
				t.Fatalf("the tool command outlived the cancelled attempt: %v", pids)
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// pidsNamed lists live processes whose argv[0] is name.
func pidsNamed(name string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.HasPrefix(b, []byte(name+"\x00")) {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !bytes.Contains(st, []byte(") Z ")) {
				out = append(out, pid)
			}
		}
	}
	return out
}
