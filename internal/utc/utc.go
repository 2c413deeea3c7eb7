// Package utc keeps the times the agent stores and sends in UTC: task
// files, health files, API bodies and JSON logs are read by machines and
// compared across them. People see local times where the CLI prints for
// them.
package utc

import (
	"log/slog"
	"time"
)

// Now is the current time in UTC.
func Now() time.Time { return time.Now().UTC() }

// LogTime is a slog ReplaceAttr that writes a record's time in UTC.
func LogTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
		a.Value = slog.TimeValue(a.Value.Time().UTC())
	}
	return a
}
