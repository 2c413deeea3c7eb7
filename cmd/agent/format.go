package main

import (
	"encoding/json"
	"io"
	"os"

	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/internal/taskview"
)

// bytesHuman renders a byte count: "512 B", "3.2 KiB", "1.5 GiB".
func bytesHuman(n int64) string { return bytesize.Tenths(n) }

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newPalette is the palette for output to w: on only for a terminal, and
// never with NO_COLOR set.
func newPalette(w io.Writer) taskview.Palette {
	return taskview.Palette{On: os.Getenv("NO_COLOR") == "" && taskview.IsTerminal(w)}
}
