package taskview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// Terminal control sequences of the live view.
const (
	ansiAltScreen  = "\x1b[?1049h" // the alternate screen: what was on the terminal comes back at the end
	ansiMainScreen = "\x1b[?1049l"
	ansiHideCursor = "\x1b[?25l"
	ansiShowCursor = "\x1b[?25h"
	ansiHome       = "\x1b[H"
	ansiClearLine  = "\x1b[K" // to the end of the line
	ansiClearBelow = "\x1b[J"
)

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// Screen redraws frames in place on a terminal, on its alternate screen,
// for tasks watch. Close gives the terminal back as it was, whatever ended
// the view.
type Screen struct {
	out   *os.File
	prev  string // the frame drawn last
	final string // what stays on the terminal after Close
	quit  context.CancelFunc
	keys  sync.WaitGroup
	// restore puts the keyboard's terminal back in its mode; nil when its
	// keys are not read.
	restore func()
}

// OpenScreen takes the terminal out over: the alternate screen, the
// cursor hidden; and when in is a terminal, its keys are read one by one
// (not echoed): q, Q or Ctrl-C ends the context it returns, as ctx's end
// does.
func OpenScreen(ctx context.Context, out, in *os.File) (*Screen, context.Context) {
	ctx, quit := context.WithCancel(ctx)
	s := &Screen{out: out, quit: quit}
	fmt.Fprint(out, ansiAltScreen+ansiHideCursor)
	if in != nil && IsTerminal(in) {
		if restore, err := keyMode(in); err == nil {
			s.restore = restore
			s.keys.Go(func() { readKeys(ctx, in, quit) })
		}
	}
	return s, ctx
}

// Size is the terminal's width and height, 80×24 when unknown.
func (s *Screen) Size() (width, height int) { return termSize(s.out) }

// Drawn reports whether a frame was drawn yet.
func (s *Screen) Drawn() bool { return s.prev != "" }

// Draw shows lines as the screen's frame, each line cleared to its end
// and the screen below it: nothing is written when the frame is the one
// shown.
func (s *Screen) Draw(lines []string) {
	frame := strings.Join(lines, ansiClearLine+"\n") + ansiClearLine
	if frame == s.prev {
		return
	}
	s.prev = frame
	fmt.Fprint(s.out, ansiHome+frame+ansiClearBelow)
}

// Keep leaves lines on the terminal after Close (the board when the watch
// ended on its own, rather than by the person).
func (s *Screen) Keep(lines []string) { s.final = strings.Join(lines, "\n") + "\n" }

// Close stops reading keys, puts the terminal's mode back, and returns to
// the main screen with the cursor shown, and what Keep kept below it.
func (s *Screen) Close() {
	s.quit()
	s.keys.Wait() // before the terminal is put back
	if s.restore != nil {
		s.restore()
	}
	fmt.Fprint(s.out, ansiMainScreen+ansiShowCursor+s.final)
}

// readKeys ends the view (quit) when q, Q or Ctrl-C is read, and returns
// when ctx ends: the terminal's reads return every tenth of a second.
func readKeys(ctx context.Context, in *os.File, quit func()) {
	buf := make([]byte, 16)
	for ctx.Err() == nil {
		n, err := in.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return
		}
		for _, b := range buf[:n] {
			if quitKey(b) {
				quit()
				return
			}
		}
	}
}

// quitKey reports whether key b ends the view: q, Q, or Ctrl-C where the
// terminal passes it on as a key rather than a signal.
func quitKey(b byte) bool { return b == 'q' || b == 'Q' || b == 3 }
