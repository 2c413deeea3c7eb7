package main

// Subtasks through the real binary: a control plane with a [[delegate]]
// rule, an agent running the sample executor, whose @subtask and
// @wait-subtasks directives run `agent subtask` with the task token the
// agent gave them.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

func TestE2ESubtasks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(t.TempDir(), "cp.toml")
	if err := os.WriteFile(conf, []byte("[[delegate]]\nmax-depth = 1\nmax-children = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCP(t, freeAddr(t), dir, "--config", conf)
	dataDir := t.TempDir()
	ag := startAgentProc(t, c, dataDir, "--max-concurrent", "4")

	parent := submit(t, c, "Plan the release\n@subtask Count the files\\n@progress 2\n@subtask Write the notes\\n@output notes written\n@wait-subtasks")
	failing := submit(t, c, "Check the build\n@subtask Break it\\n@fail quota\n@wait-subtasks")
	nested := submit(t, c, "Go deep\n@subtask Nest\\n@subtask too deep\n@wait-subtasks")

	v := c.waitDone(t, parent)
	if v.Phase != state.PhaseCompleted || len(v.Children) != 2 {
		t.Fatalf("the parent: %s with subtasks %v (%s)", v.Phase, v.Children, v.PhaseReason)
	}
	report, _ := v.Result.Data.(map[string]any)["subtasks"].(string)
	for _, id := range v.Children {
		k := c.task(t, id)
		if k.Phase != state.PhaseCompleted || k.Parent != parent || k.Depth != 1 {
			t.Errorf("subtask %s: %s, parent %q, depth %d", id, k.Phase, k.Parent, k.Depth)
		}
		if !strings.Contains(report, id+"  completed") {
			t.Errorf("the parent's report lacks subtask %s completed:\n%s", id, report)
		}
	}
	if !strings.Contains(report, "Attempt 1/3  completed") || !strings.Contains(report, "result: done: Count the files") {
		t.Errorf("the report holds no result or timeline:\n%s", report)
	}

	v = c.waitDone(t, failing)
	if v.Phase == state.PhaseCompleted || len(v.Children) != 1 {
		t.Errorf("a parent whose subtask failed: %s, subtasks %v", v.Phase, v.Children)
	}
	if a := v.Attempts[len(v.Attempts)-1]; a.Error == nil || !strings.Contains(a.Error.Message, "1 of 1 subtasks did not complete") {
		t.Errorf("the parent's error: %+v", a.Error)
	}

	v = c.waitDone(t, nested)
	if v.Phase == state.PhaseCompleted || len(v.Children) != 1 {
		t.Fatalf("a parent whose subtask nested too deep: %s, subtasks %v", v.Phase, v.Children)
	}
	k := c.waitDone(t, v.Children[0])
	if a := k.Attempts[len(k.Attempts)-1]; k.Phase == state.PhaseCompleted || a.Error == nil ||
		!strings.Contains(a.Error.Message, "delegation refused: depth 2 is past max-depth 1") {
		t.Errorf("the subtask that nested too deep: %s, %+v", k.Phase, a.Error)
	}

	// tasks show draws the tree.
	r := runAgent(t, "tasks", "show", parent, "--remote", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if !strings.Contains(r.stdout, "subtasks:") || strings.Count(r.stdout, "completed  ") < 2 {
		t.Errorf("tasks show of the parent:\n%s", r.stdout)
	}
	r = runAgent(t, "tasks", "show", k.ID, "--remote", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if !strings.Contains(r.stdout, "parent:   "+nested+" (depth 1)") {
		t.Errorf("tasks show of a subtask:\n%s", r.stdout)
	}

	if code := ag.stop(); code != 0 {
		t.Errorf("agent exit %d", code)
	}
	// The task token is in no log: the agent's, the control plane's, the
	// tasks' events.
	for name, text := range map[string]string{"agent": ag.output(), "control plane": c.output()} {
		if strings.Contains(text, "tt_") {
			t.Errorf("the %s's log holds a task token", name)
		}
	}
	for _, id := range []string{parent, failing, nested} {
		for _, e := range c.events(t, id) {
			if strings.Contains(string(e.Payload), "tt_") {
				t.Errorf("task %s's events hold a task token: %s", id, e.Payload)
			}
		}
	}
}

// Outside a task, agent subtask says so in one line.
func TestSubtaskOutsideATask(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"subtask", "ls"}, {"subtask", "submit", "x"}, {"subtask", "wait"}, {"subtask", "cancel", "t-1"}} {
		r := runAgentEnv(t, []string{"AGENT_TASK_TOKEN="}, args...)
		wantOneLineError(t, r, 1, "no task token here")
	}
	// A requirement is checked before anything is asked.
	r := runAgentEnv(t, []string{"AGENT_TASK_TOKEN="}, "subtask", "submit", "--require", "colour=blue", "x")
	wantOneLineError(t, r, 2, "--require: ")
}

// A mistake in a [[delegate]] table is one line naming the file's line,
// exit 2, before the control plane listens.
func TestServeRefusesDelegateMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ name, file, want string }{
		{"not a label", "[[delegate]]\nparent = [\"planner\"]\n", `cp.toml:2: [[delegate]] parent: "planner": want KEY=VALUE`},
		{"bad label key", "[[delegate]]\nchild = [\"a b=c\"]\n", `cp.toml:2: [[delegate]] child: label key "a b"`},
		{"depth not a number", "[[delegate]]\nmax-depth = \"two\"\n", `cp.toml:2: delegate.max-depth: want a whole number from 1`},
		{"zero children", "[[delegate]]\nmax-children = 0\n", `cp.toml:2: delegate.max-children: want a whole number from 1`},
		{"unknown key", "[[delegate]]\nfrom = [\"a=b\"]\n", `cp.toml:2: unknown key "from" in [[delegate]]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "cp.toml")
			must(t, os.WriteFile(cfg, []byte(c.file), 0o600))
			r := runAgent(t, "controlplane", "serve", "--config", cfg, "--data-dir", filepath.Join(dir, "cp"), "--addr", freeAddr(t))
			wantOneLineError(t, r, 2, c.want)
		})
	}
}

// A person cancels a parent whose subtask runs: both end cancelled, the
// subtask's process stopped by its agent, from the one request.
func TestE2ECancelAParentCancelsItsSubtasks(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	startAgentProc(t, c, t.TempDir(), "--max-concurrent", "3")
	parent := submit(t, c, "Supervise\n@subtask Work forever\\n@output working\\n@hang\n@subtask Work forever too\\n@hang\n@wait-subtasks")
	var kids []string
	testkit.WaitFor(t, "both subtasks to run", func() bool {
		v := c.task(t, parent)
		running := 0
		for _, id := range v.Children {
			// The parent names a subtask a moment before it is stored.
			if k, err := c.client.Task(context.Background(), id); err == nil && k.Phase == state.PhaseTurnStarted {
				running++
			}
		}
		kids = v.Children
		return running == 2
	})
	r := runAgent(t, "tasks", "cancel", parent, "--control-plane", c.url(), "--token-file", c.operatorFile)
	if r.code != 0 {
		t.Fatalf("tasks cancel: %+v", r)
	}
	for _, id := range append([]string{parent}, kids...) {
		if v := c.waitDone(t, id); v.Phase != state.PhaseCancelled {
			t.Errorf("task %s after its parent's cancel: %s (%s)", id, v.Phase, v.PhaseReason)
		}
	}
}

// With no [[delegate]] table the default rules go by agent type: agent
// subtask allowed, inside a task, lists what it may delegate to (a
// coder: explorers only), as tasks show does, locally and remotely; an
// explorer is a leaf, whose executor is offered no subtask command (no
// task token, no agent binary).
func TestE2ESubtaskAllowedByType(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	submitTyped := func(typ, prompt string) string {
		r := runAgent(t, "submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--label", "type="+typ, "--prompt", prompt)
		if r.code != 0 {
			t.Fatalf("submit: %+v", r)
		}
		return strings.TrimSpace(r.stdout)
	}
	coder := submitTyped("coder", `@sh "$AGENT_BIN" subtask allowed`)
	explorer := submitTyped("explorer", `@sh [ -z "$AGENT_TASK_TOKEN" ] && [ -z "$AGENT_BIN" ] && echo no subtask command offered`)
	for _, id := range []string{coder, explorer} {
		if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
			t.Fatalf("task %s: %s (%s)", id, v.Phase, v.PhaseReason)
		}
	}
	logs := runAgent(t, "tasks", "logs", coder, "--data-dir", dataDir).stdout
	for _, want := range []string{"task " + coder + " (type coder, depth 0) may delegate to:", "type=explorer  depth 1 of 2, 0 of 8 subtasks submitted"} {
		if !strings.Contains(logs, want) {
			t.Errorf("agent subtask allowed in the coder's task did not say %q:\n%s", want, logs)
		}
	}
	if logs := runAgent(t, "tasks", "logs", explorer, "--data-dir", dataDir).stdout; !strings.Contains(logs, "no subtask command offered") {
		t.Errorf("the explorer's executor was offered the subtask command:\n%s", logs)
	}
	for id, want := range map[string]string{coder: "delegate: type=explorer  depth 1 of 2, 0 of 8 subtasks submitted",
		explorer: "delegate: nothing: its type, explorer, is a leaf; it is offered no subtask command"} {
		for _, args := range [][]string{{"--data-dir", dataDir}, {"--remote", "--control-plane", c.url(), "--token-file", c.operatorFile}} {
			if r := runAgent(t, append([]string{"tasks", "show", id}, args...)...); !strings.Contains(r.stdout, want) {
				t.Errorf("tasks show %s %v lacks %q:\n%s", id, args, want, r.stdout)
			}
		}
	}
}

// A parent waiting on its subtasks hears of each retry one schedules, as
// it comes: agent subtask wait says it on stderr, which the sample's
// executor passes to the parent's log.
func TestE2ESubtaskWaitHearsOfRetries(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--max-concurrent", "2")
	parent := submit(t, c, "Plan\n@subtask Flaky\\n@fail rate_limit\\n@output ok\n@wait-subtasks")
	v := c.waitDone(t, parent)
	if v.Phase != state.PhaseCompleted || len(v.Children) != 1 {
		t.Fatalf("the parent: %s, subtasks %v (%s)", v.Phase, v.Children, v.PhaseReason)
	}
	kid := v.Children[0]
	logs := runAgent(t, "tasks", "logs", parent, "--data-dir", dataDir).stdout
	want := "subtask " + kid + " retrying: attempt 2/3 with model-b in 300ms, after rate_limit: 429 Too Many Requests"
	if strings.Count(logs, want) != 1 {
		t.Errorf("the parent's log does not say once %q:\n%s", want, logs)
	}
}
