package metrics_test

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/metrics"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// BenchmarkGatherAgent measures a scrape of the agent's metrics with a
// data directory of 1000 finished tasks: the task gauge reads every task
// file, so this is what a scrape costs a busy agent.
func BenchmarkGatherAgent(b *testing.B) {
	store, err := state.OpenStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	for i := range 1000 {
		t := state.NewTask(fmt.Sprintf("t-%04d", i), "fix the flaky login test", now)
		if err := store.Save(t); err != nil {
			b.Fatal(err)
		}
	}
	m := metrics.NewAgent(metrics.AgentSources{
		Outbox: func() outbox.Stats { return outbox.Stats{} },
		Tasks:  store.LoadAll,
		Grade:  func() health.Grade { return health.Available },
	})
	for b.Loop() {
		if _, err := m.Registry().WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
