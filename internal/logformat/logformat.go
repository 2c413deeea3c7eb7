// Package logformat makes the logger of the agent's processes (agent run,
// agent controlplane serve) from their --log-format: text for people, JSON
// for machines, and journal lines (a <N> priority on each) under systemd.
package logformat

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lmittmann/tint"

	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/internal/utc"
)

// New is a logger writing to w at level. Format text is for people: tint's
// colors on a terminal unless NO_COLOR is set, local times. Format json is
// for machines: one object per line, times in UTC. auto is text on a
// terminal, journal lines where w is systemd's journal (see onJournal),
// and json otherwise. The level may change later (a reload).
func New(w io.Writer, level *slog.LevelVar, format string) *slog.Logger {
	switch {
	case format == "auto" && onJournal(w, os.Getenv("JOURNAL_STREAM")):
		return slog.New(newJournalHandler(w, level))
	case format == "text" || format == "auto" && taskview.IsTerminal(w):
		noColor := os.Getenv("NO_COLOR") != "" || !taskview.IsTerminal(w)
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: level, TimeFormat: time.DateTime, NoColor: noColor}))
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: utc.LogTime}))
}

// onJournal tells whether w is the stream systemd connected to the
// journal: JOURNAL_STREAM (DEVICE:INODE, as systemd.exec(5) documents it)
// names w's file. A child that inherited the variable but writes
// elsewhere (a pipe, a file) does not match.
func onJournal(w io.Writer, stream string) bool {
	f, ok := w.(*os.File)
	if !ok || stream == "" {
		return false
	}
	devS, inoS, ok := strings.Cut(stream, ":")
	if !ok {
		return false
	}
	dev, err1 := strconv.ParseUint(devS, 10, 64)
	ino, err2 := strconv.ParseUint(inoS, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	info, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	// Dev and Ino are of other types on other systems: uint64 for both.
	return ok && uint64(st.Dev) == dev && uint64(st.Ino) == ino
}

// Priorities of the journal (sd-daemon(3)): a line that starts <N> is
// logged at priority N, which journalctl -p filters and colours by.
const (
	sdErr     = 3
	sdWarning = 4
	sdInfo    = 6
	sdDebug   = 7
)

// journalPriority is the journal's priority for a level.
func journalPriority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return sdErr
	case l >= slog.LevelWarn:
		return sdWarning
	case l >= slog.LevelInfo:
		return sdInfo
	}
	return sdDebug
}

// journalHandler writes a line per record for the journal: the <N>
// priority prefix, then tint's text without a time (the journal stamps
// each line) and without colour.
type journalHandler struct {
	slog.Handler // tint's, writing into out.buf
	out          *journalOut
}

// journalOut is shared by a handler and those WithAttrs and WithGroup
// make from it: one line is put together at a time, then written whole.
type journalOut struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

func (o *journalOut) Write(p []byte) (int, error) { return o.buf.Write(p) }

func newJournalHandler(w io.Writer, level slog.Leveler) *journalHandler {
	out := &journalOut{w: w}
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		if len(groups) == 0 && a.Key == slog.MessageKey {
			// A line break would start a line of no priority.
			return slog.String(slog.MessageKey, strings.ReplaceAll(a.Value.String(), "\n", `\n`))
		}
		return a
	}
	return &journalHandler{tint.NewTextHandler(out, &tint.Options{Level: level, NoColor: true, ReplaceAttr: noTime}), out}
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.buf.Reset()
	h.out.buf.WriteString("<" + strconv.Itoa(journalPriority(r.Level)) + ">")
	if err := h.Handler.Handle(ctx, r); err != nil {
		return err
	}
	_, err := h.out.w.Write(h.out.buf.Bytes())
	return err
}

func (h *journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &journalHandler{h.Handler.WithAttrs(attrs), h.out}
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{h.Handler.WithGroup(name), h.out}
}

// Level parses a level setting the settings have checked (debug, info,
// warn or error).
func Level(s string) *slog.LevelVar {
	var lv slog.LevelVar
	if err := lv.UnmarshalText([]byte(s)); err != nil {
		panic(err) // the setting allows only valid levels
	}
	return &lv
}
