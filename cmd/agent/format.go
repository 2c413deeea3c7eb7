package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/edgeagent/agent/internal/taskview"
)

// ago renders how long ago t was, the way a person reads it.
func ago(now, t time.Time) string { return taskview.Ago(now, t) }

// age renders a duration coarsely: "12s", "3m", "5h", "2d".
func age(d time.Duration) string { return taskview.Age(d) }

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
func newTable(w io.Writer) *tabwriter.Writer { return taskview.NewTable(w) }

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// dash renders an empty string as "-".
func dash(s string) string { return taskview.Dash(s) }

// visible makes text from tasks, executors and the network safe to print
// on a terminal (taskview.Visible); --json output is exact and never goes
// through it.
func visible(s string) string { return taskview.Visible(s) }

// newPalette is the palette for output to w: on only for a terminal, and
// never with NO_COLOR set.
func newPalette(w io.Writer) taskview.Palette {
	return taskview.Palette{On: os.Getenv("NO_COLOR") == "" && isTerminal(w)}
}
