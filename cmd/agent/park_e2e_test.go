package main

// Park and continue, through the real binaries: a usage limit parks the
// task, its slot freed, and its session continues once when the limit
// resets, also across the agent's restart; a person continues a parked
// task early, or cancels it.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// sessionTurns are the prompts the sample executor's session of task id
// was sent: the task's, then each continue's follow-up.
func sessionTurns(t *testing.T, dataDir, id string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "work", runner.SessionDirName, id, "sample-session.json"))
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		Prompts []string `json:"prompts"`
	}
	must(t, json.Unmarshal(b, &saved))
	return saved.Prompts
}

// checkParkedOnce checks that task v completed after one park: attempt 1
// stopped at the usage limit, attempt 2 continued its session, with one
// follow-up turn, and the side effect was not done again.
func checkParkedOnce(t *testing.T, c *cp, dataDir string, v api.TaskView) {
	t.Helper()
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 {
		t.Fatalf("task %s with %d attempts, want completed with 2", v.Phase, len(v.Attempts))
	}
	if a := v.Attempts[0]; a.Error == nil || a.Error.Code != state.CodeUsageLimit || a.Retry == nil || a.Retry.Decision != state.DecisionContinued {
		t.Errorf("attempt 1: %+v, %+v", a.Error, a.Retry)
	}
	if a := v.Attempts[1]; a.Continues != 1 || a.SessionID != v.Attempts[0].SessionID {
		t.Errorf("attempt 2 continues %d, session %q", a.Continues, a.SessionID)
	}
	if turns := sessionTurns(t, dataDir, v.ID); len(turns) != 2 || !strings.Contains(turns[1], "usage limit has reset") {
		t.Errorf("the session's turns: %q; want the prompt and one follow-up", turns)
	}
	parked, resumed, effects := 0, 0, 0
	for _, e := range c.events(t, v.ID) {
		switch e.Kind {
		case state.EventPhase:
			var p state.PhaseEvent
			must(t, json.Unmarshal(e.Payload, &p))
			if p.Phase == state.PhaseParked {
				parked++
				if p.Parked == nil || p.Parked.Reason != state.ParkUsageLimit || p.Parked.ResumesAt.IsZero() {
					t.Errorf("the parked phase says %+v", p.Parked)
				}
			}
			if p.Phase == state.PhaseExecutorStarting && strings.HasPrefix(p.Reason, "resumed: ") {
				resumed++
			}
		case state.EventLog:
			if strings.Contains(string(e.Payload), "rotated the key") {
				effects++
			}
		}
	}
	if parked != 1 || resumed != 1 || effects != 1 {
		t.Errorf("parked %d, resumed %d, side effect done %d times; want once each", parked, resumed, effects)
	}
}

