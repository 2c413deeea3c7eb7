package main

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"

	"github.com/edgeagent/agent/internal/utc"
)

// newLogger logs to w at level. Format text is for people: tint's
// colors on a terminal unless NO_COLOR is set, local times. Format json is
// for machines: one object per line, times in UTC. auto is text on a
// terminal and json otherwise. The level may change later (a reload).
func newLogger(w io.Writer, level *slog.LevelVar, format string) *slog.Logger {
	if format == "text" || format == "auto" && isTerminal(w) {
		noColor := os.Getenv("NO_COLOR") != "" || !isTerminal(w)
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: level, TimeFormat: time.DateTime, NoColor: noColor}))
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: utc.LogTime}))
}

// logLevel parses a checked level setting.
func logLevel(s string) *slog.LevelVar {
	var lv slog.LevelVar
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		panic(err) // the setting allows only valid levels
	}
	return &lv
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
