package state

import (
	"fmt"
	"strconv"
	"time"
)

// Usage is the tokens an attempt used, or a task's attempts together, as
// the executors' CLIs reported them: what the model read (input, cached
// input included) and wrote (output, reasoning included).
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// Add returns u and v together.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		TotalTokens: u.TotalTokens + v.TotalTokens}
}

// TaskUsage is what a task's attempts spent together: their tokens and
// their wall time (each attempt's from its start to its end; the backoff
// between attempts is not counted).
type TaskUsage struct {
	Usage
	WallTime Duration `json:"wall_time"`
}

// Usage adds up what the task's attempts spent; a running attempt's wall
// time runs to now.
func (t *Task) Usage(now time.Time) TaskUsage {
	var u TaskUsage
	for _, a := range t.Attempts {
		u.Usage = u.Usage.Add(a.Usage)
		u.WallTime += Duration(a.WallTime(now))
	}
	return u
}

// WallTime is how long the attempt ran: from its start to its end, or to
// now while it runs; zero before it started.
func (a *Attempt) WallTime(now time.Time) time.Duration {
	if a.StartedAt.IsZero() {
		return 0
	}
	end := a.CompletedAt
	if end.IsZero() {
		end = now
	}
	return max(end.Sub(a.StartedAt), 0)
}

// HasBudget reports whether the task carries a token or a wall-time
// budget.
func (t *Task) HasBudget() bool { return t.MaxTokens > 0 || t.MaxTime > 0 }

// BudgetText says what the task's budgets are, e.g. "10k tokens, 5m0s";
// "" when it has none.
func (t *Task) BudgetText() string {
	var s string
	if t.MaxTokens > 0 {
		s = Tokens(t.MaxTokens) + " tokens"
	}
	if t.MaxTime > 0 {
		if s != "" {
			s += ", "
		}
		s += t.MaxTime.D().String()
	}
	return s
}

// UsageText says what a task spent, e.g. "12.3k tokens (11.9k in, 402
// out), 1m02s".
func UsageText(u TaskUsage) string {
	return fmt.Sprintf("%s, %s", u.Usage.Text(), Compact(u.WallTime.D()))
}

// Text says what u is, e.g. "12.3k tokens (11.9k in, 402 out)".
func (u Usage) Text() string {
	return fmt.Sprintf("%s tokens (%s in, %s out)", Tokens(u.TotalTokens), Tokens(u.InputTokens), Tokens(u.OutputTokens))
}

// Tokens writes a count of tokens for people: "402", "12.3k", "1.2M".
func Tokens(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return trimZero(strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64)) + "k"
	default:
		return trimZero(strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64)) + "M"
	}
}

// trimZero drops a ".0" ending.
func trimZero(s string) string {
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}

// SetUsage records the tokens the current, open attempt used so far.
func (t *Task) SetUsage(attemptID string, u Usage) error {
	a, err := t.current(attemptID)
	if err != nil {
		return err
	}
	a.Usage = u
	return nil
}
