package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
)

// newLogger logs to w: colored through tint on a terminal, JSON otherwise.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	if isTerminal(w) {
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: lv, TimeFormat: time.TimeOnly})), nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})), nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
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
		return tok, nil
	}
	if tok := strings.TrimSpace(os.Getenv("AGENT_TOKEN")); tok != "" {
		return tok, nil
	}
	return "", usagef("no control plane token: give --token-file FILE or set AGENT_TOKEN")
}
