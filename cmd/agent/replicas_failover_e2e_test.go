package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/state"
)

// agentView is agent id as c's control plane shows it, zero when it does
// not (yet).
func agentView(t *testing.T, c *cp, id string) api.AgentView {
	t.Helper()
	agents, err := c.client.Agents(context.Background())
	if err != nil {
		return api.AgentView{}
	}
	for _, a := range agents {
		if a.AgentID == id {
			return a
		}
	}
	return api.AgentView{}
}

// TestE2EAgentFailsOverBetweenReplicasOnPostgres gives one agent both
// replicas of a control plane on PostgreSQL (--control-plane A,B) and
// kills the one it talks to (A, SIGKILL) while it runs tasks: the agent
// moves to B (its heartbeats, its claims' long poll, its events), agents
// ls shows it at B, and every task completes in one attempt, run once,
// its events stored once each, nothing dead; a task submitted after the
// kill is claimed through B and completes too.
func TestE2EAgentFailsOverBetweenReplicasOnPostgres(t *testing.T) {
	dsn := pgtest.Start(t)
	a := startCP(t, freeAddr(t), t.TempDir(), "--store", dsn, "--replica-name", "replica-a")
	shared := []string{"--store", dsn, "--token-file", a.tokenFile, "--operator-token-file", a.operatorFile}
	b := startCP(t, freeAddr(t), t.TempDir(), append(shared, "--replica-name", "replica-b")...)

	markDir, dataDir := t.TempDir(), t.TempDir()
	const agentID = "failover-agent"
	ag := startProc(t, "agent", nil, "run", "--control-plane", a.url()+","+b.url(), "--token-file", a.tokenFile, "--data-dir", dataDir,
		"--agent-id", agentID, "--executor", "sample", "--heartbeat-interval", "300ms", "--max-concurrent", "2", "--isolation-write", markDir)
	const tasks = 8
	ids, marks := submitMarked(t, a, markDir, tasks)
	testkit.WaitFor(t, "the agent to run tasks through replica A", func() bool {
		v := agentView(t, a, agentID)
		return v.Replica == "replica-a" && v.Capacity.Running > 0
	})
	ended := countEnded(a, ids)
	if ended == tasks {
		t.Fatal("every task ended before the replica was killed: nothing was mid-task")
	}
	a.kill()

	testkit.WaitFor(t, "the agent to move to replica B", func() bool {
		return agentView(t, b, agentID).Replica == "replica-b"
	})
	if !strings.Contains(ag.output(), "control plane replica did not answer; moved to the next") {
		t.Errorf("the agent did not say it moved:\n%s", tail(ag.output(), 3000))
	}
	r := runAgent(t, "agents", "ls", "--control-plane", b.url(), "--token-file", b.operatorFile)
	if r.code != 0 || !strings.Contains(r.stdout, "REPLICA") || !strings.Contains(r.stdout, "replica-b") {
		t.Errorf("agents ls does not show the agent at replica-b: %+v", r)
	}
	late := filepath.Join(markDir, "late")
	ids, marks = append(ids, submit(t, b, markedPrompt(tasks, late))), append(marks, late)
	for _, id := range ids {
		if v := b.waitDone(t, id); v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
			t.Errorf("task %s ended %s after %d attempts, want completed after 1", id, v.Phase, len(v.Attempts))
		}
	}
	events := checkRanOnce(t, b, ids, marks, []string{dataDir})
	t.Logf("FAULT | 1 agent given 2 replicas on PostgreSQL, the one it talked to SIGKILLed with %d of %d tasks ended | moved to the other; all %d completed in 1 attempt, run once, %d events stored once each, 0 dead |",
		ended, tasks, tasks+1, events)
}
