//go:build linux || darwin

package taskview

import (
	"os"

	"golang.org/x/sys/unix"
)

// keyMode puts the terminal on f in a mode where each key press is read
// at once and not echoed, while Ctrl-C still interrupts (ICANON and ECHO
// off, ISIG kept). A read returns after a tenth of a second even without a
// key (VMIN 0, VTIME 1), so the reader can notice that it must stop. The
// returned function puts the terminal back as it was.
func keyMode(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ICANON | unix.ECHO
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 0, 1
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}

// termSize is the terminal's width and height, 80×24 when unknown.
func termSize(f *os.File) (width, height int) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 || ws.Row == 0 {
		return 80, 24
	}
	return int(ws.Col), int(ws.Row)
}
