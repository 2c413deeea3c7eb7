package taskview

import (
	"context"
	"io"
	"os"
	"testing"
)

// TestScreenDrawsAFrameOnceAndGivesTheTerminalBack: the alternate screen
// on open; a frame drawn in place, each line cleared to its end, and not
// again while it is the same; on close the main screen, the cursor, and
// the frame kept below.
func TestScreenDrawsAFrameOnceAndGivesTheTerminalBack(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	must(t, err)
	defer r.Close()
	read := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		read <- string(b)
	}()
	s, ctx := OpenScreen(context.Background(), w, nil) // no keyboard: a pipe is none
	if s.Drawn() {
		t.Error("drawn before a frame")
	}
	if width, height := s.Size(); width != 80 || height != 24 {
		t.Errorf("a pipe's size %d×%d, want 80×24", width, height)
	}
	s.Draw([]string{"one", "two"})
	s.Draw([]string{"one", "two"})
	s.Draw([]string{"one", "three"})
	s.Keep([]string{"one", "three"})
	s.Close()
	if ctx.Err() == nil {
		t.Error("the screen's context outlives Close")
	}
	w.Close()
	got := <-read
	want := ansiAltScreen + ansiHideCursor +
		ansiHome + "one" + ansiClearLine + "\ntwo" + ansiClearLine + ansiClearBelow +
		ansiHome + "one" + ansiClearLine + "\nthree" + ansiClearLine + ansiClearBelow +
		ansiMainScreen + ansiShowCursor + "one\nthree\n"
	if got != want {
		t.Errorf("the terminal got\n%q\nwant\n%q", got, want)
	}
}

// TestQEndsTheView: q (or Q, or Ctrl-C) read from the keyboard ends the
// view; other keys do not.
func TestQEndsTheView(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"q", "Q", "\x03"} {
		r, w, err := os.Pipe()
		must(t, err)
		ctx, quit := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			readKeys(ctx, r, quit)
		}()
		_, err = w.WriteString("xy " + key)
		must(t, err)
		<-done
		if ctx.Err() == nil {
			t.Errorf("%q did not end the view", key)
		}
		w.Close()
		r.Close()
	}
	for b := range 256 {
		if want := b == 'q' || b == 'Q' || b == 3; quitKey(byte(b)) != want {
			t.Errorf("key %q ends the view: %v, want %v", rune(b), !want, want)
		}
	}
}
