package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/sample"
	"github.com/edgeagent/agent/state"
)

// TestMain lets the test binary be the sample executor, and checks that no
// goroutine outlives the tests.
func TestMain(m *testing.M) {
	keeper.Main() // attempts run under a keeper: this test binary is it
	if os.Getenv("AGENT_PKG_SAMPLE") == "1" {
		os.Exit(sample.Main(os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fixture is a reference control plane on loopback and an agent config
// running the sample executor.
func fixture(t *testing.T) (*controlplane.Client, Config) {
	t.Helper()
	cp := servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: 100 * time.Millisecond}})
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_PKG_SAMPLE=1", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	return cp.Operator, Config{ControlPlane: cp.URL, Token: servertest.RegistrationToken, DataDir: t.TempDir(), Executor: exe,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, Logger: quiet()}
}

func waitTerminal(t *testing.T, c *controlplane.Client, id string) api.TaskView {
	t.Helper()
	var v api.TaskView
	testkit.WaitFor(t, "task "+id+" to end", func() bool {
		var err error
		v, err = c.Task(context.Background(), id)
		return err == nil && v.Phase.Terminal()
	})
	return v
}

// TestRunStopsCleanly runs a task, stops the agent, and leaves goleak to
// find any goroutine still running.
func TestRunStopsCleanly(t *testing.T) {
	t.Parallel()
	client, cfg := fixture(t)
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	v, err := client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "fix it"})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitTerminal(t, client, v.ID); got.Phase != state.PhaseCompleted {
		t.Errorf("phase %s", got.Phase)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	snap, err := outbox.Inspect(datadir.Layout{Dir: cfg.DataDir}.Outbox())
	if err != nil || snap.Stats.Pending != 0 {
		t.Errorf("after a clean stop: %v %+v", err, snap.Stats)
	}
}

