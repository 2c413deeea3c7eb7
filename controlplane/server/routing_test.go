package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// offering is an agent's capabilities and labels, as its heartbeats and
// claims advertise them.
type offering struct {
	caps   api.Capabilities
	labels map[string]string
}

var (
	codexGPU = offering{api.Capabilities{Executor: "codex", Models: []string{"gpt-5"}, OS: "linux", Arch: "amd64"}, map[string]string{"gpu": "a100"}}
	codexCPU = offering{api.Capabilities{Executor: "codex", Models: []string{"gpt-5-mini"}, OS: "linux", Arch: "arm64"}, map[string]string{"team": "infra"}}
	execGPU  = offering{api.Capabilities{Executor: "exec", OS: "darwin", Arch: "arm64"}, map[string]string{"gpu": "m3"}}
)

// heartbeatOffering has agent heartbeat, advertising o, and an operator
// grant it o's labels: labels route only when a person granted them.
func (e *env) heartbeatOffering(agent string, o offering) {
	e.t.Helper()
	if _, err := e.agent(agent).Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: agent, Capabilities: o.caps, Labels: o.labels}); err != nil {
		e.t.Fatal(err)
	}
	if len(o.labels) > 0 {
		e.grant(agent, o.labels)
	}
}

// grant has an operator grant agent labels.
func (e *env) grant(agent string, labels map[string]string) {
	e.t.Helper()
	if _, err := e.client.LabelAgent(context.Background(), agent, api.LabelsRequest{Set: labels}); err != nil {
		e.t.Fatalf("granting %s labels %v: %v", agent, labels, err)
	}
}

// claimOffering is agent's claim for up to max tasks, advertising o.
func (e *env) claimOffering(agent string, o offering, max int) []api.Claimed {
	e.t.Helper()
	resp, err := e.agent(agent).Claim(context.Background(), api.ClaimRequest{AgentID: agent, Max: max, HealthGrade: health.Available,
		Capabilities: o.caps, Labels: o.labels})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Tasks
}

// submitRequiring submits a task with requirements rs.
func (e *env) submitRequiring(prompt string, rs ...state.Requirement) api.TaskView {
	e.t.Helper()
	v, err := e.client.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: prompt, Requires: rs})
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// The claim grants a task only to an agent that advertises every one of
// its requirements; a task at the head of the queue that a claim cannot
// take does not keep it from one behind that it can; an agent from
// before routing (it advertises nothing) takes only tasks without
// requirements.
func TestClaimGrantsATaskOnlyToAnAgentWithEveryRequirement(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	for _, a := range []struct {
		id string
		o  offering
	}{{"codex-gpu", codexGPU}, {"codex-cpu", codexCPU}, {"exec-gpu", execGPU}} {
		e.heartbeatOffering(a.id, a.o)
	}
	gpuCodex := e.submitRequiring("train it", "executor=codex", "label=gpu")
	clk.advance(time.Millisecond) // oldest first: in this order
	a100 := e.submitRequiring("train it on an a100", "label=gpu=a100", "model=gpt-5", "os=linux", "arch=amd64")
	clk.advance(time.Millisecond)
	arm := e.submitRequiring("build for arm", "arch=arm64", "label=team")
	clk.advance(time.Millisecond)
	plain := e.submit("anyone", "any")

	// An old agent: no capabilities, no labels.
	if got := e.claimOffering("old", offering{}, 10); len(got) != 1 || got[0].Task.ID != plain.ID {
		t.Fatalf("the old agent's claim: %v, want only %s", ids(got), plain.ID)
	}
	if got := e.claimOffering("exec-gpu", execGPU, 10); len(got) != 0 {
		t.Fatalf("exec-gpu claimed %v: it is no codex agent, has no a100 and no team label", ids(got))
	}
	if got := e.claimOffering("codex-cpu", codexCPU, 10); len(got) != 1 || got[0].Task.ID != arm.ID {
		t.Fatalf("codex-cpu's claim: %v, want only %s (behind two it cannot take)", ids(got), arm.ID)
	}
	got := e.claimOffering("codex-gpu", codexGPU, 10)
	if len(got) != 2 || got[0].Task.ID != gpuCodex.ID || got[1].Task.ID != a100.ID {
		t.Fatalf("codex-gpu's claim: %v, want %s and %s", ids(got), gpuCodex.ID, a100.ID)
	}
	if got[0].Task.Requires[0] != "executor=codex" || got[0].Task.Unroutable != "" {
		t.Errorf("the task as granted: requires %v, unroutable %q", got[0].Task.Requires, got[0].Task.Unroutable)
	}
	agents, err := e.client.Agents(context.Background())
	if err != nil || len(agents) != 3 || agents[1].AgentID != "codex-gpu" || agents[1].Executor != "codex" || strings.Join(agents[1].Models, ",") != "gpt-5" ||
		agents[1].OS != "linux" || agents[1].Arch != "amd64" || agents[1].Labels["gpu"] != "a100" {
		t.Fatalf("the agents as listed: %+v %v", agents, err)
	}
}

