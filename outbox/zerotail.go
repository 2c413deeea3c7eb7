package outbox

import (
	"bytes"
	"fmt"
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
			return 0, fmt.Errorf("outbox: read %s: %w", f.Name(), err)
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != 0 {
				return start + int64(i) + 1, nil
			}
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
			return 0, fmt.Errorf("outbox: read %s: %w", f.Name(), err)
		}
	}
	return to, nil
}
