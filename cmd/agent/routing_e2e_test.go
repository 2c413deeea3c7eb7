package main

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// execSample is an exec executor that runs the sample executor: an agent
// of kind exec that behaves as the sample one does.
func execSample() []string {
	return []string{"--executor", "exec", "--executor-command", os.Args[0] + " sample-executor"}
}

// label has an operator grant agent labels with agent agents label.
func label(t *testing.T, c *cp, agent string, labels ...string) {
	t.Helper()
	r := runAgent(t, append([]string{"agents", "label", agent, "--control-plane", c.url(), "--token-file", c.operatorFile}, labels...)...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, agent+": labels ") {
		t.Fatalf("agents label %s %v: %+v", agent, labels, r)
	}
}

// Routing by capability, through the real binary: two agents advertise
// different executors, an operator grants them labels, and tasks with
// --require reach the one that has them; a task no agent fits says so in
// tasks show, and in submit --wait, until an agent with the label starts,
// is granted it, and takes it.
func TestE2ETasksReachTheAgentWithTheirRequirements(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	startAgentProc(t, c, t.TempDir(), "--agent-id", "sample-gpu", "--label", "gpu=a100")
	startAgentProc(t, c, t.TempDir(), append(execSample(), "--agent-id", "exec-cpu", "--label", "team=infra")...)
	testkit.WaitFor(t, "both agents to advertise what they have", func() bool {
		agents, err := c.client.Agents(context.Background())
		return err == nil && len(agents) == 2 && agents[0].Executor == "exec" && agents[1].Executor == "sample" &&
			agents[1].Labels["gpu"] == "a100" && strings.Join(agents[1].Models, ",") == "model-a,model-b" && agents[1].OS != ""
	})
	label(t, c, "sample-gpu", "gpu=a100")
	label(t, c, "exec-cpu", "team=infra")
	r := runAgent(t, "agents", "ls", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if r.code != 0 || agentRows(t, r.stdout)["sample-gpu"][9] != "gpu=a100" {
		t.Fatalf("agents ls: %+v", r)
	}

	submitRequiring := func(prompt string, requires ...string) string {
		t.Helper()
		args := []string{"submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", prompt}
		for _, req := range requires {
			args = append(args, "--require", req)
		}
		r := runAgent(t, args...)
		if r.code != 0 {
			t.Fatalf("submit %v: %+v", requires, r)
		}
		return strings.TrimSpace(r.stdout)
	}
	want := map[string]string{
		submitRequiring("@output on exec", "executor=exec"):                      "exec-cpu",
		submitRequiring("@output on a gpu", "label=gpu"):                         "sample-gpu",
		submitRequiring("@output on an a100", "label=gpu=a100", "model=model-b"): "sample-gpu",
		submitRequiring("@output infra", "label=team=infra", "os="+runtime.GOOS): "exec-cpu",
		submitRequiring("@output anywhere"):                                      "",
	}
	for id, agent := range want {
		v := c.waitDone(t, id)
		if v.Phase != state.PhaseCompleted || v.Lease == nil || agent != "" && v.Lease.AgentID != agent {
			t.Errorf("task %s (requires %v): %s on %v, want completed on %q", id, v.Requires, v.Phase, v.Lease, agent)
		}
		if slices.Contains(v.Requires, "model=model-b") && (len(v.Attempts) == 0 || v.Attempts[0].Model != "model-b") {
			t.Errorf("task %s requires model-b: its attempts %+v", id, v.Attempts)
		}
	}

	// No agent has both: the task waits (--wait-queued: submit --wait
	// alone would end at once, exit 6), and says why.
	waiting := startProc(t, "submit-wait", nil, "submit", "--control-plane", c.url(), "--token-file", c.operatorFile,
		"--prompt", "@output both", "--require", "executor=exec", "--require", "label=gpu", "--wait", "--wait-queued")
	testkit.WaitFor(t, "submit --wait to say the task is unroutable", func() bool {
		return strings.Contains(waiting.output(), "queued  unroutable: no agent with all of executor=exec, label=gpu")
	})
	id, _, _ := strings.Cut(waiting.output(), " ")
	show := runAgent(t, "tasks", "show", id, "--remote", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if show.code != 0 || !strings.Contains(show.stdout, "requires: executor=exec, label=gpu\n") ||
		!strings.Contains(show.stdout, "routing:  unroutable: no agent with all of executor=exec, label=gpu\n") {
		t.Fatalf("tasks show of the unroutable task: %+v", show)
	}
	ls := runAgent(t, "tasks", "ls", "--remote", "--phase", "queued", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if ls.code != 0 || !strings.Contains(ls.stdout, "unroutable: no agent with all of executor=exec, label=gpu") {
		t.Fatalf("tasks ls of the unroutable task: %+v", ls)
	}

	// An agent with both starts, is granted the label, and takes it.
	startAgentProc(t, c, t.TempDir(), append(execSample(), "--agent-id", "exec-gpu", "--label", "gpu=h100")...)
	testkit.WaitFor(t, "exec-gpu to enrol", func() bool {
		agents, err := c.client.Agents(context.Background())
		return err == nil && len(agents) == 3
	})
	label(t, c, "exec-gpu", "gpu=h100")
	if code := waiting.wait(); code != 0 {
		t.Fatalf("submit --wait exited %d:\n%s", code, waiting.output())
	}
	v := c.task(t, id)
	if v.Phase != state.PhaseCompleted || v.Lease == nil || v.Lease.AgentID != "exec-gpu" || v.Unroutable != "" {
		t.Fatalf("the task once exec-gpu started: %s on %+v, unroutable %q", v.Phase, v.Lease, v.Unroutable)
	}
}

// A --require with an unknown key, or malformed, is a one-line usage
// error that lists the keys; nothing is submitted.
func TestSubmitRefusesABadRequire(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ req, says string }{
		{"gpu=yes", "want KEY=VALUE with KEY one of executor, model, repo, os, arch, label"},
		{"executor", "KEY one of executor"},
		{"os=", "the value is empty"},
		{"label=gpu=a=b", "want label=NAME"},
	} {
		r := runAgent(t, "submit", "--control-plane", "http://127.0.0.1:1", "--token-file", os.DevNull, "--prompt", "p", "--require", c.req)
		wantOneLineError(t, r, 2, "--require: ")
		if !strings.Contains(r.stderr, c.says) {
			t.Errorf("--require %s: %q, want it to say %q", c.req, r.stderr, c.says)
		}
	}
}

// Issue 34, through the real binary: a rogue agent enrolled with the
// registration secret says it is tier=secure; an operator granted the
// label to another. The task a person routed to label=tier=secure runs on
// the agent the operator labelled, never on the rogue, which agents ls
// shows as saying so of itself; taken back (tier-), the label routes
// nothing more.
func TestE2EARogueAgentIsNotGrantedALabelItSaysItHas(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	startAgentProc(t, c, t.TempDir(), "--agent-id", "rogue", "--label", "tier=secure")
	testkit.WaitFor(t, "the rogue to enrol", func() bool {
		agents, err := c.client.Agents(context.Background())
		return err == nil && len(agents) == 1
	})
	id := submitArgs(t, c, "@output deployed with the production keys", "--require", "label=tier=secure")
	startAgentProc(t, c, t.TempDir(), "--agent-id", "vault")
	testkit.WaitFor(t, "the vault to enrol", func() bool {
		agents, err := c.client.Agents(context.Background())
		return err == nil && len(agents) == 2
	})
	if v := c.task(t, id); v.Phase != state.PhaseQueued || v.Unroutable != "no agent with label=tier=secure" {
		t.Fatalf("the secure task before anyone was granted the label: %s, unroutable %q", v.Phase, v.Unroutable)
	}
	label(t, c, "vault", "tier=secure", "zone=eu")
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || v.Lease == nil || v.Lease.AgentID != "vault" {
		t.Fatalf("the secure task: %s on %+v, want completed on vault", v.Phase, v.Lease)
	}
	rows := agentRows(t, runAgent(t, "agents", "ls", "--control-plane", c.url(), "--token-file", c.operatorFile).stdout)
	if r := rows["rogue"]; r[9] != "-" || r[10] != "tier=secure" {
		t.Errorf("the rogue as listed: labels %q, self-described %q", r[9], r[10])
	}
	if r := rows["vault"]; r[9] != "tier=secure,zone=eu" || r[10] != "-" {
		t.Errorf("the vault as listed: labels %q, self-described %q", r[9], r[10])
	}

	r := runAgent(t, "agents", "label", "vault", "tier-", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if r.code != 0 || r.stdout != "vault: labels zone=eu\n" {
		t.Fatalf("agents label vault tier-: %+v", r)
	}
	again := submitArgs(t, c, "@output again", "--require", "label=tier=secure")
	testkit.WaitFor(t, "the task to say it is unroutable", func() bool {
		v := c.task(t, again)
		return v.Phase == state.PhaseQueued && v.Unroutable == "no agent with label=tier=secure"
	})
	r = runAgent(t, "agents", "label", "nobody", "tier=secure", "--control-plane", c.url(), "--token-file", c.operatorFile)
	wantOneLineError(t, r, 1, "agent nobody is not registered")
	r = runAgent(t, "agents", "label", "vault", "tier", "--control-plane", c.url(), "--token-file", c.operatorFile)
	wantOneLineError(t, r, 2, `"tier": want KEY=VALUE to grant a label, or KEY- to take one back`)
}
