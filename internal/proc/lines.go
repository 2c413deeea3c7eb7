package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// LineReader reads lines of at most max bytes. A longer line is cut: its
// first max bytes are returned with a note of how much was dropped, and the
// rest is read past without being held. A flood of output therefore costs
// at most max bytes at a time.
type LineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
	off int64 // where the next line starts in what r gives
}

// NewLineReader returns a LineReader of r that keeps lines of at most max
// bytes.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// NewLineReaderAt is NewLineReader of r that starts at offset of its
// stream (a spool read from where an agent had read to): Offset counts
// from there.
func NewLineReaderAt(r io.Reader, max int, offset int64) *LineReader {
	lr := NewLineReader(r, max)
	lr.off = offset
	return lr
}

// Offset is where the line after the last one Next returned starts: how
// much of the stream the lines returned so far took, their newlines and
// what a cut dropped included.
func (lr *LineReader) Offset() int64 { return lr.off }

// Next returns the next line without its newline. At the end it returns
// io.EOF, after a last unterminated line if there is one.
func (lr *LineReader) Next() (string, error) {
	lr.buf = lr.buf[:0]
	dropped := 0
	for {
		chunk, err := lr.br.ReadSlice('\n')
		lr.off += int64(len(chunk))
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

// Buffered reports whether more input is already waiting, so a reader can
// batch the lines of a burst.
func (lr *LineReader) Buffered() bool { return lr.br.Buffered() > 0 }
