package runner_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// These tests read /proc, so they build on Linux only.

// grandchildPID finds the pid the sample printed for its grandchild.
func grandchildPID(t *testing.T, logs []string) int {
	t.Helper()
	for _, l := range logs {
		if rest, ok := strings.CutPrefix(l, "stderr: grandchild pid "); ok {
			pid, err := strconv.Atoi(rest)
			if err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no grandchild pid in %q", logs)
	return 0
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestGrandchildIsKilledWithTheGroup(t *testing.T) {
	for name, c := range map[string]struct {
		prompt string
		cancel bool
	}{
		"on cancel":      {"@spawn-child\n@output spawned\n@hang", true},
		"on normal exit": {"@spawn-child\n@output spawned", false},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), c.prompt)
			f.Rec.OnReport = func(r runner.Report) {
				if l, ok := r.Payload.(state.LogEvent); ok && l.Stream == "output" && c.cancel {
					cancel(runner.ErrCancelled)
				}
			}
			f.Run(t, ctx)
			pid := grandchildPID(t, f.Rec.Logs())
			// SIGKILL is delivered asynchronously: a grandchild that
			// survived its attempt is one that never dies.
			testkit.WaitFor(t, fmt.Sprintf("grandchild %d to die with its attempt", pid), func() bool { return !alive(pid) })
		})
	}
}
