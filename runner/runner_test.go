package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
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

func TestSuccess(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "fix the flaky test")
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 1 {
		t.Fatalf("phase %s, %d attempts", f.Task.Phase, len(f.Task.Attempts))
	}
	a := f.Task.Attempts[0]
	if a.Status != state.AttemptCompleted || *a.ExitCode != 0 || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9]+$`).MatchString(a.SessionID) || a.Model != "model-a" || !a.Facts.Output {
		t.Errorf("attempt %+v", a)
	}
	if f.Task.Result == nil || f.Task.Result.Summary != "done: fix the flaky test" {
		t.Errorf("result %+v", f.Task.Result)
	}
	// stdout and stderr are two pipes: their lines interleave in no fixed
	// order, so logs are checked apart from the rest.
	var kinds []string
	for _, k := range f.Rec.Kinds() {
		if k != "log" {
			kinds = append(kinds, k)
		}
	}
	// The attempt is reported again when its first output changes what
	// the gate would say.
	want := []string{"phase:executor_starting", "attempt:1:running", "phase:turn_started", "progress", "progress", "progress",
		"attempt:1:running", "phase:awaiting_reply", "phase:completing", "attempt:1:completed", "phase:completed", "complete:completed"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("reports:\n %v\nwant\n %v", kinds, want)
	}
	logs := f.Rec.Logs()
	if !slices.Contains(logs, "output: I looked at the code and made the change.") || !slices.Contains(logs, `stderr: sample-executor: task t-1 attempt 1 model "model-a"`) {
		t.Errorf("logs %q", logs)
	}
	if g := f.Health.Grade(); g != health.Available {
		t.Errorf("health %s", g)
	}
}

func TestTransientFailureIsRetriedThenSucceeds(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@fail rate_limit")
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 {
		t.Fatalf("phase %s, %d attempts", f.Task.Phase, len(f.Task.Attempts))
	}
	a1, a2 := f.Task.Attempts[0], f.Task.Attempts[1]
	d := a1.Retry
	if a1.Status != state.AttemptFailed || a1.Error.Code != "rate_limit" || a1.Error.Message != "429 Too Many Requests" ||
		!d.TechnicallyRetryable || d.Gate != state.GateAllowed || d.Decision != state.DecisionRetried || d.Delay.D() != 300*time.Millisecond {
		t.Errorf("attempt 1: %+v, decision %+v (the executor's retry-after of 300ms must win)", a1, d)
	}
	if a2.Model != "model-b" || a2.Status != state.AttemptCompleted || a2.StartedAt.Sub(a1.CompletedAt) < 300*time.Millisecond {
		t.Errorf("attempt 2: %+v", a2)
	}
	tl := state.Timeline(f.Task, time.Now())
	if len(tl) != 2 || !strings.HasSuffix(tl[0], "rate_limit: 429 Too Many Requests  -> retried in 300ms") {
		t.Errorf("timeline:\n%s", strings.Join(tl, "\n"))
	}
	if !slices.Contains(f.Rec.Kinds(), "attempt:2:pending") {
		t.Errorf("the pending retry was not reported: %v", f.Rec.Kinds())
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@fail quota")
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseFailed || len(f.Task.Attempts) != 1 {
		t.Fatalf("phase %s, %d attempts", f.Task.Phase, len(f.Task.Attempts))
	}
	a := f.Task.Attempts[0]
	if a.Error.Code != "quota" || a.Retry.TechnicallyRetryable || a.Retry.Decision != state.DecisionStopped || *a.ExitCode != 1 {
		t.Errorf("attempt %+v %+v", a, a.Retry)
	}
	if f.Task.LastErrorCode != "quota" {
		t.Errorf("last_error_code %q", f.Task.LastErrorCode)
	}
}

func TestMissingBinaryIsPermanentAndUnavailable(t *testing.T) {
	e, _ := exec.New(exec.Config{Argv: []string{filepath.Join(t.TempDir(), "no-such-executor")}})
	f := runnertest.NewFixture(t, e, "anything")
	f.Run(t, context.Background())
	a := f.Task.Attempts[0]
	if f.Task.Phase != state.PhaseFailed || len(f.Task.Attempts) != 1 || a.Error.Code != "executor_not_found" || a.Retry.TechnicallyRetryable {
		t.Fatalf("phase %s, attempt %+v", f.Task.Phase, a)
	}
	if s := f.Health.Snapshot(); s.Grade != health.Unavailable || !strings.Contains(s.Reason, "no-such-executor") {
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
	f := runnertest.NewFixture(t, e, "anything")
	f.Run(t, context.Background())
	if a := f.Task.Attempts[0]; a.Error.Code != "not_executable" || f.Health.Grade() != health.Unavailable {
		t.Errorf("attempt %+v, health %s", a, f.Health.Grade())
	}
}

func TestHangTimesOutTransientAndDegrades(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), "@hang")
	f.Runner.Timeouts = runner.Timeouts{Attempt: []time.Duration{300 * time.Millisecond}}
	f.Runner.Policy.MaxAttempts = 2
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseTimedOut || len(f.Task.Attempts) != 2 {
		t.Fatalf("phase %s, %d attempts", f.Task.Phase, len(f.Task.Attempts))
	}
	for _, a := range f.Task.Attempts {
		if a.Error.Code != "attempt_timeout" || !a.Retry.TechnicallyRetryable || !strings.Contains(a.TimeoutUsed, "fired=attempt") {
			t.Errorf("attempt %d: %+v %+v", a.Number, a.Error, a.Retry)
		}
	}
	if g := f.Task.Attempts[1].Retry.Gate; g != state.GateMaxAttempts {
		t.Errorf("last attempt's gate %q", g)
	}
	if s := f.Health.Snapshot(); s.Grade != health.Degraded || s.RecentErrors[0].Signal != health.AttemptTimeout {
		t.Errorf("health %+v", s)
	}
}

// TestFirstEventTimeoutIsRecoveredOnlyOnce uses an executor that never says
// anything: the first-event limit fires, one safe automatic retry follows
// with the longer limit, and then the task stops.
func TestFirstEventTimeoutIsRecoveredOnlyOnce(t *testing.T) {
	e, _ := exec.New(exec.Config{Argv: []string{"sleep", "30"}, Grace: 100 * time.Millisecond})
	f := runnertest.NewFixture(t, e, "anything")
	f.Runner.Timeouts = runner.Timeouts{FirstEvent: []time.Duration{150 * time.Millisecond, 300 * time.Millisecond}}
	f.Runner.Policy.MaxAttempts = 5
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseTimedOut || len(f.Task.Attempts) != 2 {
		t.Fatalf("phase %s, %d attempts", f.Task.Phase, len(f.Task.Attempts))
	}
	a1, a2 := f.Task.Attempts[0], f.Task.Attempts[1]
	if a1.Retry.Decision != state.DecisionRetried || !strings.HasPrefix(a1.TimeoutUsed, "first_event=150ms") {
		t.Errorf("attempt 1: %+v %+v", a1, a1.Retry)
	}
	if a2.Retry.Decision != state.DecisionStopped || a2.Retry.Gate != state.GateFirstEventUsed || !strings.HasPrefix(a2.TimeoutUsed, "first_event=300ms") {
		t.Errorf("attempt 2: %+v %+v", a2, a2.Retry)
	}
	if f.Health.Snapshot().RecentErrors[0].Signal != health.FirstEventTimeout {
		t.Errorf("health %+v", f.Health.Snapshot())
	}
}

func TestClosedStdoutIsTransientAndDegrades(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{CloseGrace: 100 * time.Millisecond, Grace: 100 * time.Millisecond}), "@close-stdout")
	f.Runner.Policy.MaxAttempts = 1
	f.Run(t, context.Background())
	a := f.Task.Attempts[0]
	if a.Error.Code != "stdio_closed" || a.Error.Message != "stdio closed before result" || !a.Retry.TechnicallyRetryable || a.Retry.Gate != state.GateMaxAttempts {
		t.Fatalf("attempt %+v %+v", a.Error, a.Retry)
	}
	if s := f.Health.Snapshot(); s.Grade != health.Degraded || s.RecentErrors[0].Signal != health.StdioClosed {
		t.Errorf("health %+v", s)
	}
}

func TestSideEffectThenTransientFailureIsBlockedByTheGate(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect wrote ~/.config/app.toml\n@fail network")
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseRecoverableFailed || len(f.Task.Attempts) != 1 || !f.Task.Recoverable {
		t.Fatalf("phase %s, %d attempts", f.Task.Phase, len(f.Task.Attempts))
	}
	d := f.Task.Attempts[0].Retry
	if !d.TechnicallyRetryable || d.Gate != state.GateSideEffect || d.Decision != state.DecisionStopped {
		t.Errorf("decision %+v", d)
	}
	if !strings.Contains(f.Task.PhaseReason, "side_effect") {
		t.Errorf("reason %q does not name the gate", f.Task.PhaseReason)
	}
	if tl := state.Timeline(f.Task, time.Now()); !strings.HasSuffix(tl[0], "-> blocked: side_effect") {
		t.Errorf("timeline %q", tl)
	}
}

func TestToolAndOutputAlsoBlockTheGate(t *testing.T) {
	for prompt, gate := range map[string]state.GateReason{"@tool grep\n@fail overloaded": state.GateToolExecuted, "@output hello\n@fail overloaded": state.GateVisibleOutput} {
		t.Run(string(gate), func(t *testing.T) {
			f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), prompt)
			f.Run(t, context.Background())
			if d := f.Task.Attempts[0].Retry; d.Gate != gate || f.Task.Phase != state.PhaseRecoverableFailed {
				t.Errorf("%q: %+v, phase %s", prompt, d, f.Task.Phase)
			}
		})
	}
}

func TestCancelDuringBackoffWait(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@fail overloaded 5")
	f.Runner.Policy = runner.Policy{BaseDelay: time.Hour, MaxDelay: 2 * time.Hour, Jitter: 0.01}
	f.Rec.OnReport = func(r runner.Report) {
		if a, ok := r.Payload.(state.Attempt); ok && a.Status == state.AttemptPending {
			cancel(runner.ErrCancelled)
		}
	}
	f.Run(t, ctx)
	if f.Task.Phase != state.PhaseCancelled || len(f.Task.Attempts) != 2 {
		t.Fatalf("phase %s, %d attempts", f.Task.Phase, len(f.Task.Attempts))
	}
	a2 := f.Task.Attempts[1]
	if a2.Status != state.AttemptCancelled || a2.Error.Code != "cancelled" {
		t.Errorf("pending attempt: %+v", a2)
	}
	if d := f.Task.Attempts[0].Retry.Delay.D(); d < 59*time.Minute {
		t.Errorf("delay %v: the test did not cancel a long wait", d)
	}
}

// stopAt returns a context the agent's stop cancels (runner.ErrShutdown)
// once the attempt reports a side effect, or its turn starts when
// sideEffect is false.
func stopAt(f *runnertest.Fixture, sideEffect bool) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	f.Rec.OnReport = func(r runner.Report) {
		switch p := r.Payload.(type) {
		case state.PhaseEvent:
			if !sideEffect && p.Phase == state.PhaseTurnStarted {
				cancel(runner.ErrShutdown)
			}
		case state.LogEvent:
			if sideEffect && p.Stream == state.LogSideEffect {
				cancel(runner.ErrShutdown)
			}
		}
	}
	return ctx
}

// runUntilStopped runs the task until the agent's stop, which leaves it
// running with a pending attempt for the agent's next run.
func runUntilStopped(t *testing.T, f *runnertest.Fixture, ctx context.Context) *state.Attempt {
	t.Helper()
	if err := f.Runner.Run(ctx, f.Task); err != nil {
		t.Fatal(err)
	}
	c := f.Task.Current()
	if f.Task.Phase != state.PhaseExecutorStarting || c.Status != state.AttemptPending || f.Task.Check() != nil {
		t.Fatalf("after the stop: task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	if e := f.Task.Attempts[0].Error; e == nil || e.Code != state.CodeAgentShutdown {
		t.Fatalf("attempt 1 ended %+v, want agent_shutdown", e)
	}
	return c
}

// An agent stopped under an attempt that had done nothing yet replays it
// when it runs again: nothing is lost, nothing is repeated.
func TestShutdownBeforeAnythingWasDoneReplaysOnTheNextRun(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), "@wait-file "+filepath.Join(t.TempDir(), "never"))
	f.Runner.WorkRoot = t.TempDir()
	next := runUntilStopped(t, f, stopAt(f, false))
	if next.Continues != 0 || f.Task.Attempts[0].Retry.Decision != state.DecisionRetried || f.Task.Attempts[0].Retry.Delay != 0 {
		t.Fatalf("next attempt %+v after %+v, want a replay at once", next, f.Task.Attempts[0].Retry)
	}
	if f.Health.Grade() != health.Available {
		t.Error("a shutdown degraded the executor")
	}
}

// The agent's own stop spends no attempt: with no retry allowed at all,
// a task it stopped still runs again on its next run.
func TestAStopSpendsNoAttempt(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), "@wait-file "+filepath.Join(t.TempDir(), "never"))
	f.Runner.WorkRoot = t.TempDir()
	f.Runner.Policy.MaxAttempts = 1
	next := runUntilStopped(t, f, stopAt(f, false))
	if next.Number != 2 || f.Task.Attempts[0].Retry.Decision != state.DecisionRetried {
		t.Fatalf("after the stop: %s", runnertest.AttemptsText(f.Task))
	}
}

// An agent stopped after the attempt had a side effect continues the
// session on its next run (Recover, then Run, as the agent does): the
// follow-up goes in place of the prompt, the side effect is not done
// again, and the task completes.
func TestShutdownAfterASideEffectContinuesTheSession(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go-on")
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}),
		"deploy\n@side-effect wrote the release notes\n@wait-file "+gate+"\n@output deployed")
	f.Runner.WorkRoot = t.TempDir()
	next := runUntilStopped(t, f, stopAt(f, true))
	first := f.Task.Attempts[0]
	if next.Continues != 1 || first.Retry.Decision != state.DecisionContinued || first.Retry.Gate != state.GateSideEffect {
		t.Fatalf("attempt 1 %+v, next %+v: want a continue of attempt 1's session", first.Retry, next)
	}
	if first.SessionPath == "" {
		t.Fatal("attempt 1 recorded no session path")
	}

	// The agent's next run.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f.Rec = &runnertest.Recorder{KeepLogs: true}
	f.Runner.Sink = f.Rec
	if !f.Runner.Recover(f.Task) {
		t.Fatal("Recover would not take the task up")
	}
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 || f.Task.Attempts[1].SessionID != first.SessionID {
		t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	logs := strings.Join(f.Rec.Logs(), "\n")
	if strings.Contains(logs, "wrote the release notes") || !strings.Contains(logs, "Continuing session "+first.SessionID+": 1 steps were done") {
		t.Errorf("the continue repeated the side effect or did not take the session up:\n%s", logs)
	}
}

// Without a session to continue (the executor keeps none), an attempt
// stopped after a side effect is left to a person.
func TestShutdownAfterASideEffectWithoutASessionIsForAPerson(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}),
		"@side-effect wrote\n@wait-file "+filepath.Join(t.TempDir(), "never"))
	f.Run(t, stopAt(f, true))
	a := f.Task.Attempts[0]
	if f.Task.Phase != state.PhaseRecoverableFailed || len(f.Task.Attempts) != 1 || a.Retry.Gate != state.GateSideEffect || a.Retry.Decision != state.DecisionStopped {
		t.Errorf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
}

// An attempt that ran out its whole limit after a side effect is not
// continued on the agent's own: the limit bounds the work; a person
// decides.
func TestAnAttemptOutOfTimeIsNotContinued(t *testing.T) {
	t.Parallel()
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Grace: 100 * time.Millisecond}), "@side-effect started\n@sleep 1m")
	f.Runner.WorkRoot = t.TempDir()
	// Seconds for the side effect to be said first on a loaded machine
	// (with 500 ms, a slow start timed the attempt out before it).
	f.Runner.Timeouts.Attempt = []time.Duration{5 * time.Second}
	f.Run(t, context.Background())
	a := f.Task.Attempts[0]
	if f.Task.Phase != state.PhaseRecoverableFailed || len(f.Task.Attempts) != 1 || a.Error.Code != state.CodeAttemptTimeout ||
		a.Retry.Decision != state.DecisionStopped || a.SessionPath == "" {
		t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
}

// A transient failure after a side effect continues the session after the
// backoff; a continue whose session file is gone ends session_lost, for a
// person, and never replays.
func TestTransientFailureAfterASideEffectContinues(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect pushed a branch\n@fail network\n@output done")
	f.Runner.WorkRoot = t.TempDir()
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted || len(f.Task.Attempts) != 2 || f.Task.Attempts[1].Continues != 1 {
		t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	if n := strings.Count(strings.Join(f.Rec.Logs(), "\n"), "pushed a branch"); n != 1 {
		t.Errorf("the side effect was reported %d times, want once", n)
	}

	// A continue that fails before doing anything is still judged with
	// its session's side effect: it continues again, never replays.
	twice := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect pushed a branch\n@fail network 2\n@output done")
	twice.Runner.WorkRoot = t.TempDir()
	twice.Run(t, context.Background())
	if a := twice.Task.Attempts; twice.Task.Phase != state.PhaseCompleted || len(a) != 3 || a[1].Continues != 1 || a[2].Continues != 2 ||
		a[1].Retry.Decision != state.DecisionContinued || a[1].Retry.Gate != state.GateSideEffect {
		t.Fatalf("task %s, attempts %s", twice.Task.Phase, runnertest.AttemptsText(twice.Task))
	}
	if n := strings.Count(strings.Join(twice.Rec.Logs(), "\n"), "pushed a branch"); n != 1 {
		t.Errorf("the side effect was reported %d times, want once", n)
	}

	lost := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect pushed a branch\n@fail network\n@output done")
	lost.Runner.WorkRoot = t.TempDir()
	lost.Rec.OnReport = func(r runner.Report) {
		if a, ok := r.Payload.(state.Attempt); ok && a.Number == 1 && a.Status == state.AttemptFailed {
			os.Remove(a.SessionPath) // the session's files are gone before the continue
		}
	}
	lost.Run(t, context.Background())
	last := lost.Task.Current()
	if lost.Task.Phase != state.PhaseRecoverableFailed || last.Number != 2 || last.Error == nil || last.Error.Code != state.CodeSessionLost {
		t.Fatalf("task %s, attempts %s", lost.Task.Phase, runnertest.AttemptsText(lost.Task))
	}
	if strings.Count(strings.Join(lost.Rec.Logs(), "\n"), "pushed a branch") != 1 {
		t.Error("a lost session was replayed")
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
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@flood 1000000")
	f.Rec.KeepLogs = false
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
	f.Run(t, context.Background())
	close(stop)
	wg.Wait()
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("phase %s", f.Task.Phase)
	}
	if f.Rec.LogLines() < 1_000_000 {
		t.Errorf("sink saw %d lines, want at least 1000000", f.Rec.LogLines())
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
			f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@fail "+string(code)+" 5")
			f.Runner.Policy.MaxAttempts = 2
			f.Run(t, context.Background())
			if f.Task.Phase != state.PhaseFailed {
				t.Fatalf("task %s, want failed: an executor's %s is not the agent's timeout", f.Task.Phase, code)
			}
			for _, a := range f.Task.Attempts {
				if a.Error == nil || a.Error.Code != code || !a.Retry.TechnicallyRetryable {
					t.Errorf("attempt %d: %+v %+v, want a transient %s", a.Number, a.Error, a.Retry, code)
				}
			}
			if len(f.Task.Attempts) != 2 {
				t.Errorf("%d attempts, want 2 (retried as transient)", len(f.Task.Attempts))
			}
		})
	}
}

// A plain command that says why it failed on its stderr, and exits, is
// classified by the same rules as an error event's message: each rule,
// its code, class and the wait it asks for.
func TestPlainCommandStderrIsClassified(t *testing.T) {
	cases := []struct {
		name, stderr string
		code         state.ErrorCode
		transient    bool
		delay        time.Duration // the wait the text asked for, if any
	}{
		{"rate limit", "Error: 429 rate limit exceeded", state.CodeRateLimit, true, 0},
		{"rate limit asking a wait", "HTTP 429 Too Many Requests; retry after 0.25s", state.CodeRateLimit, true, 250 * time.Millisecond},
		{"overloaded", `{"type":"overloaded_error","message":"Overloaded"}`, state.CodeOverloaded, true, 0},
		{"unavailable", "upstream: 503 Service Unavailable, try again in 300ms", state.CodeUnavailable, true, 300 * time.Millisecond},
		{"gateway timeout", "504 Gateway Timeout", state.CodeGatewayTimeout, true, 0},
		{"network", "dial tcp 10.0.0.1:443: connect: connection refused", state.CodeNetwork, true, 0},
		{"the model's timeout", "request timed out after 600s", state.CodeTimeout, true, 0},
		{"quota", "You exceeded your current quota, please check your plan and billing details.", state.CodeQuota, false, 0},
		{"quota inside a 429", `429 {"error":{"code":"insufficient_quota"}}`, state.CodeQuota, false, 0},
		{"auth", "Error: 401 Unauthorized: invalid api key", state.CodeAuth, false, 0},
		{"context", "prompt is too long: 210000 tokens > 200000 maximum context", state.CodeContextOverflow, false, 0},
		{"the last line that says decides", "warning: a timeout on the first connection, retrying\nError: invalid x-api-key", state.CodeAuth, false, 0},
		{"nothing a rule knows", "panic: nil map", state.CodeExitStatus, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			script := "printf '%s\\n' \"$MSG\" >&2; exit 1"
			e, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"MSG=" + c.stderr}})
			if err != nil {
				t.Fatal(err)
			}
			f := runnertest.NewFixture(t, e, "anything")
			f.Runner.Policy.MaxAttempts = 2
			f.Runner.Policy.Jitter = -1
			f.Run(t, context.Background())
			a := f.Task.Attempts[0]
			if a.Error == nil || a.Error.Code != c.code || a.Retry.TechnicallyRetryable != c.transient {
				t.Fatalf("attempt 1: %s, want %s (transient %v)", runnertest.AttemptsText(f.Task), c.code, c.transient)
			}
			lines := strings.Split(c.stderr, "\n")
			if c.code != state.CodeExitStatus && a.Error.Message != lines[len(lines)-1] {
				t.Errorf("message %q, want the line that said it", a.Error.Message)
			}
			switch {
			case c.transient:
				if len(f.Task.Attempts) != 2 || a.Retry.Decision != state.DecisionRetried || f.Task.Phase != state.PhaseFailed {
					t.Errorf("a transient failure is replayed: %s, task %s", runnertest.AttemptsText(f.Task), f.Task.Phase)
				}
				if c.delay > 0 && a.Retry.Delay.D() != c.delay {
					t.Errorf("delay %s, want the %s the text asked for", a.Retry.Delay.D(), c.delay)
				}
			case len(f.Task.Attempts) != 1 || f.Task.Phase != state.PhaseFailed:
				t.Errorf("a permanent failure is not retried: %s, task %s", runnertest.AttemptsText(f.Task), f.Task.Phase)
			}
		})
	}
}

// What a command says on its stderr as the agent stops it is not why it
// failed: the agent's own limit is.
func TestStderrOfACommandTheAgentStoppedIsNotItsFailure(t *testing.T) {
	e, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", "echo '429 rate limit exceeded' >&2; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, e, "anything")
	f.Runner.Policy.MaxAttempts = 1
	f.Runner.Timeouts = runner.Timeouts{FirstEvent: []time.Duration{time.Minute}, Attempt: []time.Duration{300 * time.Millisecond}}
	f.Run(t, context.Background())
	if a := f.Task.Attempts[0]; a.Error == nil || a.Error.Code != state.CodeAttemptTimeout {
		t.Errorf("attempt: %s, want attempt_timeout", runnertest.AttemptsText(f.Task))
	}
}

// With on_side_effect ask, an attempt cut after a side effect, whose
// session could be continued, stops at the gate for a person: the task
// ends recoverable_failed, saying what they may do, and the timeline says
// why it was not continued.
func TestOnSideEffectAskStopsForAPerson(t *testing.T) {
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{}), "@side-effect pushed a branch\n@fail network\n@output done")
	f.Runner.WorkRoot = t.TempDir()
	f.Runner.Policy.OnSideEffect = state.OnSideEffectAsk
	f.Run(t, context.Background())
	a := f.Task.Attempts[0]
	if f.Task.Phase != state.PhaseRecoverableFailed || len(f.Task.Attempts) != 1 || !a.Retry.Asked || a.Retry.Decision != state.DecisionStopped || a.SessionPath == "" {
		t.Fatalf("task %s, attempts %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
	if !strings.Contains(f.Task.PhaseReason, "not continued on its own: side_effect, and on_side_effect is ask: a person decides (agent tasks continue, or agent tasks retry)") {
		t.Errorf("reason %q", f.Task.PhaseReason)
	}
	if tl := state.Timeline(f.Task, time.Now()); !strings.HasSuffix(tl[0], "-> blocked: side_effect, a person decides (on_side_effect ask)") {
		t.Errorf("timeline %q", tl[0])
	}
}
