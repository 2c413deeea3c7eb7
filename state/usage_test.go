package state

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestTaskUsageAddsUpItsAttempts(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	task := &Task{Attempts: []Attempt{
		{Number: 1, Status: AttemptFailed, StartedAt: t0, CompletedAt: t0.Add(10 * time.Second),
			Usage: Usage{InputTokens: 900, OutputTokens: 100, TotalTokens: 1000}},
		{Number: 2, Status: AttemptRunning, StartedAt: t0.Add(20 * time.Second),
			Usage: Usage{InputTokens: 40, OutputTokens: 2, TotalTokens: 42}},
		{Number: 3, Status: AttemptPending, NotBefore: t0.Add(time.Minute)}, // not started: no time
	}}
	u := task.Usage(t0.Add(25 * time.Second))
	want := TaskUsage{Usage: Usage{InputTokens: 940, OutputTokens: 102, TotalTokens: 1042}, WallTime: Duration(15 * time.Second)}
	if u != want {
		t.Fatalf("usage %+v, want %+v (the backoff between attempts is not counted; a running attempt runs to now)", u, want)
	}
	if got := UsageText(u); got != "1k tokens (940 in, 102 out), 15s" {
		t.Errorf("UsageText = %q", got)
	}
	b, _ := json.Marshal(u)
	if string(b) != `{"input_tokens":940,"output_tokens":102,"total_tokens":1042,"wall_time":"15s"}` {
		t.Errorf("JSON %s", b)
	}
}

func TestTokens(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 402: "402", 1000: "1k", 12345: "12.3k", 999_999: "1000k", 1_250_000: "1.2M"} {
		if got := Tokens(n); got != want {
			t.Errorf("Tokens(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestBudgetText(t *testing.T) {
	cases := []struct {
		task Task
		want string
	}{
		{Task{}, ""},
		{Task{MaxTokens: 5000}, "5k tokens"},
		{Task{MaxTime: Duration(90 * time.Second)}, "1m30s"},
		{Task{MaxTokens: 200, MaxTime: Duration(time.Minute)}, "200 tokens, 1m0s"},
	}
	for _, c := range cases {
		if got := c.task.BudgetText(); got != c.want || c.task.HasBudget() != (c.want != "") {
			t.Errorf("%+v: %q (has %v), want %q", c.task, got, c.task.HasBudget(), c.want)
		}
	}
}

func TestTimelineShowsTokensWhenReported(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	task := &Task{Attempts: []Attempt{
		{Number: 1, Status: AttemptFailed, Model: "m", StartedAt: t0, CompletedAt: t0.Add(3 * time.Second),
			Error: &Error{Code: CodeBudgetExceeded, Message: "1.2k tokens passed the budget of 1k"},
			Retry: &RetryDecision{Gate: GateBudget, Decision: DecisionStopped}, Usage: Usage{TotalTokens: 1200}},
	}}
	lines := Timeline(task, t0)
	if len(lines) != 1 || !strings.Contains(lines[0], "3s  1.2k tok  budget_exceeded: 1.2k tokens passed the budget of 1k  -> stopped: budget_exceeded") {
		t.Errorf("timeline %q", lines)
	}
	task.Attempts[0].Usage = Usage{}
	if lines := Timeline(task, t0); strings.Contains(lines[0], " tok ") {
		t.Errorf("a timeline without usage shows tokens: %q", lines)
	}
}
