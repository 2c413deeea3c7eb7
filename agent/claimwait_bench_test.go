package agent

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/state"
)

// BenchmarkPickup measures how long an idle agent takes to start a task
// submitted to it: from the task's creation to its first attempt's start,
// both on this host's clock. Two agents run side by side at the default
// heartbeat interval (10 s), one against a control plane that holds claims
// (the long poll), one against a control plane that drops wait_ms, as one
// from before long polls: that agent claims when a heartbeat gets through.
// Each round waits a random part of a heartbeat interval, submits one
// task to each, then waits for both to end, so the machine's noise falls
// on both alike. Reported: the mean pickup of each
// and their ratio (old over long poll), the median too. A round takes up
// to two heartbeat intervals: run it with a count, e.g.
//
//	go test -run '^$' -bench Pickup -benchtime 20x ./agent
func BenchmarkPickup(b *testing.B) {
	long := startBenchAgent(b, &claimLog{})
	old := startBenchAgent(b, &claimLog{oldServer: true})
	var longs, olds []time.Duration
	for b.Loop() {
		// A task arrives at any point of the heartbeat's cycle, not just
		// after the task before ended (after which the old path claims).
		time.Sleep(rand.N(server.DefaultHeartbeatInterval))
		lt := submitBench(b, long)
		ot := submitBench(b, old)
		longs = append(longs, pickup(b, long, lt))
		olds = append(olds, pickup(b, old, ot))
	}
	ml, mo := mean(longs), mean(olds)
	b.ReportMetric(float64(ml.Microseconds())/1000, "ms-longpoll")
	b.ReportMetric(float64(mo.Microseconds())/1000, "ms-old")
	b.ReportMetric(float64(mo)/float64(ml), "old/longpoll")
	b.ReportMetric(float64(median(olds))/float64(median(longs)), "median-old/longpoll")
}

// startBenchAgent starts a control plane behind log and an idle agent
// of the sample executor at the default heartbeat interval.
func startBenchAgent(b *testing.B, log *claimLog) *servertest.ControlPlane {
	b.Helper()
	cp := servertest.Start(b, servertest.Options{Wrap: log.wrap})
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_PKG_SAMPLE=1", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(Config{ControlPlane: cp.URL, Token: servertest.RegistrationToken, DataDir: b.TempDir(), Executor: exe,
		ShutdownGrace: time.Second, MaxConcurrent: 1, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-errc })
	// Settled: registered and past its first claim.
	testkit.WaitFor(b, "the agent's first claim", func() bool { claims, _ := log.seen(); return len(claims) > 0 })
	return cp
}

func submitBench(b *testing.B, cp *servertest.ControlPlane) string {
	b.Helper()
	v, err := cp.Operator.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "@output hello"})
	if err != nil {
		b.Fatal(err)
	}
	return v.ID
}

// pickup waits for task id to end and returns from its creation to its
// first attempt's start.
func pickup(b *testing.B, cp *servertest.ControlPlane, id string) time.Duration {
	b.Helper()
	var v api.TaskView
	testkit.WaitFor(b, "task "+id+" to end", func() bool {
		var err error
		if v, err = cp.Operator.Task(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		return v.Phase.Terminal()
	})
	if v.Phase != state.PhaseCompleted || len(v.Attempts) == 0 {
		b.Fatalf("task %s ended %s", id, v.Phase)
	}
	return v.Attempts[0].StartedAt.Sub(v.CreatedAt)
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
