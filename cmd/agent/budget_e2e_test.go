package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// submitArgs enqueues a task through `agent submit` with more flags and
// returns its id.
func submitArgs(t *testing.T, c *cp, prompt string, flags ...string) string {
	t.Helper()
	r := runAgent(t, append([]string{"submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", prompt}, flags...)...)
	if r.code != 0 {
		t.Fatalf("submit: %+v", r)
	}
	return strings.TrimSpace(r.stdout)
}

// checkOverBudget checks that task v ended failed after one attempt that
// went over its budget, saying why.
func checkOverBudget(t *testing.T, v api.TaskView, why string) {
	t.Helper()
	if v.Phase != state.PhaseFailed || len(v.Attempts) != 1 {
		t.Fatalf("task %s: %s (%s) with %d attempts, want failed with 1", v.ID, v.Phase, v.PhaseReason, len(v.Attempts))
	}
	a := v.Attempts[0]
	if a.Error == nil || a.Error.Code != state.CodeBudgetExceeded || !strings.Contains(a.Error.Message, why) ||
		a.Retry == nil || a.Retry.Gate != state.GateBudget || a.Retry.Decision != state.DecisionStopped {
		t.Errorf("task %s's attempt: %+v %+v, want budget_exceeded …%s…", v.ID, a.Error, a.Retry, why)
	}
}

// Budgets end to end, through the real binary and control plane: a task
// over its token budget, one over its time budget, one over the agent's
// default; the task's own budget wins over the default. The usage shows in
// the control plane's view, in tasks show (local and remote) and in the
// agent's metrics. With --on-budget fail, as budgets were before they
// asked: each ends failed (park_e2e_test.go has the default, park).
func TestE2EBudgets(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir, metricsAddr := filepath.Join(t.TempDir(), "agent"), freeAddr(t)
	ag := startAgentProc(t, c, dataDir, "--default-max-tokens", "500", "--metrics-addr", metricsAddr, "--on-budget", "fail")
	defer ag.stop()

	// Its own 1000 wins over the agent's 500: the first 600 go by, the
	// next 600 pass it. The sample waits after: only the stop ends it.
	tokens := submitArgs(t, c, "Count the words\n@usage 600\n@output counting\n@usage 600\n@hang", "--max-tokens", "1000")
	slow := submitArgs(t, c, "Wait for the build\n@output waiting\n@hang", "--max-time", "1s")
	byDefault := submitArgs(t, c, "Summarize\n@usage 600\n@hang")

	v := c.waitDone(t, tokens)
	checkOverBudget(t, v, "1.2k tokens used, over the budget of 1k")
	used := state.Usage{InputTokens: 960, OutputTokens: 240, TotalTokens: 1200}
	if v.MaxTokens != 1000 || v.Attempts[0].Usage != used || v.Result == nil || v.Result.Usage == nil || v.Result.Usage.Usage != used || v.Usage.Usage != used {
		t.Errorf("the control plane's view: budget %d, attempt usage %+v, result %+v, usage %+v", v.MaxTokens, v.Attempts[0].Usage, v.Result, v.Usage)
	}
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	for _, args := range [][]string{{"--data-dir", dataDir}, append([]string{"--remote"}, cpArgs...)} {
		r := runAgent(t, append([]string{"tasks", "show", tokens}, args...)...)
		for _, want := range []string{"usage:    1.2k tokens (960 in, 240 out), ", "; budget 1k tokens\n",
			"1.2k tok  budget_exceeded: 1.2k tokens used, over the budget of 1k  -> stopped: budget_exceeded"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("tasks show %v: no %q in\n%s", args[0], want, r.stdout)
			}
		}
	}

	v = c.waitDone(t, slow)
	checkOverBudget(t, v, "ran out the time budget of 1s")
	if a := v.Attempts[0]; !strings.Contains(a.TimeoutUsed, "fired=budget") || a.WallTime(time.Now()) < time.Second {
		t.Errorf("the slow task's attempt: limits %q, ran %s", a.TimeoutUsed, a.WallTime(time.Now()))
	}
	if r := runAgent(t, "tasks", "show", slow, "--data-dir", dataDir); !strings.Contains(r.stdout, "; budget 1s\n") || strings.Contains(r.stdout, "timed_out") {
		t.Errorf("tasks show of the slow task:\n%s", r.stdout)
	}

	v = c.waitDone(t, byDefault)
	checkOverBudget(t, v, "600 tokens used, over the budget of 500")
	if v.MaxTokens != 0 {
		t.Errorf("the agent's default became the task's own budget: %d", v.MaxTokens)
	}

	// 1200 + 600 tokens, four fifths input.
	testkit.WaitFor(t, "the agent's token metrics", func() bool {
		body := scrape(t, metricsAddr)
		return strings.Contains(body, `agent_tokens_total{executor="exec",kind="input"} 1440`) &&
			strings.Contains(body, `agent_tokens_total{executor="exec",kind="output"} 360`)
	})

	// A budget below zero is one clear line, before anything is sent.
	r := runAgent(t, append([]string{"submit", "--prompt", "x", "--max-tokens", "-1"}, cpArgs...)...)
	if r.code != 2 || strings.TrimSpace(r.stderr) != "agent: --max-tokens -1: want 0 (the agent's default) or more" {
		t.Errorf("submit --max-tokens -1: %+v", r)
	}
}

