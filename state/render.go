package state

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// StepStatus is the status of one step of the progress card.
type StepStatus string

// The statuses of a step.
const (
	StepDone    StepStatus = "done"
	StepActive  StepStatus = "active"
	StepPending StepStatus = "pending"
	StepFailed  StepStatus = "failed"
	// StepSkipped: the task went past the step without it happening (it
	// never waited for a reply).
	StepSkipped StepStatus = "skipped"
)

// Step is one line of the progress card.
type Step struct {
	Name   string     `json:"name"`
	Status StepStatus `json:"status"`
}

// cardSteps are the card's steps and the phase each stands for.
var cardSteps = []struct {
	name  string
	phase Phase
}{
	{"Claimed", PhaseClaimed},
	{"Starting executor", PhaseExecutorStarting},
	{"Working", PhaseTurnStarted},
	{"Waiting for reply", PhaseAwaitingReply},
	{"Completing", PhaseCompleting},
	{"Done", PhaseCompleted},
}

// ParkedStep is what the progress card calls the Working step while the
// task is parked.
const ParkedStep = "Waiting for the limit to reset"

// BudgetParkedStep is what it calls the step while the task is parked at
// its budget.
const BudgetParkedStep = "Waiting for more budget"

// ParkedText says what a parked task waits for, in a line: "waiting for
// the limit to reset (usage_limit); resumes at 2026-11-27T22:00:05Z".
func ParkedText(t *Task) string {
	line := strings.ToLower(ParkedStep)
	if p := t.Parked; p != nil && p.Reason == ParkBudget {
		line = "waiting for a person to raise its budget (" + BudgetText(p.MaxTokens, p.MaxTime.D()) + " reached)"
		if !p.ContinueAsked.IsZero() {
			line += "; a person raised it"
		}
		return line
	}
	if p := t.Parked; p != nil {
		line += " (" + PlainText(string(p.Reason)) + ")"
		if !p.ResumesAt.IsZero() {
			line += "; resumes at " + p.ResumesAt.UTC().Format(time.RFC3339)
		}
		if !p.ContinueAsked.IsZero() {
			line += "; a person asked to continue it now"
		}
	}
	return line
}

// BudgetText says a budget: "1k tokens, 20m0s"; "no bound" when it has
// none.
func BudgetText(tokens int64, wall time.Duration) string {
	var parts []string
	if tokens > 0 {
		parts = append(parts, Tokens(tokens)+" tokens")
	}
	if wall > 0 {
		parts = append(parts, wall.String())
	}
	if len(parts) == 0 {
		return "no bound"
	}
	return strings.Join(parts, ", ")
}

// ProgressCard derives the card from the task's phase: steps before the
// phase's step are done if the task went through them (PhasesSeen) and
// skipped if not, its step is active, later ones pending. A completed task
// has every step it went through done. A task that ended otherwise shows
// the step it was at as failed; a task that expired in the queue fails at
// Claimed. A task stored before PhasesSeen was kept counts every step but
// Waiting for reply as gone through. A parked task shows the Working
// step active, as ParkedStep.
func ProgressCard(t *Task) []Step {
	at, status := -1, StepActive
	phase, parked := t.Phase, ""
	switch {
	case phase == PhaseCompleted:
		at, status = len(cardSteps)-1, StepDone
	case phase.Terminal():
		phase, status = t.PhaseBefore, StepFailed
	case phase == PhaseParked:
		// Its work waits at a limit: the Working step, named for what
		// it waits for.
		phase, parked = PhaseTurnStarted, ParkedStep
		if t.Parked != nil && t.Parked.Reason == ParkBudget {
			parked = BudgetParkedStep
		}
	}
	for i, s := range cardSteps {
		if s.phase == phase {
			at = i
		}
	}
	if phase == PhaseQueued && status == StepFailed {
		at = 0 // it never got claimed
	}
	steps := make([]Step, len(cardSteps))
	for i, s := range cardSteps {
		steps[i] = Step{Name: s.name, Status: StepPending}
		switch {
		case i < at && t.wentThrough(s.phase):
			steps[i].Status = StepDone
		case i < at:
			steps[i].Status = StepSkipped
		case i == at:
			steps[i].Status = status
			if parked != "" {
				steps[i].Name = parked
			}
		}
	}
	return steps
}

