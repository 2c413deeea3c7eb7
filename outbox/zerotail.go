package outbox

import (
	"bytes"
	"io"
	"os"
)

// The writer keeps the file's last stretch zeroed ahead of its lines (see
// Outbox.zeroAhead): a record then overwrites blocks the file already has,
// and its fdatasync need not commit the file system's journal for a new
// size. No line can hold a NUL byte (payloads are checked JSON, which
// escapes control bytes, and the outbox writes the rest), so readers take
// a run of NULs that reaches the end of the file for that stretch, not
// for data: recovery cuts it without setting it aside, and Inspect and
// the Tailer stop before it. A run of NULs with bytes after it is a hole
// a crash left inside a batch that was not synced: the lines around it
// are read as ever, and the hole is a corrupt line.

// scanBeforeZeros scans the lines of f, of size bytes, that come before
// the zeroed stretch at its end, and returns where that stretch starts:
// how Open and Inspect read a whole file.
func scanBeforeZeros(f *os.File, size int64, maxLine int, fn func(off int64, n int, d *line)) (scanResult, int64, error) {
	zeros, err := zeroTailFrom(f, 0, size)
	if err != nil {
		return scanResult{}, 0, err
	}
	res, err := scanLines(io.NewSectionReader(f, 0, zeros), maxLine, fn)
	return res, zeros, err
}

// zeroTailFrom returns where the run of NUL bytes that ends f, of size
// bytes, starts (size when f does not end in one), reading backwards but
// never before floor.
func zeroTailFrom(f *os.File, floor, size int64) (int64, error) {
	var buf [64 << 10]byte
	end := size
	for end > floor {
		start := max(floor, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil && err != io.EOF {
			return 0, err
		}
		if n := len(bytes.TrimRight(b, "\x00")); n > 0 {
			return start + int64(n), nil
		}
		end = start
	}
	return floor, nil
}

// firstNUL returns the offset of the first NUL byte of f in [from, to), or
// to when there is none.
func firstNUL(f *os.File, from, to int64) (int64, error) {
	var buf [64 << 10]byte
	for from < to {
		b := buf[:min(int64(len(buf)), to-from)]
		n, err := f.ReadAt(b, from)
		if i := bytes.IndexByte(b[:n], 0); i >= 0 {
			return from + int64(i), nil
		}
		from += int64(n)
		if err == io.EOF {
			return from, nil
		}
		if err != nil {
			return 0, err
		}
	}
	return to, nil
}