// Claims waiting for work stand in line: a task only the second in line
// can take is handed past the first, which goes on waiting, and a plain
// task submitted next goes to the first.
func TestAWaitingClaimThatCannotTakeATaskPassesItOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.heartbeatOffering("exec-gpu", execGPU)
	e.heartbeatOffering("codex-gpu", codexGPU)
	wait := func(agent string, o offering) <-chan answer {
		req := waitReq(agent, health.Available, time.Hour)
		req.Capabilities, req.Labels = o.caps, o.labels
		return e.claimAsync(ctx, e.agent(agent), req)
	}
	first := wait("exec-gpu", execGPU)
	e.untilWaiting(1)
	second := wait("codex-gpu", codexGPU)
	e.untilWaiting(2)

	v := e.submitRequiring("train it", "executor=codex", "label=gpu")
	a := <-second
	if a.err != nil || len(a.resp.Tasks) != 1 || a.resp.Tasks[0].Task.ID != v.ID {
		t.Fatalf("codex-gpu's waiting claim: %v %v, want %s", ids(a.resp.Tasks), a.err, v.ID)
	}
	e.untilWaiting(1) // exec-gpu still waits
	plain := e.submit("anyone", "any")
	a = <-first
	if a.err != nil || len(a.resp.Tasks) != 1 || a.resp.Tasks[0].Task.ID != plain.ID {
		t.Fatalf("exec-gpu's waiting claim: %v %v, want %s", ids(a.resp.Tasks), a.err, plain.ID)
	}
}

