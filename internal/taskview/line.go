package taskview

import (
	"fmt"
	"io"
	"time"

	"github.com/edgeagent/agent/state"
)

// Line is what a follow shows of a task, one line: its phase and what it
// does now (progress, a scheduled retry, a question for a person, or why
// it ended), with the attempt against its limit once there was a retry
// ("attempt 2/3"). It depends on the task alone, so an unchanged task
// gives the same line and a follow prints it once. It is not yet made
// safe to print: see Visible.
func Line(t *state.Task) string {
	s := string(t.Phase)
	c := t.Current()
	switch {
	case t.Phase.Terminal() && t.PhaseReason != "":
		s += "  " + t.PhaseReason
	case t.Phase == state.PhaseParked:
		s += "  " + state.ParkedText(t)
	case c != nil && c.Status == state.AttemptPending:
		s += fmt.Sprintf("  attempt %s with %s after %s, at %s", c.NumberText(), Dash(c.Model), t.LastErrorCode, c.NotBefore.Local().Format(time.TimeOnly))
	case t.AwaitingReply != nil:
		s += "  waiting for a person: " + t.AwaitingReply.What()
	case t.Phase == state.PhaseQueued && t.Unroutable != "": // routing by capability
		s += "  unroutable: " + t.Unroutable
	case t.Progress.Message != "":
		s += "  " + t.Progress.Message
		if t.Progress.Percent > 0 {
			s += fmt.Sprintf(" (%d%%)", t.Progress.Percent)
		}
		if c != nil && c.Number > 1 {
			s += "  · attempt " + c.NumberText()
		}
	case c != nil:
		s += fmt.Sprintf("  attempt %s with %s", c.NumberText(), Dash(c.Model))
		if c.RetriedByPerson {
			s += ", retried by a person"
		}
	}
	return s
}

// PrintTimeline prints a task's attempt timeline, each row indented.
func PrintTimeline(w io.Writer, p Palette, t *state.Task, now time.Time, indent string) {
	for _, l := range p.Timeline(t, now) {
		fmt.Fprintf(w, "%s%s\n", indent, l)
	}
}

// Changes is the form of tasks watch for a pipe or a file: one line per
// change of a task, and its timeline when it ends. The first round
// prints what the board shows; later rounds, every task that changed.
type Changes struct {
	last    map[string]string
	started bool
}

// Print writes the lines of one round, from the tasks read in it; recent
// is how many ended tasks the first round shows.
func (c *Changes) Print(w io.Writer, p Palette, tasks []*state.Task, recent int, now time.Time) {
	show := tasks
	if !c.started {
		c.last = map[string]string{}
		show = NewBoard(tasks, recent).Shown()
		for _, t := range tasks {
			c.last[t.ID] = Line(t) // the others count from here
		}
		for _, t := range show {
			c.last[t.ID] = ""
		}
		c.started = true
	}
	for _, t := range show {
		line := Line(t)
		if c.last[t.ID] == line {
			continue
		}
		c.last[t.ID] = line
		fmt.Fprintf(w, "%s  %s  %-30s  %s\n", now.Format(time.TimeOnly), Visible(t.ID), Visible(state.Ellipsize(t.Title, 30)), Visible(line))
		if t.Phase.Terminal() {
			PrintTimeline(w, p, t, now, "    ")
		}
	}
}
