package runner_test

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

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests drive the real Codex and Claude Code binaries (pinned, from
// make tools) against the mock model on loopback, through the runner: what
// they check is what an operator sees, phases, attempts with their codes
// and retry decisions, results, and no process left behind.

// A model that accepts the request and never answers is stopped by the
// agent's own first-event limit: turn/started and system/init do not
// count as an answer.
func TestSilentModelHitsTheFirstEventLimit(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock := runnertest.StartMock(t)
			var exe runner.Executor
			if cli == "codex" {
				exe = runnertest.CodexExec(t, mock, codex.Config{})
			} else {
				exe = runnertest.ClaudeExec(t, mock, claude.Config{APITimeout: 10 * time.Minute})
			}
			f := runnertest.NewCLIFixture(t, exe, "x\nmock: hang_headers", []string{"m"})
			f.Runner.Policy.MaxAttempts = 1
			// Long enough for the CLI to start and say turn_started on a
			// loaded machine; the model never answers, so it fires anyway.
			f.Runner.Timeouts.FirstEvent = []time.Duration{10 * time.Second}
			f.Run(t, context.Background())
			a := f.Task.Attempts[0]
			if a.Error == nil || a.Error.Code != "first_event_timeout" {
				t.Fatalf("attempt %s, want first_event_timeout; logs:\n%s", runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
			}
			if !slices.Contains(f.Rec.Kinds(), "phase:turn_started") {
				t.Errorf("the turn started before the silence (the limit still fired): %v", f.Rec.Kinds())
			}
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// Cancel while a tool command runs: the CLI is stopped gracefully, the
// task ends cancelled, and no process of the attempt is left, although
// both CLIs start tool commands in sessions of their own.
func TestCancelDuringAToolCommandLeavesNoProcess(t *testing.T) {
	for _, cli := range []string{"codex", "claude"} {
		t.Run(cli, func(t *testing.T) {
			mock := runnertest.StartMock(t)
			var exe runner.Executor
			if cli == "codex" {
				exe = runnertest.CodexExec(t, mock, codex.Config{})
			} else {
				exe = runnertest.ClaudeExec(t, mock, claude.Config{AllowedTools: []string{"Bash"}})
			}
			marker := "sleep-" + strconv.Itoa(os.Getpid()) + "-" + cli
			f := runnertest.NewCLIFixture(t, exe, "Sleep\nmock: shell\nmock-cmd: bash -c 'exec -a "+marker+" sleep 300'", []string{"m"})
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
			// The command starts while the attempt is quiet: look for it.
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
		if err == nil && bytes.HasPrefix(b, []byte(name+"\x00")) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}
