package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// colourTasks are a completed, a failed, a recoverable_failed and a
// running task, with an attempt each.
func colourTasks(t *testing.T) []*state.Task {
	t.Helper()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	mk := func(id string, end state.Phase, status state.AttemptStatus, retry *state.RetryDecision) *state.Task {
		task := state.NewTask(id, "p", now)
		task.Title = "task " + id
		must(t, task.Transition(state.PhaseClaimed, "", now))
		_, err := task.StartFirstAttempt(id+"-a1", []string{"model-a"}, now)
		must(t, err)
		must(t, task.Transition(state.PhaseTurnStarted, "", now))
		if status.Final() {
			out := state.Outcome{Status: status, Retry: retry}
			if status != state.AttemptCompleted {
				out.Error = &state.Error{Code: state.CodeNetwork, Message: "reset"}
			}
			must(t, task.FinalizeAttempt(id+"-a1", out, now.Add(time.Second)))
			must(t, task.Transition(end, "", now.Add(time.Second)))
		}
		return task
	}
	blocked := &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateSideEffect, Decision: state.DecisionStopped}
	permanent := &state.RetryDecision{Decision: state.DecisionStopped}
	return []*state.Task{
		mk("t-done", state.PhaseCompleted, state.AttemptCompleted, nil),
		mk("t-failed", state.PhaseFailed, state.AttemptFailed, permanent),
		mk("t-blocked", state.PhaseRecoverableFailed, state.AttemptFailed, blocked),
		mk("t-running", "", state.AttemptRunning, nil),
	}
}

// saveTasks writes tasks into a new data directory, as the agent keeps
// them, and returns the directory.
func saveTasks(t *testing.T, tasks []*state.Task) string {
	t.Helper()
	dataDir := t.TempDir()
	st, err := state.OpenStore(datadir.Layout{Dir: dataDir}.Tasks())
	must(t, err)
	for _, task := range tasks {
		must(t, st.Save(task))
	}
	return dataDir
}

// TestTasksLsOnATerminal runs tasks ls in a terminal (a tmux pane): the
// phases are coloured; with NO_COLOR, or with --json, nothing is.
func TestTasksLsOnATerminal(t *testing.T) {
	t.Parallel()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux is not installed: these machines have it, and the test drives a real terminal with it")
	}
	dataDir := saveTasks(t, colourTasks(t))
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	run := func(session, env string, args ...string) string {
		t.Helper()
		shell := fmt.Sprintf("env AGENT_TEST_BE_AGENT=1 AGENT_CONFIG= %s %q tasks ls --data-dir %q %s; echo end-of-ls; exec cat",
			env, os.Args[0], dataDir, strings.Join(args, " "))
		if out, err := exec.Command(tmux, "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", session, "-x", "150", "-y", "40", "sh", "-c", shell).CombinedOutput(); err != nil {
			t.Fatalf("tmux: %v: %s", err, out)
		}
		var s string
		testkit.WaitFor(t, "tasks ls to end", func() bool {
			out, _ := exec.Command(tmux, "-S", sock, "capture-pane", "-e", "-p", "-S", "-", "-t", session).CombinedOutput()
			s = string(out)
			return strings.Contains(s, "end-of-ls")
		})
		return s
	}
	if s := run("colour", ""); !strings.Contains(s, "\x1b[32mcompleted") || !strings.Contains(s, "\x1b[31mfailed") || !strings.Contains(s, "\x1b[33mrecoverable_failed") {
		t.Errorf("tasks ls on a terminal is not coloured:\n%q", s)
	}
	if s := run("nocolor", "NO_COLOR=1"); !strings.Contains(s, "recoverable_failed") || strings.Contains(s, "\x1b[3") {
		t.Errorf("tasks ls with NO_COLOR is coloured:\n%q", s)
	}
	if s := run("json", "", "--json"); !strings.Contains(s, `"recoverable_failed"`) || strings.Contains(s, "\x1b[3") {
		t.Errorf("tasks ls --json on a terminal is coloured:\n%q", s)
	}
}
