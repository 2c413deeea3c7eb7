package agent

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// A first signal drains: Run's context ends, and with it what runs
// alongside. A second one stops at once: a running task's drain, an hour
// here, is not waited for.
func TestRunSignalled(t *testing.T) {
	t.Parallel()
	_, cfg := fixture(t)
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 2)
	alongside := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- a.RunSignalled(context.Background(), sigs, func(ctx context.Context) { <-ctx.Done(); close(alongside) })
	}()
	sigs <- syscall.SIGTERM
	if err := <-errc; err != nil {
		t.Fatalf("drained: %v", err)
	}
	<-alongside

	client, cfg := fixture(t)
	cfg.ShutdownGrace, cfg.ReattachGrace = time.Hour, 0
	a, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { errc <- a.RunSignalled(context.Background(), sigs) }()
	v, err := client.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "@wait-file " + filepath.Join(t.TempDir(), "never")})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the task to start its turn", func() bool {
		got, _ := client.Task(context.Background(), v.ID)
		return got.Phase == state.PhaseTurnStarted
	})
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGINT
	if err := <-errc; err != nil {
		t.Fatalf("stopped at once: %v", err)
	}
}
