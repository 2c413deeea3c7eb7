package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// lineReader reads lines of at most max bytes. A longer line is cut: its
// first max bytes are returned with a note of how much was dropped, and the
// rest is read past without being held. A flood of output therefore costs
// at most max bytes at a time.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline. At the end it returns
// io.EOF, after a last unterminated line if there is one.
func (lr *lineReader) next() (string, error) {
	lr.buf = lr.buf[:0]
	dropped := 0
	for {
		chunk, err := lr.br.ReadSlice('\n')
		terminated := err == nil
		if terminated {
			chunk = chunk[:len(chunk)-1]
		}
		if room := lr.max - len(lr.buf); len(chunk) > room {
			dropped += len(chunk) - room
			chunk = chunk[:room]
		}
		lr.buf = append(lr.buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case !terminated && len(lr.buf) == 0 && dropped == 0:
			return "", err
		}
		b := lr.buf
		if len(b) > 0 && b[len(b)-1] == '\r' {
			b = b[:len(b)-1]
		}
		if dropped > 0 {
			return fmt.Sprintf("%s …[line cut: %d more bytes]", b, dropped), nil
		}
		return string(b), nil
	}
}

// buffered reports whether more input is already waiting, so a reader can
// batch the lines of a burst.
func (lr *lineReader) buffered() bool { return lr.br.Buffered() > 0 }
