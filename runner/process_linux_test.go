package runner_test

import (
	"context"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
)

// pidsFromLogs returns the pids a child printed as "pid N" lines.
func pidsFromLogs(t *testing.T, logs []string) []int {
	t.Helper()
	var pids []int
	for _, l := range logs {
		if rest, ok := strings.CutPrefix(l, "stdout: pid "); ok {
			pid, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatalf("bad pid line %q", l)
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// A process that left the attempt's group and session (as Codex and
// Claude Code run their tool commands) is still ended with the attempt: it
// carries the attempt's mark.
func TestProcessInItsOwnSessionDoesNotOutliveTheAttempt(t *testing.T) {
	for _, c := range []struct {
		name   string
		script string
		cancel bool
	}{
		{"after a normal exit", `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo "pid $!"; echo '{"type":"result","summary":"ok"}'`, false},
		{"after a cancel", `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo "pid $!"; echo '{"type":"output","text":"x"}'; exec sleep 300`, true},
		{"double fork, parent gone", `sh -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo "pid $!"'; echo '{"type":"result","summary":"ok"}'`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			exe, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", c.script}, Grace: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			f := runnertest.NewFixture(t, exe, "")
			f.Runner.Policy.MaxAttempts = 1
			if c.cancel {
				f.Rec.OnReport = func(r runner.Report) {
					if len(pidsFromLogs(t, f.Rec.Logs())) > 0 {
						cancel(runner.ErrCancelled)
					}
				}
			}
			f.Run(t, ctx)
			pids := pidsFromLogs(t, f.Rec.Logs())
			if len(pids) != 1 {
				t.Fatalf("want one pid line, logs %q", f.Rec.Logs())
			}
			if alive(pids[0]) {
				_ = osexec.Command("kill", "-9", strconv.Itoa(pids[0])).Run()
				t.Fatalf("pid %d (its own session) outlived the attempt", pids[0])
			}
		})
	}
}
