package main

import (
	"encoding/json"
	"io"

	"github.com/edgeagent/agent/internal/bytesize"
)

// bytesHuman renders a byte count: "512 B", "3.2 KiB", "1.5 GiB".
func bytesHuman(n int64) string { return bytesize.Tenths(n) }

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
