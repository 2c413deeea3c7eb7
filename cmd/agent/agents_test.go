package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// agent agents ls shows each agent's state, health, the CLI it runs and
// its models (beside its health, where a narrow terminal still shows
// them), last heartbeat, the tasks it runs and the repositories it
// serves, and the replica its last heartbeat reached, a line each under
// a header; --json the control plane's whole
// view; with no agent it says so.
func TestAgentsLs(t *testing.T) {
	t.Parallel()
	// Agents go offline after three heartbeat intervals of silence: 3 s
	// intervals leave agents ls seconds to start and answer on a loaded
	// machine while the agents it shows are still online (with 300 ms,
	// a slow start showed them offline).
	c := startCP(t, freeAddr(t), t.TempDir(), "--heartbeat-interval", "3s")
	ls := func(extra ...string) result {
		t.Helper()
		r := runAgent(t, append([]string{"agents", "ls", "--control-plane", c.url(), "--token-file", c.operatorFile}, extra...)...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("agents ls %v: %+v", extra, r)
		}
		return r
	}
	if r := ls(); r.stdout != "no agent has been heard from at "+c.url()+"\n" {
		t.Errorf("agents ls with no agent: %q", r.stdout)
	}
	if r := ls("--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("agents ls --json with no agent: %q, want []", r.stdout)
	}

	reg, err := os.ReadFile(c.tokenFile)
	must(t, err)
	clients := map[string]*controlplane.Client{} // each agent keeps the token it registered for
	beat := func(req api.HeartbeatRequest) {
		t.Helper()
		ac := clients[req.AgentID]
		if ac == nil {
			ac, err = controlplane.NewClient(c.url(), strings.TrimSpace(string(reg)), controlplane.ClientOptions{AgentID: req.AgentID, Tries: 1})
			must(t, err)
			clients[req.AgentID] = ac
		}
		if _, err := ac.Heartbeat(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	beat(api.HeartbeatRequest{AgentID: "vm-1", State: api.AgentRunning, Health: api.Health{Grade: "available"},
		Capacity: api.Capacity{Max: 2, Running: 1}, Running: []api.RunningTask{{TaskID: "t-0123456789", Attempt: 2, Phase: state.PhaseTurnStarted}},
		Repos: []string{"app", "site"}, Labels: map[string]string{"team": "infra", "gpu": "yes"},
		Capabilities: api.Capabilities{Executor: "codex", Models: []string{"gpt-5", "gpt-5-mini"}, OS: "linux", Arch: "arm64"}})
	beat(api.HeartbeatRequest{AgentID: "vm-2", State: api.AgentDraining, Health: api.Health{Grade: "degraded"}, Capacity: api.Capacity{Max: 4}})

	rows := agentRows(t, ls().stdout)
	want := map[string][]string{
		"vm-1": {"vm-1", "running", "available", "codex", "gpt-5,gpt-5-mini", "*", "1 of 2", "t-0123456789 (attempt 2)", "app,site", "-", "gpu=yes,team=infra", "linux/arm64", c.addr},
		"vm-2": {"vm-2", "draining", "degraded", "-", "-", "*", "0 of 4", "-", "-", "-", "-", "-", c.addr},
	}
	for id, w := range want {
		if got := rows[id]; !sameCells(got, w) {
			t.Errorf("agents ls, %s: %q, want %q", id, got, w)
		}
	}

	var views []api.AgentView
	must(t, json.Unmarshal([]byte(ls("--json").stdout), &views))
	if len(views) != 2 {
		t.Fatalf("agents ls --json: %d agents, want 2", len(views))
	}
	for _, v := range views {
		if v.AgentID == "vm-1" && (v.State != api.AgentRunning || len(v.Running) != 1 || v.Running[0].Attempt != 2 || strings.Join(v.Repos, ",") != "app,site" || v.Labels["team"] != "infra") {
			t.Errorf("agents ls --json, vm-1: %+v", v)
		}
	}

	// Silent for three heartbeat intervals, vm-2 is offline, whatever it
	// said last; vm-1 keeps beating meanwhile.
	testkit.WaitFor(t, "vm-2 to be offline", func() bool {
		beat(api.HeartbeatRequest{AgentID: "vm-1", State: api.AgentRunning, Health: api.Health{Grade: "available"}, Capacity: api.Capacity{Max: 2}})
		return agentRows(t, ls().stdout)["vm-2"][1] == "offline"
	})
	if got := agentRows(t, ls().stdout)["vm-1"]; got[1] != "running" {
		t.Errorf("vm-1, beating, is %q", got[1])
	}
}

// agentRows parses agents ls's table: cells by agent, the header checked.
func agentRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := []string{"AGENT", "STATE", "HEALTH", "EXECUTOR", "MODELS", "HEARTBEAT", "RUNNING", "TASKS", "REPOS", "LABELS", "SELF-DESCRIBED", "PLATFORM", "REPLICA"}
	if got := strings.Fields(lines[0]); !sameCells(got, header) {
		t.Fatalf("agents ls header %q, want %q", got, header)
	}
	// Columns start where the header's names do.
	starts := make([]int, len(header))
	for i, h := range header {
		starts[i] = strings.Index(lines[0], h)
	}
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		cells := make([]string, len(header))
		for i, s := range starts {
			end := len(l)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(l))
			}
			cells[i] = strings.TrimSpace(l[min(s, len(l)):end])
		}
		rows[cells[0]] = cells
	}
	return rows
}

// sameCells compares a row with a wanted one, "*" matching any cell.
func sameCells(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if want[i] != "*" && got[i] != want[i] {
			return false
		}
	}
	return true
}

// An agent run says its labels in its heartbeats; a label that is not
// KEY=VALUE, or whose key is not a simple name, is a usage error.
func TestAgentLabels(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	startAgentProc(t, c, t.TempDir(), "--label", "team=infra", "--label", "site=lyon 2")
	testkit.WaitFor(t, "the agent's labels at the control plane", func() bool {
		agents, err := c.client.Agents(context.Background())
		return err == nil && len(agents) == 1 && agents[0].Labels["team"] == "infra" && agents[0].Labels["site"] == "lyon 2"
	})
	for _, bad := range []struct{ label, says string }{
		{"team", `--label "team": want KEY=VALUE`},
		{"../x=1", `--label: label key "../x"`},
	} {
		r := runAgent(t, "run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", t.TempDir(), "--executor", "sample", "--label", bad.label)
		wantOneLineError(t, r, 2, bad.says)
	}
}
