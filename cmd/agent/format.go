package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgeagent/agent/state"
)

// ago renders how long ago t was, the way a person reads it: "12s ago",
// "3m ago", "5h ago", "2d ago".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return age(now.Sub(t)) + " ago"
}

// age renders a duration coarsely: "12s", "3m", "5h", "2d".
func age(d time.Duration) string {
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// bytesHuman renders a byte count: "512 B", "3.2 KiB", "1.5 GiB".
func bytesHuman(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// newTable returns a writer that aligns tab-separated columns.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// dash renders an empty string as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// visible makes text from tasks, executors and the network safe to print
// on a terminal: control characters (escape sequences above all), bidi
// controls and invalid UTF-8 are shown as Go escapes (\x1b, \n, \u202e)
// rather than obeyed. --json output is exact and never goes through it.
func visible(s string) string {
	clean := true
	for _, r := range s {
		if needsEscape(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case needsEscape(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// palette colours what the tasks commands print for a person: phases,
// the progress card's steps and the timeline's attempts. It is on only
// for a terminal, and never with NO_COLOR set; --json never goes through
// it.
type palette struct{ on bool }

// newPalette is the palette for output to w.
func newPalette(w io.Writer) palette {
	return palette{on: os.Getenv("NO_COLOR") == "" && isTerminal(w)}
}

// The colours. Each is as long as the others, so that columns aligned by
// a tabwriter stay aligned whatever colour a cell has.
const (
	colourPlain  = "\x1b[39m" // the terminal's own foreground
	colourRed    = "\x1b[31m"
	colourGreen  = "\x1b[32m"
	colourYellow = "\x1b[33m"
	colourCyan   = "\x1b[36m"
	colourOff    = "\x1b[0m"
)

// paint wraps s in colour c, if the palette is on.
func (p palette) paint(c, s string) string {
	if !p.on {
		return s
	}
	return c + s + colourOff
}

// phaseColour: completed green; failed, timed out and expired red; the
// ends a person decides on (recoverable_failed, cancelled), a task
// waiting for a person and a parked one yellow; the other running phases
// cyan.
func phaseColour(ph state.Phase) string {
	switch {
	case ph == state.PhaseCompleted:
		return colourGreen
	case ph == state.PhaseFailed || ph == state.PhaseTimedOut || ph == state.PhaseExpired:
		return colourRed
	case ph == state.PhaseRecoverableFailed || ph == state.PhaseCancelled || ph == state.PhaseAwaitingReply || ph == state.PhaseParked:
		return colourYellow
	case ph.Running():
		return colourCyan
	}
	return colourPlain
}

// phase is the phase's name, in its colour.
func (p palette) phase(ph state.Phase) string { return p.paint(phaseColour(ph), visible(string(ph))) }

// stepColours colour the progress card's steps by status.
var stepColours = map[state.StepStatus]string{
	state.StepDone: colourGreen, state.StepActive: colourCyan, state.StepFailed: colourRed,
	state.StepPending: colourPlain, state.StepSkipped: colourPlain,
}

// step is a step of the progress card with its mark, in its colour.
func (p palette) step(s state.Step) string {
	return p.paint(stepColours[s.Status], stepMarks[s.Status]+" "+s.Name)
}

// attempt colours a's line of the timeline: completed green; running
// cyan; failed red, or yellow when what stopped it leaves the choice to a
// person (the gate blocked it) or it was retried.
func (p palette) attempt(a state.Attempt, line string) string {
	c := colourPlain
	switch a.Status {
	case state.AttemptCompleted:
		c = colourGreen
	case state.AttemptRunning:
		c = colourCyan
	case state.AttemptFailed, state.AttemptCancelled:
		c = colourRed
		if r := a.Retry; r != nil && (r.Decision.Next() || r.TechnicallyRetryable && r.Gate != "" && r.Gate != state.GateAllowed) {
			c = colourYellow
		}
	}
	return p.paint(c, line)
}

// timeline is the task's attempt timeline, one line per attempt, each
// made safe to print and in its attempt's colour.
func (p palette) timeline(t *state.Task, now time.Time) []string {
	lines := state.Timeline(t, now)
	for i, l := range lines {
		lines[i] = p.paint(colourPlain, visible(l))
		if i < len(t.Attempts) {
			lines[i] = p.attempt(t.Attempts[i], visible(l))
		}
	}
	return lines
}
