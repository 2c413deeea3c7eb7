package taskview

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/edgeagent/agent/state"
)

// SubtaskEnd prints how a subtask ended, for its parent (subtask wait):
// its id, phase and title, its result, and its attempt timeline.
func SubtaskEnd(w io.Writer, p Palette, t *state.Task, now time.Time) {
	phase := p.Phase(t.Phase)
	if t.PhaseReason != "" && t.Phase != state.PhaseCompleted {
		phase += " (" + Visible(t.PhaseReason) + ")"
	}
	fmt.Fprintf(w, "%s  %s  %s\n", Visible(t.ID), phase, Visible(t.Title))
	if t.Result != nil && t.Result.Summary != "" {
		fmt.Fprintf(w, "  result: %s\n", Visible(t.Result.Summary))
	}
	PrintTimeline(w, p, t, now, "  ")
}

// Subtasks prints one row per subtask (subtask ls): id, phase, title.
func Subtasks(w io.Writer, p Palette, kids []*state.Task) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPHASE\tTITLE")
	for _, k := range kids {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", Visible(k.ID), p.Phase(k.Phase), Visible(k.Title))
	}
	tw.Flush()
}

// SubtaskTree prints a task's place in its tree for tasks show: its
// parent, and its subtasks with their phases (those get can read; the
// others by id).
func SubtaskTree(ctx context.Context, w io.Writer, p Palette, t *state.Task, get func(ctx context.Context, id string) (*state.Task, error)) {
	if t.Parent != "" {
		fmt.Fprintf(w, "\nparent:   %s (depth %d)\n", Visible(t.Parent), t.Depth)
	}
	if len(t.Children) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsubtasks:\n")
	for _, id := range t.Children {
		k, err := get(ctx, id)
		if err != nil || k == nil {
			fmt.Fprintf(w, "  %s\n", Visible(id))
			continue
		}
		fmt.Fprintf(w, "  %s  %s  %s\n", Visible(k.ID), p.Phase(k.Phase), Visible(k.Title))
	}
}
