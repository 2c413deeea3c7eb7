package taskview

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/state"
)

// Board is what tasks watch shows at one moment, by section.
type Board struct {
	Running  []*state.Task // claimed to completing, not waiting out a retry's backoff
	Retrying []*state.Task // a retry scheduled: the current attempt waits for its start
	Queued   []*state.Task
	Ended    []*state.Task // the last to end first, at most the number asked
	EndedAll int
	// QueueKnown: the source sees the queue (the control plane does; an
	// agent's data directory does not), so the board may count it.
	QueueKnown bool
}

// NewBoard sorts the tasks into the board's sections, keeping the recent
// last ended.
func NewBoard(tasks []*state.Task, recent int) Board {
	var b Board
	for _, t := range tasks {
		c := t.Current()
		switch {
		case t.Phase.Terminal():
			b.Ended = append(b.Ended, t)
		case t.Phase == state.PhaseQueued:
			b.Queued = append(b.Queued, t)
		case c != nil && c.Status == state.AttemptPending:
			b.Retrying = append(b.Retrying, t)
		default:
			b.Running = append(b.Running, t)
		}
	}
	slices.SortStableFunc(b.Ended, func(x, y *state.Task) int { return y.UpdatedAt.Compare(x.UpdatedAt) })
	b.EndedAll = len(b.Ended)
	b.Ended = b.Ended[:min(len(b.Ended), recent)]
	return b
}

// Unended counts the tasks on the board that have not ended: running,
// waiting out a retry, or queued.
func (b Board) Unended() int { return len(b.Running) + len(b.Retrying) + len(b.Queued) }

// Shown lists the tasks the board shows.
func (b Board) Shown() []*state.Task {
	return slices.Concat(b.Running, b.Retrying, b.Queued, b.Ended)
}

// Bold and its end, for the board's header and section titles.
const (
	ansiBold = "\x1b[1m"
	ansiOff  = "\x1b[0m"
)

