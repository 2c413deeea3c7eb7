package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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
			exe, err := NewExec(ExecConfig{Argv: []string{"/bin/sh", "-c", c.script}, Grace: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			f := newFixture(t, exe, "")
			f.runner.Policy.MaxAttempts = 1
			if c.cancel {
				f.rec.onReport = func(r Report) {
					if len(pidsFromLogs(t, f.rec.logs())) > 0 {
						cancel(ErrCancelled)
					}
				}
			}
			f.run(t, ctx)
			pids := pidsFromLogs(t, f.rec.logs())
			if len(pids) != 1 {
				t.Fatalf("want one pid line, logs %q", f.rec.logs())
			}
			if alive(pids[0]) {
				_ = exec.Command("kill", "-9", strconv.Itoa(pids[0])).Run()
				t.Fatalf("pid %d (its own session) outlived the attempt", pids[0])
			}
		})
	}
}

// The mark reaches the executor, and a sweep by owner ends what a crashed
// agent's attempts left behind.
func TestSweepOwnerEndsMarkedProcesses(t *testing.T) {
	cmd := exec.Command("setsid", "sleep", "300")
	cmd.Env = append(os.Environ(), MarkEnv+"=owner-x/att-1/abcd")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done }) // a failed run leaves nothing behind
	other := exec.Command("sleep", "300")
	other.Env = append(os.Environ(), MarkEnv+"=owner-y/att-2/abcd")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()

	if n := SweepOwner("owner-x"); n != 1 {
		t.Fatalf("SweepOwner killed %d processes, want 1", n)
	}
	<-done // killed, else this blocks until the test times out
	if !alive(other.Process.Pid) {
		t.Fatal("another owner's process was killed")
	}
}

// A process started with no environment at all reads like one caught in an
// exec; the sweep looks at it a few times, leaves it alone and returns.
func TestSweepLeavesAProcessWithNoEnvironment(t *testing.T) {
	bare := exec.Command("sleep", "300")
	bare.Env = []string{}
	if err := bare.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bare.Process.Kill(); _ = bare.Wait() }()
	// Wait for its exec to be done: its command line is sleep's.
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(bare.Process.Pid) + "/cmdline")
		if strings.HasPrefix(string(b), "sleep\x00") {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if n := SweepOwner("owner-z"); n != 0 {
		t.Fatalf("SweepOwner killed %d processes, want 0", n)
	}
	if !alive(bare.Process.Pid) {
		t.Fatal("a process with no environment was killed")
	}
}

// A previous life's keeper is told to end its attempt, not killed
// outright: it kills what dropped the mark too, which a SIGKILLed keeper
// would have left to init.
func TestSweepOwnerEndsAKeepersAttemptWhole(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "escaped")
	p, err := startProcess(processSpec{Name: "sh", Path: "/bin/sh", Dir: dir, Mark: newMark("owner-k", "att-1"), Grace: time.Second,
		Args: []string{"-c", `env -u ` + MarkEnv + ` setsid sh -c 'echo $$ > escaped; exec sleep 300' </dev/null >/dev/null 2>&1 &
			while :; do sleep 1; done`}})
	if err != nil {
		t.Fatal(err)
	}
	defer drainOutput(time.Second, p)
	for i := 0; i < 2000; i++ {
		if b, _ := os.ReadFile(pidFile); len(b) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	escaped, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	SweepOwner("owner-k")
	<-p.exited
	if alive(escaped) {
		_ = syscall.Kill(escaped, syscall.SIGKILL)
		t.Fatalf("process %d, which dropped the mark, outlived the sweep of its keeper's owner", escaped)
	}
}
