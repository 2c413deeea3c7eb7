package state

import (
	"strings"
	"testing"
	"time"
)

func TestProgressCardForEveryPhase(t *testing.T) {
	// d done, a active, p pending, f failed; steps: Claimed, Starting
	// executor, Working, Waiting for reply, Completing, Done.
	cases := []struct {
		phase, before Phase
		want          string
	}{
		{PhaseQueued, "", "pppppp"},
		{PhaseClaimed, "", "appppp"},
		{PhaseExecutorStarting, "", "dapppp"},
		{PhaseTurnStarted, "", "ddappp"},
		{PhaseAwaitingReply, "", "dddapp"},
		{PhaseCompleting, "", "ddddap"},
		{PhaseCompleted, PhaseCompleting, "dddddd"},
		{PhaseFailed, PhaseTurnStarted, "ddfppp"},
		{PhaseRecoverableFailed, PhaseExecutorStarting, "dfpppp"},
		{PhaseTimedOut, PhaseAwaitingReply, "dddfpp"},
		{PhaseCancelled, PhaseClaimed, "fppppp"},
		{PhaseCancelled, PhaseQueued, "fppppp"},
		{PhaseExpired, PhaseQueued, "fppppp"},
	}
	code := map[StepStatus]byte{StepDone: 'd', StepActive: 'a', StepPending: 'p', StepFailed: 'f'}
	seen := map[Phase]bool{}
	for _, c := range cases {
		seen[c.phase] = true
		task := &Task{Phase: c.phase, PhaseBefore: c.before}
		steps := ProgressCard(task)
		var got []byte
		for _, s := range steps {
			got = append(got, code[s.Status])
		}
		if string(got) != c.want {
			t.Errorf("%s (from %s): %s, want %s", c.phase, c.before, got, c.want)
		}
		if steps[0].Name != "Claimed" || steps[5].Name != "Done" {
			t.Errorf("step names: %+v", steps)
		}
	}
	for _, p := range Phases {
		if !seen[p] {
			t.Errorf("phase %s has no card case", p)
		}
	}
}

// TestTimelineMatchesTheSpec renders the SPEC's example and compares it
// line for line (with columns aligned two spaces apart).
func TestTimelineMatchesTheSpec(t *testing.T) {
	task := NewTask("t", "p", t0)
	must(t, task.Transition(PhaseClaimed, "", t0))
	models := []string{"gpt-5-mini", "gpt-5"}
	_, err := task.StartFirstAttempt("a1", models, t0)
	must(t, err)
	must(t, task.BindSession("a1", "01a2-4f1c"))
	end1 := t0.Add(2*time.Minute + 3*time.Second)
	out := retried("rate_limit", 4*time.Second)
	out.Error.Message = "429 Too Many Requests"
	_, err = task.ScheduleRetry("a1", out, "a2", models, end1)
	must(t, err)
	start2 := end1.Add(4 * time.Second)
	must(t, task.BeginAttempt("a2", start2))
	must(t, task.BindSession("a2", "01a2-9a2e"))
	end2 := start2.Add(41 * time.Second)
	must(t, task.FinalizeAttempt("a2", Outcome{Status: AttemptFailed, Error: &Error{Message: "stdio closed before result"},
		Retry: &RetryDecision{TechnicallyRetryable: true, Gate: "tool_executed", Decision: DecisionStopped}}, end2))
	// The third attempt is one a person started after the block.
	task.Attempts = append(task.Attempts, Attempt{AttemptID: "a3", Number: 3, Model: "gpt-5", SessionID: "01a2-77b0",
		Status: AttemptCompleted, StartedAt: end2, CompletedAt: end2.Add(72 * time.Second)})

	want := []string{
		"Attempt 1  failed     gpt-5-mini  sess 4f1c  2m03s  rate_limit: 429 Too Many Requests  -> retried in 4s",
		"Attempt 2  failed     gpt-5       sess 9a2e    41s  stdio closed before result         -> blocked: tool_executed",
		"Attempt 3  completed  gpt-5       sess 77b0  1m12s",
	}
	got := Timeline(task, end2)
	if strings.Index(got[0], "->") != strings.Index(got[1], "->") {
		t.Errorf("decisions are not aligned:\n%s\n%s", got[0], got[1])
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTimelineOfARunningAttemptAndAPermanentStop(t *testing.T) {
	task := NewTask("t", "p", t0)
	must(t, task.Transition(PhaseClaimed, "", t0))
	task.StartFirstAttempt("a1", nil, t0)
	got := Timeline(task, t0.Add(5*time.Second))
	if len(got) != 1 || got[0] != "Attempt 1  running  -  sess -  5s" {
		t.Errorf("running: %q", got)
	}
	must(t, task.FinalizeAttempt("a1", Outcome{Status: AttemptFailed, Error: &Error{Code: "quota", Message: "quota exceeded"},
		Retry: &RetryDecision{Decision: DecisionStopped}}, t0.Add(6*time.Second)))
	if got := Timeline(task, t0); !strings.HasSuffix(got[0], "quota: quota exceeded  -> stopped: permanent") {
		t.Errorf("permanent: %q", got)
	}
}

func TestCompactDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		350 * time.Millisecond: "350ms", 41 * time.Second: "41s", 123 * time.Second: "2m03s",
		72 * time.Second: "1m12s", 62 * time.Minute: "1h02m", -time.Second: "0s",
	} {
		if got := Compact(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}

func TestEllipsize(t *testing.T) {
	for in, want := range map[string]string{"short": "short", "exactly10!": "exactly10!", "a bit too long": "a bit too…", "héllo wörld!": "héllo wör…"} {
		if got := Ellipsize(in, 10); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