// Render lays the board out for a terminal of width×height: a header
// (where the tasks are read from, and problem, why what it shows may be
// old), then each section. Lines are cut to the width, and the board to
// the height, saying how much did not fit. Text from tasks goes through
// Visible.
func (b Board) Render(where, problem string, p Palette, h Hint, now time.Time, width, height int) []string {
	var lines []string
	hinted := false // a hint was printed: its placeholders need saying
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	// A command a person may copy is never cut: it goes on the next lines,
	// broken between words with the shell's "\", when it does not fit.
	addCommand := func(head, command string) {
		hinted = true
		lines = append(lines, wrapCommand(head, command, "      ", width)...)
	}
	add("%sagent tasks watch%s  ·  %s  ·  %s  ·  q to quit", ansiBold, ansiOff, Visible(where), now.Format(time.TimeOnly))
	if b.QueueKnown {
		add("%d running · %d retry scheduled · %d queued · %d ended", len(b.Running), len(b.Retrying), len(b.Queued), b.EndedAll)
	} else {
		add("%d running · %d retry scheduled · %d ended · the queue is the control plane's (--remote shows it)", len(b.Running), len(b.Retrying), b.EndedAll)
	}
	if problem != "" {
		add("! %s (showing what was read last)", Visible(problem))
	}
	if len(b.Shown()) == 0 {
		add("")
		add("no tasks yet")
	}
	head := func(t *state.Task) string {
		return Visible(t.ID) + "  " + Visible(state.Ellipsize(t.Title, 40))
	}
	if len(b.Running) > 0 {
		add("")
		add("%sRunning%s", ansiBold, ansiOff)
		for _, t := range b.Running {
			line := "  " + head(t) + "  ·  " + p.Phase(t.Phase)
			if c := t.Current(); c != nil {
				line += fmt.Sprintf("  ·  attempt %s with %s  ·  %s", c.NumberText(), Visible(Dash(c.Model)), state.Compact(now.Sub(c.StartedAt)))
				if c.RetriedByPerson {
					line += "  ·  retried by a person"
				}
			}
			add("%s", line)
			add("    %s", strings.Join(p.Card(t), "  "))
			switch {
			case t.AwaitingReply != nil:
				add("    waiting for a person: %s", Visible(t.AwaitingReply.What()))
				addCommand("    answer with one of --accept, --decline:", h.Tasks("reply", t.ID, "--accept|--decline"))
			case t.Phase == state.PhaseParked && t.Parked != nil && t.Parked.Reason == state.ParkBudget:
				add("    %s", Visible(state.ParkedText(t)))
				addCommand("    raise it and continue:", h.Tasks("budget", t.ID, "--add-tokens N|--add-time D"))
			case t.Phase == state.PhaseParked:
				add("    %s", Visible(state.ParkedText(t)))
				addCommand("    continue it now:", h.Tasks("continue", t.ID, ""))
			case t.Progress.Message != "" || t.Progress.Percent > 0:
				add("    %3d%%  %s", t.Progress.Percent, Visible(t.Progress.Message))
			}
		}
	}
	if len(b.Retrying) > 0 {
		add("")
		add("%sRetry scheduled%s", ansiBold, ansiOff)
		for _, t := range b.Retrying {
			c := t.Current()
			after := ""
			if c.Number > 1 {
				if e := t.Attempts[c.Number-2].Error; e != nil {
					after = "  ·  after " + Visible(state.Ellipsize(e.Error(), 60))
				}
			}
			add("  %s  ·  attempt %s with %s %s%s", head(t), c.NumberText(), Visible(Dash(c.Model)), countdown(c.NotBefore.Sub(now)), after)
		}
	}
	if len(b.Queued) > 0 {
		add("")
		add("%sQueued%s", ansiBold, ansiOff)
		for _, t := range b.Queued {
			add("  %s  ·  queued %s", head(t), Ago(now, t.UpdatedAt))
		}
	}
	if len(b.Ended) > 0 {
		add("")
		add("%sEnded%s", ansiBold, ansiOff)
		for _, t := range b.Ended {
			line := "  " + head(t) + "  ·  " + p.Phase(t.Phase) + " " + Ago(now, t.UpdatedAt)
			if t.PhaseReason != "" {
				line += "  ·  " + Visible(t.PhaseReason)
			}
			add("%s", line)
			for _, l := range p.Timeline(t, now) {
				add("    %s", l)
			}
			if t.Phase == state.PhaseRecoverableFailed {
				addCommand("    a person decides:", h.Tasks("retry", t.ID, ""))
			}
		}
	}
	if s := h.Placeholders(); hinted && s != "" {
		add("")
		add("%s", s)
	}
	for i, l := range lines {
		lines[i] = fitWidth(l, width)
	}
	if len(lines) > height {
		lines = append(lines[:height-1], fmt.Sprintf("… %d more lines (a taller terminal, or --recent 0, shows them)", len(lines)-height+1))
	}
	return lines
}

// ansiSGR matches the board's own styling sequences: bold, colours, off.
var ansiSGR = regexp.MustCompile("\x1b\\[[0-9;]*m")

// wrapCommand is head and command on one line if they fit in width, else
// command broken between words over lines that end in " \\" (so that a
// shell reads them as one), each continuation after indent. A word longer
// than the width stays whole.
func wrapCommand(head, command, indent string, width int) []string {
	if len([]rune(head))+1+len([]rune(command)) <= width {
		return []string{head + " " + command}
	}
	lines := []string{head}
	cur := indent
	for _, w := range strings.Fields(command) {
		if cur != indent && len([]rune(cur))+1+len([]rune(w))+2 > width {
			lines = append(lines, cur+" \\")
			cur = indent + "  "
		}
		if cur != indent && cur != indent+"  " {
			cur += " "
		}
		cur += w
	}
	return append(lines, cur)
}

// countdown says when a retry starts: "in 3s", or "now".
func countdown(d time.Duration) string {
	if d <= 0 {
		return "now"
	}
	return "in " + state.Compact((d + time.Second - 1).Truncate(time.Second)) // 2.3 s is "in 3s"
}

// fitWidth cuts a line to width columns, not counting the bold and colour
// sequences the board uses (everything else in it is visible text, escape
// characters from tasks having gone through Visible). A line cut loses
// its colours.
func fitWidth(s string, width int) string {
	plain := ansiSGR.ReplaceAllString(s, "")
	if len([]rune(plain)) <= width {
		return s
	}
	return state.Ellipsize(plain, width)
}
