package outbox

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// span is a range of bytes in the file that recovery set aside.
type span struct {
	off, n int64
	why    error
}

// scanResult is what one pass over the file found.
type scanResult struct {
	// end is the offset just past the last valid line.
	end int64
	// corrupt are invalid ranges with a valid line after them.
	corrupt []span
	// torn is the range from end to the end of the file, if not empty.
	torn span
}

// scanLines reads every line of r once, front to back, and calls fn for each
// valid one with its offset and length (newline included). d is good only
// during the call: the next line is decoded into it. It never loops and
// never buffers more than maxLine bytes of one line.
func scanLines(r io.Reader, maxLine int, fn func(off int64, n int, d *line)) (scanResult, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		res     scanResult
		off     int64
		lastSeq uint64
		bad     []span // invalid lines since the last valid one
		buf     []byte
		d       line
	)
	for {
		l, n, terminated, tooLong, err := readLine(br, maxLine, &buf)
		if n == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return res, err
		}
		var why error
		switch {
		case !terminated:
			why = ErrTornTail
		case tooLong:
			why = ErrLineTooLong
		default:
			why = decode(l, &d)
			if why == nil && d.Op == "" {
				if d.Seq <= lastSeq {
					why = ErrSeqOrder
				} else {
					lastSeq = d.Seq
				}
			}
		}
		if why != nil {
			bad = appendSpan(bad, span{off: off, n: int64(n), why: why})
		} else {
			res.corrupt = append(res.corrupt, bad...)
			bad = bad[:0]
			fn(off, n, &d)
			res.end = off + int64(n)
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
	}
	if off > res.end {
		why := ErrTornTail
		if len(bad) > 0 {
			why = bad[0].why
		}
		res.torn = span{off: res.end, n: off - res.end, why: why}
	}
	return res, nil
}

// appendSpan adds s to spans, merging it into the last span when they touch.
func appendSpan(spans []span, s span) []span {
	if k := len(spans); k > 0 && spans[k-1].off+spans[k-1].n == s.off {
		spans[k-1].n += s.n
		return spans
	}
	return append(spans, s)
}

// readLine reads one line. It returns the line without its newline, the
// number of bytes consumed, whether a newline ended it, and whether it was
// longer than maxLine (then its bytes are consumed but not returned). At the
// end of the input err is io.EOF, possibly with a last, unterminated line.
func readLine(br *bufio.Reader, maxLine int, buf *[]byte) (l []byte, n int, terminated, tooLong bool, err error) {
	*buf = (*buf)[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if !tooLong {
			if len(*buf)+len(chunk) > maxLine+1 {
				tooLong, *buf = true, (*buf)[:0]
			} else if len(*buf) == 0 && err == nil {
				// The common case: the whole line is in the reader's buffer.
				return bytes.TrimSuffix(chunk, []byte{'\n'}), n, true, false, nil
			} else {
				*buf = append(*buf, chunk...)
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(*buf, []byte{'\n'}), n, true, tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return *buf, n, false, tooLong, err
		}
	}
}
