package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
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

// validToken tells whether a bearer token can go in an Authorization
// header as is: visible ASCII, no spaces.
func validToken(tok string) bool {
	for i := 0; i < len(tok); i++ {
		if tok[i] <= ' ' || tok[i] > '~' {
			return false
		}
	}
	return true
}

// readToken reads the control plane token from a file, else from
// AGENT_TOKEN. Errors never show the token.
func readToken(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("token file %s is empty", file)
		}
		if !validToken(tok) {
			return "", fmt.Errorf("token file %s does not hold one token (one line of visible characters); is it the right file?", file)
		}
		return tok, nil
	}
	if tok := strings.TrimSpace(os.Getenv("AGENT_TOKEN")); tok != "" {
		if !validToken(tok) {
			return "", fmt.Errorf("AGENT_TOKEN does not hold one token (visible characters, no spaces)")
		}
		return tok, nil
	}
	return "", usagef("no control plane token: give --token-file FILE or set AGENT_TOKEN")
}