// wentThrough reports whether the task was in running phase p since it
// last left the queue.
func (t *Task) wentThrough(p Phase) bool {
	if t.PhasesSeen == nil {
		return p != PhaseAwaitingReply // an older file: only waiting is known to be optional
	}
	return slices.Contains(t.PhasesSeen, p)
}

// Timeline renders one line per attempt, its number against its limit
// when it is known, for example:
//
//	Attempt 1/3  failed     gpt-5-mini  sess 4f1c  2m03s  rate_limit: 429 Too Many Requests  -> retried in 4s
//	Attempt 2/3  failed     gpt-5       sess 9a2e    41s  stdio closed before result          -> blocked: tool_executed
//	Attempt 3/3  completed  gpt-5       sess 77b0  1m12s
//
// An attempt that resumed an earlier one's session says so last, with the
// code of the failure it followed: "attempt 3 continued attempt 2's
// session after agent_restart"; one that was refused tool calls says how
// many ("2 tool calls denied"); one whose network confinement refused
// connections says how many and where to ("egress refused 2:
// evil.example:443, 127.0.0.1:5432"). A running attempt's duration runs to now.
// When an attempt reported the tokens it used, each line shows its tokens
// after its duration ("12.3k tok"). A cancel asked of the task is said on
// the last line, when it did not cancel it (CancelNote): which of a cancel
// and an ending that crossed came first.
func Timeline(t *Task, now time.Time) []string {
	type row struct{ head, status, model, sess, dur, tok, err, decision, note string }
	rows := make([]row, len(t.Attempts))
	var wHead, wStatus, wModel, wSess, wDur, wTok, wErr int
	usage := false
	for _, a := range t.Attempts {
		usage = usage || a.Usage != (Usage{})
	}
	for i, a := range t.Attempts {
		r := row{head: "Attempt " + a.NumberText(), status: string(a.Status), model: dashIfEmpty(a.Model)}
		r.sess = "sess " + dashIfEmpty(shortID(a.SessionID))
		if !a.StartedAt.IsZero() {
			end := a.CompletedAt
			if end.IsZero() {
				end = now
			}
			r.dur = Compact(end.Sub(a.StartedAt))
		} else {
			r.dur = "-"
		}
		if usage {
			r.tok = Tokens(a.Usage.TotalTokens) + " tok"
		}
		if a.Error != nil {
			r.err = a.Error.Error()
		}
		r.decision = decisionText(a)
		if i+1 < len(t.Attempts) && t.Attempts[i+1].RetriedByPerson {
			if r.decision != "" {
				r.decision += "; "
			}
			if t.Attempts[i+1].Continues > 0 {
				r.decision += "continued by a person"
			} else {
				r.decision += "retried by a person"
			}
		}
		if i > 0 {
			r.note = continuedText(a, t.Attempts[i-1])
		}
		if d := DeniedText(a.Denied.Count); d != "" {
			r.note = strings.TrimPrefix(r.note+"; "+d, "; ")
		}
		if e := egressText(a); e != "" {
			r.note = strings.TrimPrefix(r.note+"; "+e, "; ")
		}
		if k := KeptText(a); k != "" {
			r.note = strings.TrimPrefix(r.note+"; "+k, "; ")
		}
		if c := CancelNote(t); c != "" && i == len(t.Attempts)-1 {
			r.note = strings.TrimPrefix(r.note+"; "+c, "; ")
		}
		rows[i] = r
		wHead, wStatus, wModel, wSess = max(wHead, len(r.head)), max(wStatus, len(r.status)), max(wModel, len(r.model)), max(wSess, len(r.sess))
		wDur, wTok, wErr = max(wDur, len(r.dur)), max(wTok, len(r.tok)), max(wErr, len([]rune(r.err)))
	}
	lines := make([]string, len(rows))
	for i, r := range rows {
		l := fmt.Sprintf("%-*s  %-*s  %-*s  %-*s  %*s", wHead, r.head, wStatus, r.status, wModel, r.model, wSess, r.sess, wDur, r.dur)
		if usage {
			l += fmt.Sprintf("  %*s", wTok, r.tok)
		}
		if r.err != "" || r.decision != "" {
			l += "  " + r.err + strings.Repeat(" ", wErr-len([]rune(r.err)))
		}
		if r.decision != "" {
			l += "  " + r.decision
		}
		if r.note != "" {
			l = strings.TrimRight(l, " ") + "  " + r.note
		}
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

// RetryReminder says what followed failed attempt number n of t, when
// its decision opened the next attempt on its own (a replay or a
// continue): "attempt 2/3 with gpt-5 in 4s, after rate_limit: 429 Too
// Many Requests" (", continuing attempt 1's session," for a continue);
// "" otherwise. A parent waiting on its subtasks hears it (agent subtask
// wait), once an attempt, whether or not it saw the backoff pass.
func RetryReminder(t *Task, n int) string {
	if n < 1 || n >= len(t.Attempts) {
		return ""
	}
	failed, next := &t.Attempts[n-1], &t.Attempts[n]
	if failed.Retry == nil || !failed.Retry.Decision.Next() || next.RetriedByPerson {
		return ""
	}
	s := "attempt " + next.NumberText()
	if next.Model != "" {
		s += " with " + next.Model
	}
	if next.Continues > 0 {
		s += fmt.Sprintf(", continuing attempt %d's session,", next.Continues)
	}
	s += " in " + Compact(failed.Retry.Delay.D())
	if failed.Error != nil {
		s += ", after " + failed.Error.Error()
	}
	return s
}

// egressText says what an attempt's network confinement refused, if it
// refused anything: "egress refused 3: evil.example:443, 10.0.0.1:5432".
func egressText(a Attempt) string {
	if a.Egress == nil || a.Egress.Denied == 0 {
		return ""
	}
	s := fmt.Sprintf("egress refused %d", a.Egress.Denied)
	if len(a.Egress.Last) > 0 {
		s += ": " + strings.Join(a.Egress.Last, ", ")
	}
	return s
}

// continuedText says which session attempt a resumed, if it resumed one,
// and after what failure of the attempt before it.
func continuedText(a, before Attempt) string {
	if a.Continues <= 0 {
		return ""
	}
	s := fmt.Sprintf("attempt %d continued attempt %d's session", a.Number, a.Continues)
	if before.Error != nil && before.Error.Code != "" {
		s += " after " + string(before.Error.Code)
	}
	return s
}

// KeptText says where a replay kept what the attempt before it left:
// "attempt 1's work kept on refs/agent/kept/t-1/attempt-1"; "" when it
// kept nothing.
func KeptText(a Attempt) string {
	if a.KeptRef == "" {
		return ""
	}
	who := "the earlier work"
	if i := strings.LastIndex(a.KeptRef, "/attempt-"); i >= 0 {
		n, _, _ := strings.Cut(a.KeptRef[i+len("/attempt-"):], ".")
		who = "attempt " + n + "'s work"
	}
	return who + " kept on " + a.KeptRef
}

func decisionText(a Attempt) string {
	switch {
	case a.Retry == nil:
		return ""
	case a.Retry.Decision == DecisionRetried:
		return "-> retried in " + Compact(a.Retry.Delay.D())
	case a.Retry.Decision == DecisionContinued:
		return "-> continued in " + Compact(a.Retry.Delay.D())
	case !a.Retry.TechnicallyRetryable && a.Error != nil && (a.Error.Code == CodeCancelled || a.Error.Code == CodeAgentShutdown || a.Error.Code == CodeBudgetExceeded):
		return "-> stopped: " + string(a.Error.Code)
	case !a.Retry.TechnicallyRetryable:
		return "-> stopped: permanent"
	case a.Retry.Asked:
		return "-> blocked: " + string(a.Retry.Gate) + ", a person decides (on_side_effect ask)"
	case a.Retry.Gate != "" && a.Retry.Gate != GateAllowed:
		return "-> blocked: " + string(a.Retry.Gate)
	default:
		return "-> stopped"
	}
}

// ChangesLines renders what a task changed in its repository, for example:
//
//	branch agent/t-0a1b2c from main (3f9c2e1)
//	3 commits: fix the footer; add a test; bump the version
//	+12 -4 in 3 files, uncommitted changes
//
// The commits line names the first three subjects, then how many more.
func ChangesLines(c *Changes) []string {
	if c == nil {
		return nil
	}
	from := c.Base
	if from == "" {
		from = "HEAD"
	}
	if c.BaseCommit != "" {
		from += " (" + shortSHA(c.BaseCommit) + ")"
	}
	lines := []string{fmt.Sprintf("branch %s from %s", dashIfEmpty(c.Branch), from)}
	n := len(c.Commits) + c.CommitsCut
	commits := fmt.Sprintf("%d commits", n)
	if n == 1 {
		commits = "1 commit"
	}
	const shown = 3
	var subjects []string
	for _, cm := range c.Commits[:min(len(c.Commits), shown)] {
		subjects = append(subjects, cm.Subject)
	}
	if len(subjects) > 0 {
		commits += ": " + strings.Join(subjects, "; ")
		if more := n - len(subjects); more > 0 {
			commits += fmt.Sprintf("; and %d more", more)
		}
	}
	lines = append(lines, commits)
	files := "files"
	if c.Files == 1 {
		files = "file"
	}
	diff := fmt.Sprintf("+%d -%d in %d %s", c.Insertions, c.Deletions, c.Files, files)
	if c.Uncommitted {
		diff += ", uncommitted changes"
	}
	return append(lines, diff)
}

// PushText says what became of the push of a task's branch: "pushed
// agent/t-1 to origin (3f9c2e1)", the failure, or "" when the agent was
// not asked to push it.
func PushText(c *Changes) string {
	switch {
	case c == nil:
		return ""
	case c.PushError != "" && c.Pushed != nil:
		return fmt.Sprintf("pushed %s to %s (%s); %s", c.Pushed.Branch, c.Pushed.Remote, shortSHA(c.Pushed.Commit), c.PushError)
	case c.PushError != "":
		return "not pushed: " + c.PushError
	case c.Pushed != nil:
		return fmt.Sprintf("pushed %s to %s (%s)", c.Pushed.Branch, c.Pushed.Remote, shortSHA(c.Pushed.Commit))
	}
	return ""
}

// shortSHA is the start of a commit's id, as git shows it.
func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}

// Compact renders a duration the way the timeline shows it: "41s",
// "2m03s", "1h02m", and "350ms" below a second.
func Compact(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// shortID is the end of a session id: Codex's thread ids are UUIDv7,
// whose first digits are a timestamp shared by every attempt of a run.
func shortID(s string) string {
	if len(s) > 4 {
		return s[len(s)-4:]
	}
	return s
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Ellipsize shortens s to at most n characters, ending it with "…" when
// it had to be cut.
func Ellipsize(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:max(n-1, 0)]) + "…"
	}
	return s
}

// PlainText is s without the terminal's escape sequences: colours and
// other CSI sequences (ESC [ … final byte), OSC sequences (ESC ] … BEL or
// ESC \), and any other escape with the byte after it. CLIs colour what
// they print for a terminal; a log shows the text. What else s holds is
// kept: the printing commands still show control characters inert.
func PlainText(s string) string {
	i := strings.IndexByte(s, 0x1b)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c != 0x1b {
			b.WriteByte(c)
			i++
			continue
		}
		i++ // ESC
		switch {
		case i >= len(s):
		case s[i] == '[': // CSI: parameters and intermediates, then a final byte in @–~
			i++
			for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
				i++
			}
			i++
		case s[i] == ']': // OSC: until BEL or ST (ESC \)
			i++
			for i < len(s) && s[i] != 0x07 && !(s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\') {
				i++
			}
			if i < len(s) && s[i] == 0x1b {
				i++
			}
			i++
		default:
			i++
		}
	}
	return b.String()
}
