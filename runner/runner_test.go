package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/sample"
	"github.com/edgeagent/agent/state"
)

// TestMain lets the test binary be the sample executor, so tests run a
// real subprocess.
func TestMain(m *testing.M) {
	keeper.Main() // attempts run under a keeper: this test binary is it
	if os.Getenv("RUNNER_TEST_SAMPLE") == "1" {
		os.Exit(sample.Main(os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// sampleExec returns an exec executor running the sample.
func sampleExec(t *testing.T, cfg exec.Config) *exec.Exec {
	t.Helper()
	cfg.Argv = []string{os.Args[0]}
	cfg.Env = append(cfg.Env, "RUNNER_TEST_SAMPLE=1", "GORACE=atexit_sleep_ms=0")
	e, err := exec.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// recorder is a Sink that keeps every report.
type recorder struct {
	mu       sync.Mutex
	reports  []runner.Report
	logLines int
	keepLogs bool
	onReport func(runner.Report)
}

func (rec *recorder) Report(r runner.Report) {
	rec.mu.Lock()
	l, isLog := r.Payload.(state.LogEvent)
	if isLog {
		rec.logLines += len(l.Lines)
	}
	if !isLog || rec.keepLogs {
		r.Task = nil // only valid during the call
		rec.reports = append(rec.reports, r)
	}
	f := rec.onReport
	rec.mu.Unlock()
	if f != nil {
		f(r)
	}
}

func (rec *recorder) kinds() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, r := range rec.reports {
		s := string(r.Kind())
		switch p := r.Payload.(type) {
		case state.PhaseEvent:
			s += ":" + string(p.Phase)
		case state.Attempt:
			s += fmt.Sprintf(":%d:%s", p.Number, p.Status)
		case state.CompleteEvent:
			s += ":" + string(p.Status)
		}
		out = append(out, s)
	}
	return out
}

func (rec *recorder) logs() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, r := range rec.reports {
		if l, ok := r.Payload.(state.LogEvent); ok {
			for _, line := range l.Lines {
				out = append(out, l.Stream+": "+line)
			}
		}
	}
	return out
}

type fixture struct {
	runner *runner.Runner
	rec    *recorder
	health *health.Tracker
	task   *state.Task
}

func newFixture(t *testing.T, exe runner.Executor, prompt string) *fixture {
	t.Helper()
	rec := &recorder{keepLogs: true}
	tr := health.NewTracker(exe.Name(), health.Options{})
	task := state.NewTask("t-1", prompt, time.Now())
	if err := task.Transition(state.PhaseClaimed, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	r := &runner.Runner{Executor: exe, Sink: rec, Health: tr, Models: []string{"model-a", "model-b"},
		Policy: runner.Policy{BaseDelay: 10 * time.Millisecond}, LogFlush: 20 * time.Millisecond}
	return &fixture{runner: r, rec: rec, health: tr, task: task}
}

func (f *fixture) run(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := f.runner.Run(ctx, f.task); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !f.task.Phase.Terminal() {
		t.Fatalf("Run returned with the task %s", f.task.Phase)
	}
	if err := f.task.Check(); err != nil {
		t.Fatalf("invariant: %v", err)
	}
}

func contains(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}

func TestSuccess(t *testing.T) {
	f := newFixture(t, sampleExec(t, exec.Config{}), "fix the flaky test")
	f.run(t, context.Background())
	if f.task.Phase != state.PhaseCompleted || len(f.task.Attempts) != 1 {
		t.Fatalf("phase %s, %d attempts", f.task.Phase, len(f.task.Attempts))
	}
	a := f.task.Attempts[0]
	if a.Status != state.AttemptCompleted || *a.ExitCode != 0 || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9]+$`).MatchString(a.SessionID) || a.Model != "model-a" || !a.Facts.Output {
		t.Errorf("attempt %+v", a)
	}
	if f.task.Result == nil || f.task.Result.Summary != "done: fix the flaky test" {
		t.Errorf("result %+v", f.task.Result)
	}
	// stdout and stderr are two pipes: their lines interleave in no fixed
	// order, so logs are checked apart from the rest.
	var kinds []string
	for _, k := range f.rec.kinds() {
		if k != "log" {
			kinds = append(kinds, k)
		}
	}
	want := []string{"phase:executor_starting", "attempt:1:running", "phase:turn_started", "progress", "progress", "progress",
		"phase:awaiting_reply", "phase:completing", "attempt:1:completed", "phase:completed", "complete:completed"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("reports:\n %v\nwant\n %v", kinds, want)
	}
	logs := f.rec.logs()
	if !contains(logs, "output: I looked at the code and made the change.") || !contains(logs, `stderr: sample-executor: task t-1 attempt 1 model "model-a"`) {
		t.Errorf("logs %q", logs)
	}
	if g := f.health.Grade(); g != health.Available {
		t.Errorf("health %s", g)
	}
}

func TestTransientFailureIsRetriedThenSucceeds(t *testing.T) {
	f := newFixture(t, sampleExec(t, exec.Config{}), "@fail rate_limit")
	f.run(t, context.Background())
	if f.task.Phase != state.PhaseCompleted || len(f.task.Attempts) != 2 {
		t.Fatalf("phase %s, %d attempts", f.task.Phase, len(f.task.Attempts))
	}
	a1, a2 := f.task.Attempts[0], f.task.Attempts[1]
	d := a1.Retry
	if a1.Status != state.AttemptFailed || a1.Error.Code != "rate_limit" || a1.Error.Message != "429 Too Many Requests" ||
		!d.TechnicallyRetryable || d.Gate != state.GateAllowed || d.Decision != state.DecisionRetried || d.Delay.D() != 300*time.Millisecond {
		t.Errorf("attempt 1: %+v, decision %+v (the executor's retry-after of 300ms must win)", a1, d)
	}
	if a2.Model != "model-b" || a2.Status != state.AttemptCompleted || a2.StartedAt.Sub(a1.CompletedAt) < 300*time.Millisecond {
		t.Errorf("attempt 2: %+v", a2)
	}
	tl := state.Timeline(f.task, time.Now())
	if len(tl) != 2 || !strings.HasSuffix(tl[0], "rate_limit: 429 Too Many Requests  -> retried in 300ms") {
		t.Errorf("timeline:\n%s", strings.Join(tl, "\n"))
	}
	if !contains(f.rec.kinds(), "attempt:2:pending") {
		t.Errorf("the pending retry was not reported: %v", f.rec.kinds())
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	f := newFixture(t, sampleExec(t, exec.Config{}), "@fail quota")
	f.run(t, context.Background())
	if f.task.Phase != state.PhaseFailed || len(f.task.Attempts) != 1 {
		t.Fatalf("phase %s, %d attempts", f.task.Phase, len(f.task.Attempts))
	}
	a := f.task.Attempts[0]
	if a.Error.Code != "quota" || a.Retry.TechnicallyRetryable || a.Retry.Decision != state.DecisionStopped || *a.ExitCode != 1 {
		t.Errorf("attempt %+v %+v", a, a.Retry)
	}
	if f.task.LastErrorCode != "quota" {
		t.Errorf("last_error_code %q", f.task.LastErrorCode)
	}
}

func TestMissingBinaryIsPermanentAndUnavailable(t *testing.T) {
	e, _ := exec.New(exec.Config{Argv: []string{filepath.Join(t.TempDir(), "no-such-executor")}})
	f := newFixture(t, e, "anything")
	f.run(t, context.Background())
	a := f.task.Attempts[0]
	if f.task.Phase != state.PhaseFailed || len(f.task.Attempts) != 1 || a.Error.Code != "executor_not_found" || a.Retry.TechnicallyRetryable {
		t.Fatalf("phase %s, attempt %+v", f.task.Phase, a)
	}
	if s := f.health.Snapshot(); s.Grade != health.Unavailable || !strings.Contains(s.Reason, "no-such-executor") {
		t.Errorf("health %+v", s)
	}
	if err := e.Probe(context.Background()); !errors.Is(err, runner.ErrExecutorNotFound) {
		t.Errorf("probe: %v", err)
	}
}

func TestNotExecutableIsPermanent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script")
	os.WriteFile(path, []byte("#!/bin/sh\necho hi\n"), 0o600)
	e, _ := exec.New(exec.Config{Argv: []string{path}})
	f := newFixture(t, e, "anything")
	f.run(t, context.Background())
	if a := f.task.Attempts[0]; a.Error.Code != "not_executable" || f.health.Grade() != health.Unavailable {
		t.Errorf("attempt %+v, health %s", a, f.health.Grade())
	}
}

func TestHangTimesOutTransientAndDegrades(t *testing.T) {
	f := newFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), "@hang")
	f.runner.Timeouts = runner.Timeouts{Attempt: []time.Duration{300 * time.Millisecond}}
	f.runner.Policy.MaxAttempts = 2
	f.run(t, context.Background())
	if f.task.Phase != state.PhaseTimedOut || len(f.task.Attempts) != 2 {
		t.Fatalf("phase %s, %d attempts", f.task.Phase, len(f.task.Attempts))
	}
	for _, a := range f.task.Attempts {
		if a.Error.Code != "attempt_timeout" || !a.Retry.TechnicallyRetryable || !strings.Contains(a.TimeoutUsed, "fired=attempt") {
			t.Errorf("attempt %d: %+v %+v", a.Number, a.Error, a.Retry)
		}
	}
	if g := f.task.Attempts[1].Retry.Gate; g != state.GateMaxAttempts {
		t.Errorf("last attempt's gate %q", g)
	}
	if s := f.health.Snapshot(); s.Grade != health.Degraded || s.RecentErrors[0].Signal != health.AttemptTimeout {
		t.Errorf("health %+v", s)
	}
}

// TestFirstEventTimeoutIsRecoveredOnlyOnce uses an executor that never says
// anything: the first-event limit fires, one safe automatic retry follows
// with the longer limit, and then the task stops.
func TestFirstEventTimeoutIsRecoveredOnlyOnce(t *testing.T) {
	e, _ := exec.New(exec.Config{Argv: []string{"sleep", "30"}, Grace: 100 * time.Millisecond})
	f := newFixture(t, e, "anything")
	f.runner.Timeouts = runner.Timeouts{FirstEvent: []time.Duration{150 * time.Millisecond, 300 * time.Millisecond}}
	f.runner.Policy.MaxAttempts = 5
	f.run(t, context.Background())
	if f.task.Phase != state.PhaseTimedOut || len(f.task.Attempts) != 2 {
		t.Fatalf("phase %s, %d attempts", f.task.Phase, len(f.task.Attempts))
	}
	a1, a2 := f.task.Attempts[0], f.task.Attempts[1]
	if a1.Retry.Decision != state.DecisionRetried || !strings.HasPrefix(a1.TimeoutUsed, "first_event=150ms") {
		t.Errorf("attempt 1: %+v %+v", a1, a1.Retry)
	}
	if a2.Retry.Decision != state.DecisionStopped || a2.Retry.Gate != state.GateFirstEventUsed || !strings.HasPrefix(a2.TimeoutUsed, "first_event=300ms") {
		t.Errorf("attempt 2: %+v %+v", a2, a2.Retry)
	}
	if f.health.Snapshot().RecentErrors[0].Signal != health.FirstEventTimeout {
		t.Errorf("health %+v", f.health.Snapshot())
	}
}

func TestClosedStdoutIsTransientAndDegrades(t *testing.T) {
	f := newFixture(t, sampleExec(t, exec.Config{CloseGrace: 100 * time.Millisecond, Grace: 100 * time.Millisecond}), "@close-stdout")
	f.runner.Policy.MaxAttempts = 1
	f.run(t, context.Background())
	a := f.task.Attempts[0]
	if a.Error.Code != "stdio_closed" || a.Error.Message != "stdio closed before result" || !a.Retry.TechnicallyRetryable || a.Retry.Gate != state.GateMaxAttempts {
		t.Fatalf("attempt %+v %+v", a.Error, a.Retry)
	}
	if s := f.health.Snapshot(); s.Grade != health.Degraded || s.RecentErrors[0].Signal != health.StdioClosed {
		t.Errorf("health %+v", s)
	}
}

func TestSideEffectThenTransientFailureIsBlockedByTheGate(t *testing.T) {
	f := newFixture(t, sampleExec(t, exec.Config{}), "@side-effect wrote ~/.config/app.toml\n@fail network")
	f.run(t, context.Background())
	if f.task.Phase != state.PhaseRecoverableFailed || len(f.task.Attempts) != 1 || !f.task.Recoverable {
		t.Fatalf("phase %s, %d attempts", f.task.Phase, len(f.task.Attempts))
	}
	d := f.task.Attempts[0].Retry
	if !d.TechnicallyRetryable || d.Gate != state.GateSideEffect || d.Decision != state.DecisionStopped {
		t.Errorf("decision %+v", d)
	}
	if !strings.Contains(f.task.PhaseReason, "side_effect") {
		t.Errorf("reason %q does not name the gate", f.task.PhaseReason)
	}
	if tl := state.Timeline(f.task, time.Now()); !strings.HasSuffix(tl[0], "-> blocked: side_effect") {
		t.Errorf("timeline %q", tl)
	}
}

func TestToolAndOutputAlsoBlockTheGate(t *testing.T) {
	for prompt, gate := range map[string]state.GateReason{"@tool grep\n@fail overloaded": state.GateToolExecuted, "@output hello\n@fail overloaded": state.GateVisibleOutput} {
		t.Run(string(gate), func(t *testing.T) {
			f := newFixture(t, sampleExec(t, exec.Config{}), prompt)
			f.run(t, context.Background())
			if d := f.task.Attempts[0].Retry; d.Gate != gate || f.task.Phase != state.PhaseRecoverableFailed {
				t.Errorf("%q: %+v, phase %s", prompt, d, f.task.Phase)
			}
		})
	}
}

func TestCancelDuringBackoffWait(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	f := newFixture(t, sampleExec(t, exec.Config{}), "@fail overloaded 5")
	f.runner.Policy = runner.Policy{BaseDelay: time.Hour, MaxDelay: 2 * time.Hour, Jitter: 0.01}
	f.rec.onReport = func(r runner.Report) {
		if a, ok := r.Payload.(state.Attempt); ok && a.Status == state.AttemptPending {
			cancel(runner.ErrCancelled)
		}
	}
	f.run(t, ctx)
	if f.task.Phase != state.PhaseCancelled || len(f.task.Attempts) != 2 {
		t.Fatalf("phase %s, %d attempts", f.task.Phase, len(f.task.Attempts))
	}
	a2 := f.task.Attempts[1]
	if a2.Status != state.AttemptCancelled || a2.Error.Code != "cancelled" {
		t.Errorf("pending attempt: %+v", a2)
	}
	if d := f.task.Attempts[0].Retry.Delay.D(); d < 59*time.Minute {
		t.Errorf("delay %v: the test did not cancel a long wait", d)
	}
}

func TestShutdownEndsTheTaskRecoverable(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	f := newFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), "@hang")
	f.rec.onReport = func(r runner.Report) {
		if p, ok := r.Payload.(state.PhaseEvent); ok && p.Phase == state.PhaseTurnStarted {
			cancel(runner.ErrShutdown)
		}
	}
	f.run(t, ctx)
	if f.task.Phase != state.PhaseRecoverableFailed || f.task.Attempts[0].Error.Code != "agent_shutdown" || len(f.task.Attempts) != 1 {
		t.Errorf("phase %s, attempt %+v", f.task.Phase, f.task.Attempts[0].Error)
	}
	if f.health.Grade() != health.Available {
		t.Error("a shutdown degraded the executor")
	}
}

// TestIgnoredSIGTERMGetsSIGKILL runs the executor directly to see how the
// process ended.
func TestIgnoredSIGTERMGetsSIGKILL(t *testing.T) {
	e := sampleExec(t, exec.Config{Grace: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	spec := runner.AttemptSpec{Task: runner.TaskInput{ID: "t", Prompt: "@ignore-sigterm\n@output armed\n@hang", Attempt: 1}}
	exit := e.Run(ctx, spec, func(ev runner.Event) {
		if ev.Type == runner.EventOutput {
			cancel() // SIGTERM is ignored by now
		}
	})
	cancel()
	if exit.Signal != "killed" || !exit.Killed || exit.ExitCode != -1 {
		t.Errorf("exit %+v, want it killed by SIGKILL after the grace period", exit)
	}
}

// TestFloodOfAMillionLinesKeepsMemoryBounded floods a million lines through
// the runner and watches the heap meanwhile.
func TestFloodOfAMillionLinesKeepsMemoryBounded(t *testing.T) {
	f := newFixture(t, sampleExec(t, exec.Config{}), "@flood 1000000")
	f.rec.keepLogs = false
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		}
	})
	f.run(t, context.Background())
	close(stop)
	wg.Wait()
	if f.task.Phase != state.PhaseCompleted {
		t.Fatalf("phase %s", f.task.Phase)
	}
	if f.rec.logLines < 1_000_000 {
		t.Errorf("sink saw %d lines, want at least 1000000", f.rec.logLines)
	}
	t.Logf("1M lines (~38 MB) flowed through with a peak heap of %d MB", peak>>20)
	if peak > 64<<20 {
		t.Errorf("peak heap %d MB while flooding: output is being buffered whole", peak>>20)
	}
}

func TestEnvironmentAndStdinReachTheChild(t *testing.T) {
	e, _ := exec.New(exec.Config{Argv: []string{"sh", "-c", `read -r task; echo "$AGENT_TASK_ID $AGENT_ATTEMPT $AGENT_MODEL"; echo "$task"`}})
	var lines []string
	exit := e.Run(context.Background(), runner.AttemptSpec{Task: runner.TaskInput{ID: "t-9", Prompt: "p", Attempt: 2, Model: "m"}}, func(ev runner.Event) {
		lines = append(lines, ev.Lines...)
	})
	if exit.ExitCode != 0 || len(lines) != 2 || lines[0] != "t-9 2 m" || !strings.HasPrefix(lines[1], `{"id":"t-9","prompt":"p","attempt":2`) {
		t.Errorf("exit %+v, lines %q", exit, lines)
	}
}

func TestOverlongLinesAreCut(t *testing.T) {
	e, _ := exec.New(exec.Config{Argv: []string{"sh", "-c", `head -c 300000 /dev/zero | tr '\0' x; echo; echo after`}, MaxLine: 1000})
	var lines []string
	e.Run(context.Background(), runner.AttemptSpec{}, func(ev runner.Event) { lines = append(lines, ev.Lines...) })
	if len(lines) != 2 || !strings.HasPrefix(lines[0], strings.Repeat("x", 1000)+" …[line cut: 299000 more bytes]") || lines[1] != "after" {
		t.Errorf("got %d lines: %.80q…", len(lines), lines)
	}
}

// An executor's own timeout (the model's, a gateway's) is a transient
// failure like another: only the agent's own limits end a task timed_out.
func TestExecutorTimeoutCodeIsNotTheAgentsTimeout(t *testing.T) {
	for _, code := range []state.ErrorCode{state.CodeTimeout, state.CodeGatewayTimeout} {
		t.Run(string(code), func(t *testing.T) {
			f := newFixture(t, sampleExec(t, exec.Config{}), "@fail "+string(code)+" 5")
			f.runner.Policy.MaxAttempts = 2
			f.run(t, context.Background())
			if f.task.Phase != state.PhaseFailed {
				t.Fatalf("task %s, want failed: an executor's %s is not the agent's timeout", f.task.Phase, code)
			}
			for _, a := range f.task.Attempts {
				if a.Error == nil || a.Error.Code != code || !a.Retry.TechnicallyRetryable {
					t.Errorf("attempt %d: %+v %+v, want a transient %s", a.Number, a.Error, a.Retry, code)
				}
			}
			if len(f.task.Attempts) != 2 {
				t.Errorf("%d attempts, want 2 (retried as transient)", len(f.task.Attempts))
			}
		})
	}
}