// A task no online agent can take says so, naming the first requirement
// none meets, or all of them when each is met by some agent but none by
// one; the watchdog sets and clears it as agents come and go; it never
// ends the task, and the queued limit's reason repeats it.
func TestUnroutableIsSetAndClearedAsAgentsComeAndGo(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	look := func(id string) api.TaskView {
		t.Helper()
		clk.advance(watchEvery) // the watchdog looks on the next request
		v, err := e.client.Task(ctx, id)
		must(t, err)
		return v
	}
	codex := e.submitRequiring("review it", "executor=codex")
	if codex.Unroutable != "no agent with executor=codex" {
		t.Fatalf("submitted with no agent online: unroutable %q", codex.Unroutable)
	}
	e.heartbeatOffering("exec-gpu", execGPU)
	clk.advance(time.Millisecond) // oldest first: in this order
	both := e.submitRequiring("train it", "executor=codex", "label=gpu")
	if both.Unroutable != "no agent with executor=codex" {
		t.Fatalf("with exec-gpu online: unroutable %q", both.Unroutable)
	}
	e.heartbeatOffering("codex-cpu", codexCPU)
	if v := look(codex.ID); v.Unroutable != "" || v.Phase != state.PhaseQueued {
		t.Fatalf("with codex-cpu online: %s, unroutable %q; want it routable", v.Phase, v.Unroutable)
	}
	if v := look(both.ID); v.Unroutable != "no agent with all of executor=codex, label=gpu" {
		t.Fatalf("each requirement met by one agent: unroutable %q", v.Unroutable)
	}
	// codex-cpu goes offline; exec-gpu is draining, and counts no more.
	if _, err := e.agent("codex-cpu").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "codex-cpu", State: api.AgentOffline, Capabilities: codexCPU.caps}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.agent("exec-gpu").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "exec-gpu", State: api.AgentDraining, Capabilities: execGPU.caps, Labels: execGPU.labels}); err != nil {
		t.Fatal(err)
	}
	if v := look(both.ID); v.Unroutable != "no agent with executor=codex" {
		t.Fatalf("codex-cpu offline: unroutable %q", v.Unroutable)
	}
	if v := look(codex.ID); v.Unroutable != "no agent with executor=codex" {
		t.Fatalf("codex-cpu offline: unroutable %q", v.Unroutable)
	}
	// An agent that fits claims before the watchdog looks: granted, and
	// no longer unroutable.
	got := e.claimOffering("codex-gpu", codexGPU, 1)
	if len(got) != 1 || got[0].Task.ID != codex.ID || got[0].Task.Unroutable != "" {
		t.Fatalf("codex-gpu's claim: %+v", got)
	}
	if v, err := e.client.Task(ctx, codex.ID); err != nil || v.Unroutable != "" || v.Phase != state.PhaseClaimed {
		t.Fatalf("the task granted: %v %s, unroutable %q", err, v.Phase, v.Unroutable)
	}
	// Silent for over three heartbeat intervals: codex-gpu is offline too.
	clk.advance(time.Hour + time.Minute)
	v := look(both.ID)
	if v.Phase != state.PhaseExpired || !strings.HasSuffix(v.PhaseReason, "; unroutable: no agent with executor=codex") {
		t.Fatalf("past the queued limit: %s (%s)", v.Phase, v.PhaseReason)
	}
}

// Malformed requirements are refused at submit, and malformed
// capabilities in a heartbeat or a claim, each in one line.
func TestMalformedRequirementsAndCapabilitiesAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	for _, c := range []struct {
		r    state.Requirement
		says string
	}{
		{"gpu", "want KEY=VALUE with KEY one of executor, model, repo, os, arch, label"},
		{"colour=blue", "KEY one of executor"},
		{"executor=", "the value is empty"},
		{"model=a b", "holds a space"},
		{"label=", "the value is empty"},
		{"label=-x", "want label=NAME"},
		{"label=gpu=a=b", "want label=NAME"},
		{state.Requirement("os=" + strings.Repeat("x", state.MaxRequirementBytes)), "over 200 bytes"},
	} {
		_, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "p", Requires: []state.Requirement{c.r}})
		if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("requires %q: %v, want a 400 saying %q in one line", c.r, err, c.says)
		}
	}
	many := make([]state.Requirement, state.MaxRequirements+1)
	for i := range many {
		many[i] = "os=linux"
	}
	if _, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "p", Requires: many}); statusOf(err) != http.StatusBadRequest {
		t.Errorf("%d requirements: %v, want 400", len(many), err)
	}
	if _, err := e.agent("a").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a", Capabilities: api.Capabilities{Executor: "co dex"}}); statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "executor") {
		t.Errorf("a heartbeat advertising executor %q: %v, want 400", "co dex", err)
	}
	if _, err := e.agent("a").Claim(ctx, api.ClaimRequest{AgentID: "a", Max: 1, Capabilities: api.Capabilities{Models: []string{""}}}); statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "model") {
		t.Errorf("a claim advertising an empty model: %v, want 400", err)
	}
}