// Through a real CLI, Claude Code against the mock model: a token budget
// smaller than one answer's usage ends the task budget_exceeded after one
// attempt, with the usage Claude Code reported in the control plane's
// view and in tasks show.
func TestE2EBudgetWithClaude(t *testing.T) {
	t.Parallel()
	mock, err := mockmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Close()
	c := startCP(t, freeAddr(t), t.TempDir())
	env := clitest.ClaudeEnv(t, mock, clitest.ClaudeOptions{})
	ag := startProc(t, "agent", env, "run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", t.TempDir(),
		"--executor", "claude", "--executor-bin", clitest.ClaudeBin(t), "--models", "claude-a",
		"--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--on-budget", "fail")
	defer ag.stop()
	id := submitArgs(t, c, "Summarize\nmock: text", "--max-tokens", "10")
	v := c.waitDone(t, id)
	checkOverBudget(t, v, "tokens used, over the budget of 10")
	if u := v.Attempts[0].Usage; u.TotalTokens <= 10 || u.InputTokens == 0 || u.OutputTokens == 0 || v.Result == nil || v.Result.Usage == nil {
		t.Errorf("usage %+v, result %+v", u, v.Result)
	}
	r := runAgent(t, "tasks", "show", id, "--remote", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if !strings.Contains(r.stdout, "; budget 10 tokens\n") || !strings.Contains(r.stdout, " tok  budget_exceeded: ") {
		t.Errorf("tasks show:\n%s", r.stdout)
	}
}

// treeUsage adds up the tokens every task of root's tree spent, as the
// control plane has them, and returns the tree's tasks.
func treeUsage(t *testing.T, c *cp, root string) (int64, []api.TaskView) {
	t.Helper()
	var total int64
	var tasks []api.TaskView
	for ids := []string{root}; len(ids) > 0; ids = ids[1:] {
		v := c.task(t, ids[0])
		total += v.Usage.TotalTokens
		tasks = append(tasks, v)
		ids = append(ids, v.Children...)
	}
	return total, tasks
}

// Issue 34, through the real binary: a task with max_tokens 1000 spent
// 3,600 tokens through three subtasks that each spent 1,200, each with a
// full budget of its own. The tree shares its root's budget: the report
// that takes it past 1000 stops the whole tree, so it spends at most the
// root's budget and one report more (the one that passed it), per task
// running then; the subtasks still queued never run, and the root, which
// would go on waiting, is stopped budget_exceeded through its agent's
// heartbeat.
func TestE2ESubtaskTreeStaysWithinItsRootsTokenBudget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// slots is the agent's --max-concurrent: the root and one subtask
		// at a time, or all of them at once.
		slots string
		// kid is each subtask's prompt after it waits for the go: it
		// spends 1200 in two reports, at once, or waiting between them
		// for a file nobody writes.
		kid string
		// most is the most the tree may spend: the root's budget and one
		// report of each subtask running when the tree passed it.
		most int64
	}{
		{"one subtask at a time", "2", `@usage 600\n@usage 600\n@hang`, 1000 + 600},
		{"all at once", "4", `@usage 600\n@wait-file /nonexistent/agent-test\n@usage 600\n@hang`, 1000 + 3*600},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cpl := startCP(t, freeAddr(t), t.TempDir())
			ag := startAgentProc(t, cpl, t.TempDir(), "--max-concurrent", c.slots, "--kill-grace", "1s", "--on-budget", "fail")
			defer ag.stop()
			// The subtasks spend once the root has submitted all three.
			start := filepath.Join(t.TempDir(), "go")
			kid := "@subtask @wait-file " + start + `\n` + c.kid
			root := submitArgs(t, cpl, "Plan\n"+kid+"\n"+kid+"\n"+kid+"\n@hang", "--max-tokens", "1000")
			testkit.WaitFor(t, "the root to submit its three subtasks", func() bool {
				return len(cpl.task(t, root).Children) == 3
			})
			must(t, os.WriteFile(start, nil, 0o600))

			v := cpl.waitDone(t, root)
			if v.Phase != state.PhaseFailed || len(v.Children) != 3 {
				t.Fatalf("the root: %s (%s), %d subtasks", v.Phase, v.PhaseReason, len(v.Children))
			}
			checkOverBudget(t, v, "the tree of "+root+" used ")
			for _, id := range v.Children {
				cpl.waitPhase(t, id, "ended", terminal)
			}
			total, tasks := treeUsage(t, cpl, root)
			if total > c.most {
				t.Errorf("the tree spent %d tokens, over its root's budget of 1000 by more than a report per running subtask (at most %d)", total, c.most)
			}
			ran := 0
			for _, k := range tasks[1:] {
				if k.Phase != state.PhaseFailed || k.MaxTokens != 1000 {
					t.Errorf("subtask %s: %s (%s), budget %d", k.ID, k.Phase, k.PhaseReason, k.MaxTokens)
				}
				if len(k.Attempts) == 0 {
					if !strings.HasPrefix(k.PhaseReason, "budget_exceeded: the tree of "+root+" used ") {
						t.Errorf("subtask %s, stopped before it ran: %q", k.ID, k.PhaseReason)
					}
					continue
				}
				ran++
				checkOverBudget(t, k, "")
			}
			if c.slots == "2" && ran != 1 {
				t.Errorf("%d subtasks ran, want the one that passed the budget alone", ran)
			}
		})
	}
}
