package taskview

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/edgeagent/agent/state"
)

// NewTable returns a writer that aligns tab-separated columns.
func NewTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// Table prints one row per task (tasks ls): a running one's progress, an
// ended one's result. With colour, every phase is coloured (if only
// plain), so the columns after it stay aligned.
func Table(w io.Writer, p Palette, tasks []*state.Task, now time.Time) error {
	if len(tasks) == 0 {
		fmt.Fprintln(w, "no tasks")
		return nil
	}
	tw := NewTable(w)
	fmt.Fprintf(tw, "ID\tTITLE\t%s\tATTEMPTS\tMODEL\tPROGRESS\tUPDATED\n", p.Paint(ColourPlain, "PHASE"))
	for _, t := range tasks {
		model, progress, width := "-", "-", 30
		if c := t.Current(); c != nil && c.Model != "" {
			model = c.Model
		}
		switch {
		case t.Phase.Terminal():
			// Its result, not the last progress it reported on its way.
			progress, width = state.ResultLine(t), 60
		case t.Progress.Message != "" || t.Progress.Percent > 0:
			progress = fmt.Sprintf("%d%% %s", t.Progress.Percent, t.Progress.Message)
		case t.Phase == state.PhaseQueued && t.Unroutable != "": // routing by capability
			progress, width = "unroutable: "+t.Unroutable, 60
		case t.Phase == state.PhaseQueued && len(t.Requires) > 0:
			progress, width = "requires "+state.RequirementsText(t.Requires), 60
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", Visible(t.ID), Visible(truncateMiddle(t.Title, 40)), p.Phase(t.Phase), len(t.Attempts), Visible(model),
			Visible(truncateMiddle(progress, width)), Ago(now, t.UpdatedAt))
	}
	return tw.Flush()
}
