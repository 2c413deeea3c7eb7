package state

import (
	"strings"
	"testing"
	"time"
)

func TestProgressCardForEveryPhase(t *testing.T) {
	// d done, a active, p pending, f failed, s skipped; steps: Claimed,
	// Starting executor, Working, Waiting for reply, Completing, Done.
	// These tasks have no PhasesSeen, as files written before it was kept:
	// waiting for a reply is not known to have happened.
	cases := []struct {
		phase, before Phase
		want          string
	}{
		{PhaseQueued, "", "pppppp"},
		{PhaseClaimed, "", "appppp"},
		{PhaseExecutorStarting, "", "dapppp"},
		{PhaseTurnStarted, "", "ddappp"},
		{PhaseAwaitingReply, "", "dddapp"},
		{PhaseCompleting, "", "dddsap"},
		{PhaseParked, "", "ddappp"},
		{PhaseCompleted, PhaseCompleting, "dddsdd"},
		{PhaseFailed, PhaseTurnStarted, "ddfppp"},
		{PhaseRecoverableFailed, PhaseExecutorStarting, "dfpppp"},
		{PhaseTimedOut, PhaseAwaitingReply, "dddfpp"},
		{PhaseCancelled, PhaseClaimed, "fppppp"},
		{PhaseCancelled, PhaseQueued, "fppppp"},
		{PhaseExpired, PhaseQueued, "fppppp"},
	}
	seen := map[Phase]bool{}
	for _, c := range cases {
		seen[c.phase] = true
		task := &Task{Phase: c.phase, PhaseBefore: c.before}
		steps := ProgressCard(task)
		if got := cardCode(steps); got != c.want {
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

// cardCode is the card as one letter per step: d done, a active, p
// pending, f failed, s skipped.
func cardCode(steps []Step) string {
	code := map[StepStatus]byte{StepDone: 'd', StepActive: 'a', StepPending: 'p', StepFailed: 'f', StepSkipped: 's'}
	var b []byte
	for _, s := range steps {
		b = append(b, code[s.Status])
	}
	return string(b)
}

// TestProgressCardShowsOnlyThePhasesTheTaskWentThrough runs tasks through
// their phases as the runner and the control plane do: a task that never
// waited for a reply does not show "Waiting for reply" done, one that did
// does, and a task put back in the queue starts its record again.
func TestProgressCardShowsOnlyThePhasesTheTaskWentThrough(t *testing.T) {
	run := func(phases ...Phase) *Task {
		task := NewTask("t", "p", t0)
		for i, p := range phases {
			must(t, task.Transition(p, "", t0.Add(time.Duration(i)*time.Second)))
		}
		return task
	}
	cases := []struct {
		name   string
		phases []Phase
		want   string
	}{
		{"completed without waiting", []Phase{PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseCompleting, PhaseCompleted}, "dddsdd"},
		{"completed after a reply", []Phase{PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseAwaitingReply, PhaseTurnStarted, PhaseCompleting, PhaseCompleted}, "dddddd"},
		{"completing without waiting", []Phase{PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseCompleting}, "dddsap"},
		{"failed while working", []Phase{PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseFailed}, "ddfppp"},
		{"failed completing, never waited", []Phase{PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseCompleting, PhaseRecoverableFailed}, "dddsfp"},
		{"straight to completing", []Phase{PhaseClaimed, PhaseExecutorStarting, PhaseCompleting, PhaseCompleted}, "ddssdd"},
		{"cancelled while waiting", []Phase{PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseAwaitingReply, PhaseCancelled}, "dddfpp"},
	}
	for _, c := range cases {
		if got := cardCode(ProgressCard(run(c.phases...))); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// A person's retry puts the task back in the queue: what the first
	// run went through does not count for the second.
	task := run(PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseAwaitingReply, PhaseRecoverableFailed)
	must(t, task.RetryByPerson(t0.Add(time.Minute)))
	for _, p := range []Phase{PhaseClaimed, PhaseExecutorStarting, PhaseTurnStarted, PhaseCompleting, PhaseCompleted} {
		must(t, task.Transition(p, "", t0.Add(2*time.Minute)))
	}
	if got := cardCode(ProgressCard(task)); got != "dddsdd" {
		t.Errorf("after a person's retry: %s, want dddsdd (phases seen %v)", got, task.PhasesSeen)
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

// A continue, the runner's or a person's, shows as its own word on the
// attempt it followed, and the attempt that resumed the session says
// whose session and after what failure.
func TestTimelineOfContinuedAttempts(t *testing.T) {
	task := NewTask("t", "p", t0)
	must(t, task.Transition(PhaseClaimed, "", t0))
	_, err := task.StartFirstAttempt("a1", []string{"gpt-5"}, t0)
	must(t, err)
	must(t, task.BindSession("a1", "01a2-4f1c"))
	must(t, task.BindSessionPath("a1", "/sessions/4f1c.jsonl"))
	out := Outcome{Status: AttemptFailed, Error: &Error{Code: CodeAgentRestart, Message: "the agent restarted"},
		Retry: &RetryDecision{TechnicallyRetryable: true, Gate: GateAllowed, Decision: DecisionContinued, Delay: Duration(2 * time.Second)}}
	_, err = task.ScheduleRetry("a1", out, "a2", []string{"gpt-5"}, t0.Add(time.Minute))
	must(t, err)
	start2 := t0.Add(time.Minute + 2*time.Second)
	must(t, task.BeginAttempt("a2", start2))
	must(t, task.BindSession("a2", "01a2-4f1c"))
	must(t, task.FinalizeAttempt("a2", Outcome{Status: AttemptFailed, Error: &Error{Code: CodeNetwork, Message: "reset"},
		Retry: &RetryDecision{TechnicallyRetryable: true, Gate: GateToolExecuted, Decision: DecisionStopped}}, start2.Add(10*time.Second)))
	must(t, task.Transition(PhaseRecoverableFailed, "gate", start2.Add(10*time.Second)))
	// A person continues the session, on the agent that keeps it.
	must(t, task.ContinueByPerson("agent-1", start2.Add(time.Hour)))
	must(t, task.Transition(PhaseClaimed, "", start2.Add(time.Hour)))
	_, err = task.StartPersonRetry("a3", []string{"gpt-5"}, start2.Add(time.Hour))
	must(t, err)

	got := Timeline(task, start2.Add(time.Hour+5*time.Second))
	want := []string{
		"Attempt 1  failed   gpt-5  sess 4f1c  1m00s  agent_restart: the agent restarted  -> continued in 2s",
		"Attempt 2  failed   gpt-5  sess 4f1c    10s  network: reset                      -> blocked: tool_executed; continued by a person  attempt 2 continued attempt 1's session after agent_restart",
		"Attempt 3  running  gpt-5  sess -        5s  attempt 3 continued attempt 1's session after network",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	task.Attempts[0].Retry.Decision = DecisionRetried
	task.Attempts[1].Continues, task.Attempts[2].Continues = 0, 0
	for _, l := range Timeline(task, t0) {
		if strings.Contains(l, "continued") {
			t.Errorf("a replay shows as a continue: %q", l)
		}
	}
}

// A task's changes: its branch and base, how many commits with the first
// few subjects, and the diff stat.
func TestChangesLines(t *testing.T) {
	for _, c := range []struct {
		changes *Changes
		want    []string
	}{
		{nil, nil},
		{&Changes{Branch: "agent/t-1", Base: "main", BaseCommit: "3f9c2e1d0a", Commits: []Commit{{Subject: "fix the footer"}},
			Files: 1, Insertions: 2}, []string{"branch agent/t-1 from main (3f9c2e1)", "1 commit: fix the footer", "+2 -0 in 1 file"}},
		{&Changes{Branch: "agent/t-2", BaseCommit: "abc", Commits: []Commit{{Subject: "a"}, {Subject: "b"}, {Subject: "c"}, {Subject: "d"}},
			CommitsCut: 2, Files: 3, Insertions: 12, Deletions: 4, Uncommitted: true},
			[]string{"branch agent/t-2 from HEAD (abc)", "6 commits: a; b; c; and 3 more", "+12 -4 in 3 files, uncommitted changes"}},
		{&Changes{Branch: "agent/t-3", Base: "v2"}, []string{"branch agent/t-3 from v2", "0 commits", "+0 -0 in 0 files"}},
	} {
		if got := ChangesLines(c.changes); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%+v:\n%s\nwant:\n%s", c.changes, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
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

func TestPlainText(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain",
		"\x1b[2m2026-11-27T18:49:47Z\x1b[0m \x1b[31mERROR\x1b[0m codex": "2026-11-27T18:49:47Z ERROR codex",
		"\x1b[1;38;5;208mbold orange\x1b[m":                             "bold orange",
		"title \x1b]0;hijack\x07after":                                  "title after",
		"link \x1b]8;;http://x\x1b\\text\x1b]8;;\x1b\\":                 "link text",
		"cursor \x1b[2Jcleared \x1bcreset":                              "cursor cleared reset",
		"cut at the end \x1b[":                                          "cut at the end ",
		"lone \x1b":                                                     "lone ",
		"\u202e and \x07 stay":                                          "\u202e and \x07 stay",
	} {
		if got := PlainText(in); got != want {
			t.Errorf("PlainText(%q) = %q, want %q", in, got, want)
		}
	}
}

// What an attempt's network confinement refused shows on its line: how
// many connections and where to; an attempt that refused nothing says
// nothing of it.
func TestTimelineShowsWhatEgressRefused(t *testing.T) {
	task := NewTask("t", "p", t0)
	must(t, task.Transition(PhaseClaimed, "", t0))
	_, err := task.StartFirstAttempt("a1", []string{"gpt-5"}, t0)
	must(t, err)
	code := 0
	must(t, task.FinalizeAttempt("a1", Outcome{Status: AttemptCompleted, ExitCode: &code,
		Egress: &Egress{Denied: 3, Last: []string{"127.0.0.1:5432", "evil.example:443"}}}, t0.Add(4*time.Second)))
	got := Timeline(task, t0)
	if want := "Attempt 1  completed  gpt-5  sess -  4s  egress refused 3: 127.0.0.1:5432, evil.example:443"; len(got) != 1 || got[0] != want {
		t.Errorf("timeline %q, want %q", got, want)
	}
	task.Attempts[0].Egress = &Egress{}
	if got := Timeline(task, t0); strings.Contains(got[0], "egress") {
		t.Errorf("nothing refused, yet: %q", got[0])
	}
}

// The timeline shows each attempt against the limit it ran under, when
// its record keeps one, and lines up the columns whatever the widths.
func TestTimelineShowsTheAttemptAgainstItsLimit(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	task := &Task{ID: "t-1", Attempts: []Attempt{
		{Number: 1, MaxAttempts: 3, Status: AttemptFailed, Model: "m", StartedAt: now, CompletedAt: now.Add(time.Second),
			Error: &Error{Code: CodeRateLimit, Message: "429"}, Retry: &RetryDecision{TechnicallyRetryable: true, Gate: GateAllowed, Decision: DecisionRetried, Delay: Duration(time.Second)}},
		{Number: 2, MaxAttempts: 3, Status: AttemptCompleted, Model: "m", StartedAt: now, CompletedAt: now.Add(time.Second)},
	}}
	tl := Timeline(task, now)
	if len(tl) != 2 || !strings.HasPrefix(tl[0], "Attempt 1/3  failed     m") || !strings.HasPrefix(tl[1], "Attempt 2/3  completed  m") {
		t.Errorf("timeline:\n%s", strings.Join(tl, "\n"))
	}
	task.Attempts[1].MaxAttempts = 0 // a record from before limits were kept
	if tl = Timeline(task, now); !strings.HasPrefix(tl[1], "Attempt 2    completed") {
		t.Errorf("an attempt with no limit kept: %q", tl[1])
	}
}