// TestStopThenStartTakesTheTaskUp stops the agent while a task waits,
// having done nothing: after the grace its attempt ends agent_shutdown,
// the next one waits for the agent's next run (the control plane hears of
// both in the final flush), and the next run takes it up and completes it.
func TestStopThenStartTakesTheTaskUp(t *testing.T) {
	t.Parallel()
	client, cfg := fixture(t)
	cfg.ShutdownGrace = 200 * time.Millisecond
	a, _ := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	gate := filepath.Join(t.TempDir(), "go-on")
	v, _ := client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "@wait-file " + gate})
	testkit.WaitFor(t, "the task to start its turn", func() bool {
		got, _ := client.Task(ctx, v.ID)
		return got.Phase == state.PhaseTurnStarted
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	got, err := client.Task(context.Background(), v.ID)
	if err != nil || got.Phase != state.PhaseExecutorStarting || len(got.Attempts) != 2 || got.Attempts[0].Error.Code != state.CodeAgentShutdown ||
		got.Attempts[0].Retry.Decision != state.DecisionRetried || got.Attempts[1].Status != state.AttemptPending {
		t.Fatalf("after the stop: %s %+v (%v)", got.Phase, got.Attempts, err)
	}

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := New(cfg)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() { errc <- b.Run(ctx) }()
	got = waitTerminal(t, client, v.ID)
	if got.Phase != state.PhaseCompleted || len(got.Attempts) != 2 {
		t.Errorf("after the next run: %s with %d attempts", got.Phase, len(got.Attempts))
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	t.Parallel()
	_, cfg := fixture(t)
	for name, mutate := range map[string]func(*Config){
		"no URL":      func(c *Config) { c.ControlPlane = "" },
		"plain http":  func(c *Config) { c.ControlPlane = "http://cp.example.com" },
		"no data dir": func(c *Config) { c.DataDir = "" },
		"no executor": func(c *Config) { c.Executor = nil },
		"no token":    func(c *Config) { c.Token = " " },
	} {
		c := cfg
		mutate(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRecordKeys(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 12, 0, 0, 5, time.UTC)
	cases := map[string]runner.Report{
		"t-1:phase:claimed:2026-11-21T12:00:00.000000005Z":      {At: at, Payload: state.PhaseEvent{Phase: state.PhaseClaimed}},
		"t-1:complete:completed:2026-11-21T12:00:00.000000005Z": {At: at, Payload: state.CompleteEvent{Status: state.PhaseCompleted}},
		"": {At: at, Payload: state.LogEvent{}},
	}
	for want, r := range cases {
		if got := recordKey("t-1", r); got != want {
			t.Errorf("%s: %q, want %q", r.Kind(), got, want)
		}
	}
}

// TestMissingExecutorClaimsNothing: an agent whose executor cannot start
// is unavailable from its first heartbeat and leaves the work queued.
func TestMissingExecutorClaimsNothing(t *testing.T) {
	t.Parallel()
	client, cfg := fixture(t)
	cfg.Executor, _ = exec.New(exec.Config{Argv: []string{"/nonexistent/codex"}})
	a, _ := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	v, _ := client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "fix it"})
	var seen time.Time
	testkit.WaitFor(t, "the agent to heartbeat unavailable", func() bool {
		agents, _ := client.Agents(ctx)
		if len(agents) == 1 && agents[0].Health.Grade == "unavailable" {
			seen = agents[0].LastHeartbeat
			return true
		}
		return false
	})
	// Several heartbeats more, each a chance to claim.
	for range 3 {
		testkit.WaitFor(t, "the next heartbeat", func() bool {
			agents, _ := client.Agents(ctx)
			if len(agents) == 1 && agents[0].LastHeartbeat.After(seen) {
				seen = agents[0].LastHeartbeat
				return true
			}
			return false
		})
	}
	if got, _ := client.Task(ctx, v.ID); got.Phase != state.PhaseQueued {
		t.Errorf("an agent with a missing executor took the task: %s", got.Phase)
	}
	h, err := datadir.ReadHealth(cfg.DataDir)
	if err != nil || h.Grade != "unavailable" || !strings.Contains(h.Reason, "/nonexistent/codex") {
		t.Errorf("health file: %v %+v", err, h)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// A crash right after a claim leaves a task claimed with no attempt: the
// next start resumes it (it used to crash on it, again and again).
func TestRestartAfterACrashRightAfterAClaim(t *testing.T) {
	t.Parallel()
	client, cfg := fixture(t)
	v, err := client.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "@output hello"})
	if err != nil {
		t.Fatal(err)
	}
	// It registered and kept its token, as an agent does before it claims.
	crashed, err := controlplane.NewClient(cfg.ControlPlane, cfg.Token, controlplane.ClientOptions{AgentID: "vm-crashed",
		SaveAgentToken: func(tok string) error {
			return os.WriteFile(datadir.Layout{Dir: cfg.DataDir}.AgentToken(), []byte(tok+"\n"), 0o600)
		}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := crashed.Claim(context.Background(), api.ClaimRequest{AgentID: "vm-crashed", Max: 1, HealthGrade: "available"})
	if err != nil || len(claimed.Tasks) != 1 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	// What the crashed agent had saved: the claimed task, nothing more.
	task := claimed.Tasks[0].Task
	lease := claimed.Tasks[0].Lease
	task.Lease = &lease
	store, err := state.OpenStore(datadir.Layout{Dir: cfg.DataDir}.Tasks())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(&task); err != nil {
		t.Fatal(err)
	}
	cfg.AgentID = "vm-crashed"
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	got := waitTerminal(t, client, v.ID)
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got.Phase != state.PhaseCompleted || len(got.Attempts) != 1 {
		t.Fatalf("task %s with %d attempts, want completed with one", got.Phase, len(got.Attempts))
	}
}

// A data directory others could write to is refused, with the fix.
func TestDataDirectoryWritableByOthersIsRefused(t *testing.T) {
	t.Parallel()
	_, cfg := fixture(t)
	if err := os.Chmod(cfg.DataDir, 0o777); err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "writable by others") || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("Run on a world-writable data directory: %v", err)
	}
}

func TestHeartbeatIntervalFromTheControlPlaneIsClamped(t *testing.T) {
	t.Parallel()
	h := &heartbeat{base: 10 * time.Second}
	for _, c := range []struct {
		seconds float64
		want    time.Duration
	}{
		{10, 10 * time.Second},
		{0.000001, time.Second},
		{1e9, 5 * time.Minute},
		{0, 10 * time.Second},
		{-3, 10 * time.Second},
	} {
		if got, _ := h.clampInterval(c.seconds); got != c.want {
			t.Errorf("clampInterval(%v) = %v, want %v", c.seconds, got, c.want)
		}
	}
	fast := &heartbeat{base: 100 * time.Millisecond}
	if got, _ := fast.clampInterval(0.1); got != 100*time.Millisecond {
		t.Errorf("an agent set to beat fast keeps its own floor: %v", got)
	}
}

// An agent whose lock file is removed under it stops, naming it, rather
// than share its outbox with a second agent.
func TestAgentStopsWhenItsLockIsRemoved(t *testing.T) {
	t.Parallel()
	_, cfg := fixture(t)
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Run(context.Background()) }()
	lock := filepath.Join(cfg.DataDir, "outbox", outbox.LockName)
	testkit.WaitFor(t, "the agent to take its lock", func() bool { _, err := os.Stat(lock); return err == nil })
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, outbox.ErrLockLost) {
			t.Fatalf("Run: %v, want ErrLockLost", err)
		}
	case <-time.After(time.Minute): // a guard, not a limit: heartbeats come every 100 ms
		t.Fatal("the agent went on without its lock")
	}
}