// @limit 5s parks the task at the control plane and on the agent, which
// gives its only slot to another task meanwhile; the limit reset, the
// session continues once.
func TestAUsageLimitParksAndContinues(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--max-concurrent", "1")
	id := submit(t, c, "Rotate the key\n@side-effect rotated the key\n@limit 5s\n@output after the reset")
	v := c.waitPhase(t, id, "parked", func(p state.Phase) bool { return p == state.PhaseParked })
	if v.Parked == nil || v.Parked.ResumesAt.IsZero() || !strings.Contains(v.PhaseReason, "parked until the limit resets") {
		t.Fatalf("parked: %+v (%s)", v.Parked, v.PhaseReason)
	}
	show := runAgent(t, "tasks", "show", id, "--remote", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if show.code != 0 || !strings.Contains(show.stdout, "parked:   waiting for the limit to reset (usage_limit); resumes at ") ||
		!strings.Contains(show.stdout, state.ParkedStep) {
		t.Errorf("tasks show of a parked task:\n%s%s", show.stdout, show.stderr)
	}
	// Its slot is free: another task runs to its end meanwhile.
	other := submit(t, c, "Quick one\n@output done")
	if o := c.waitDone(t, other); o.Phase != state.PhaseCompleted {
		t.Fatalf("the other task: %s", o.Phase)
	}
	if p := c.task(t, id).Phase; p != state.PhaseParked {
		t.Fatalf("the parked task is %s before its limit reset, the other done", p)
	}
	checkParkedOnce(t, c, dataDir, c.waitDone(t, id))
}

// An agent stopped while its task is parked takes it up when it starts
// again: the task stays parked meanwhile, and continues once at the reset.
func TestAParkedTaskSurvivesTheAgentsRestart(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	first := startAgentProc(t, c, dataDir)
	id := submit(t, c, "Rotate the key\n@side-effect rotated the key\n@limit 5s\n@output after the reset")
	waitLocalPhase(t, dataDir, id, state.PhaseParked)
	c.waitPhase(t, id, "parked", func(p state.Phase) bool { return p == state.PhaseParked })
	if code := first.stop(); code != 0 {
		t.Fatalf("the agent exited %d:\n%s", code, first.output())
	}
	if !strings.Contains(first.output(), "task will continue its session when the agent starts again") {
		t.Errorf("the stop did not say the parked task continues:\n%s", tail(first.output(), 20))
	}
	if p := c.task(t, id).Phase; p != state.PhaseParked {
		t.Fatalf("after the agent's stop the task is %s", p)
	}
	startAgentProc(t, c, dataDir)
	checkParkedOnce(t, c, dataDir, c.waitDone(t, id))
}

// A person continues a parked task early (agent tasks continue), or
// cancels one: neither waits for the reset, an hour away.
func TestAParkedTaskIsContinuedEarlyOrCancelled(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	early := submit(t, c, "Rotate the key\n@side-effect rotated the key\n@limit 1h\n@output after the reset")
	cancelled := submit(t, c, "Rotate another\n@limit 1h")
	for _, id := range []string{early, cancelled} {
		c.waitPhase(t, id, "parked", func(p state.Phase) bool { return p == state.PhaseParked })
	}
	if r := runAgent(t, append([]string{"tasks", "continue", early}, cpArgs...)...); r.code != 0 || !strings.Contains(r.stdout, "parked: its agent resumes it at its next heartbeat") {
		t.Fatalf("tasks continue of a parked task: %+v", r)
	}
	if r := runAgent(t, append([]string{"tasks", "cancel", cancelled}, cpArgs...)...); r.code != 0 {
		t.Fatalf("tasks cancel of a parked task: %+v", r)
	}
	v := c.waitDone(t, early)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 || v.Attempts[1].Continues != 1 {
		t.Errorf("continued early: %s, %d attempts", v.Phase, len(v.Attempts))
	}
	resumedEarly := false
	for _, e := range c.events(t, early) {
		resumedEarly = resumedEarly || e.Kind == state.EventPhase && strings.Contains(string(e.Payload), "a person continued it early")
	}
	if !resumedEarly {
		t.Error("no phase says a person continued it early")
	}
	local := waitLocalPhase(t, dataDir, cancelled, state.PhaseCancelled)
	remote := c.waitDone(t, cancelled)
	sameEnding(t, local, remote.Task(), "cancelled: cancelled by a person")
}

// A task that reaches its token budget parks (the agent's default,
// --on-budget park) and a person is told; agent tasks budget --add-tokens
// raises it, and the session continues once. A raise of a task not parked
// at its budget, or of a budget it has not, is one line and exit 1; a
// raise of nothing is a usage error.
func TestABudgetReachedParksAndARaiseContinues(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	id := submitArgs(t, c, "Count the words\n@side-effect rotated the key\n@usage 600\n@sleep 1s\n@output counted", "--max-tokens", "500")
	v := c.waitPhase(t, id, "parked", func(p state.Phase) bool { return p == state.PhaseParked })
	if v.Parked == nil || v.Parked.Reason != state.ParkBudget || v.Parked.MaxTokens != 500 {
		t.Fatalf("parked: %+v", v.Parked)
	}
	show := runAgent(t, append([]string{"tasks", "show", id, "--remote"}, cpArgs...)...)
	if !strings.Contains(show.stdout, "parked:   waiting for a person to raise its budget (500 tokens reached)") ||
		!strings.Contains(show.stdout, " tasks budget "+id+" --add-tokens N|--add-time D") || !strings.Contains(show.stdout, state.BudgetParkedStep) {
		t.Errorf("tasks show of a task parked at its budget:\n%s%s", show.stdout, show.stderr)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--add-time", "5m"}, 1, "has no time budget to raise; it reached its token budget (add_tokens)"},
		{[]string{}, 2, "say how much to add: --add-tokens N, --add-time D or both"},
		{[]string{"--add-tokens", "-5"}, 2, "--add-tokens and --add-time cannot be below zero"},
	} {
		if r := runAgent(t, append(append([]string{"tasks", "budget", id}, c.args...), cpArgs...)...); r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("tasks budget %v: exit %d, %q; want %d, %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	r := runAgent(t, append([]string{"tasks", "budget", id, "--add-tokens", "1000"}, cpArgs...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "budget raised to 1.5k tokens; its agent continues it at its next heartbeat") {
		t.Fatalf("tasks budget: %+v", r)
	}
	v = c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 || v.Attempts[1].Continues != 1 || v.MaxTokens != 1500 {
		t.Fatalf("after the raise: %s, %d attempts, budget %d", v.Phase, len(v.Attempts), v.MaxTokens)
	}
	if turns := sessionTurns(t, dataDir, id); len(turns) != 2 || !strings.Contains(turns[1], "raised the task's budget") {
		t.Errorf("the session's turns: %q", turns)
	}
	if r := runAgent(t, append([]string{"tasks", "budget", id, "--add-tokens", "1"}, cpArgs...)...); r.code != 1 || !strings.Contains(r.stderr, "only a task parked at its budget can have it raised") {
		t.Errorf("tasks budget of a completed task: %+v", r)
	}
}
