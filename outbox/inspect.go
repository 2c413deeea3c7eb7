package outbox

import (
	"bytes"
	"github.com/edgeagent/agent/internal/durable"
	"syscall"

	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Item is one record as inspection sees it. Its JSON form is what
// `agent outbox ls --json` prints and is stable.
type Item struct {
	Seq       uint64    `json:"seq"`
	Key       string    `json:"key"`
	Kind      Kind      `json:"kind"`
	TaskID    string    `json:"task_id"`
	Attempt   int       `json:"attempt"`
	CreatedAt time.Time `json:"created_at"`
	State     State     `json:"state"`
	Tries     int       `json:"send_attempts"`
	LastError string    `json:"last_error,omitempty"`
	Reason    string    `json:"dead_reason,omitempty"`
	Bytes     int       `json:"bytes"`
}

// Snapshot is a read-only view of an outbox.
type Snapshot struct {
	Items []Item
	// Stats.Quarantined counts the corrupt spans a writer's Open would set
	// aside; inspection leaves them alone.
	Stats Stats
}

// ErrNoOutbox: the directory holds no outbox.
var ErrNoOutbox = errors.New("no outbox here")

// Inspect reads the outbox in dir without taking its lock and without
// changing anything, so it works while the writer runs. An unterminated last
// line is taken to be a write in progress and is skipped.
func Inspect(dir string) (*Snapshot, error) {
	f, err := openForReading(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	ix := newIndex(true)
	res, zeros, err := scanBeforeZeros(f, info.Size(), maxInspectLine, ix.add)
	if err != nil {
		return nil, fmt.Errorf("outbox: read %s: %w", f.Name(), err)
	}
	snap := &Snapshot{}
	snap.Stats.fill(ix, res.end, time.Now())
	snap.Stats.Quarantined = len(res.corrupt)
	snap.Stats.TornBytes = zeros - res.end
	snap.Stats.DiskFreeBytes = durable.FreeBytes(dir)
	ix.each(func(e *entry) bool {
		snap.Items = append(snap.Items, Item{Seq: e.seq, Key: e.recordKey(), Kind: e.kind, TaskID: e.taskID, Attempt: int(e.attempt),
			CreatedAt: e.createdAt(), State: e.state.State(), Tries: e.tries(), LastError: e.lastErr(), Reason: e.reason(), Bytes: int(e.n)})
		return true
	})
	return snap, nil
}

// maxInspectLine is the longest line a reader accepts. A reader does not
// know the writer's options; it accepts the largest record any writer may
// be configured for.
const maxInspectLine = 64 << 20

// openForReading opens dir's outbox file, saying clearly what is wrong when
// it cannot.
func openForReading(dir string) (*os.File, error) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("outbox: %s: %w (no such directory)", dir, ErrNoOutbox)
	case err != nil:
		return nil, fmt.Errorf("outbox: %w", err)
	case !info.IsDir():
		return nil, fmt.Errorf("outbox: %s is not a directory", dir)
	}
	f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("outbox: %s: %w (no %s)", dir, ErrNoOutbox, FileName)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return f, nil
}

// Tailer follows an outbox's records as they are appended, across
// compactions, without taking the lock. It does not watch the file itself;
// call Next when the file may have changed (on an fsnotify event, or a
// ticker).
type Tailer struct {
	dir     string
	f       *os.File
	off     int64
	lastSeq uint64
	// The zeroed stretch at the file's end, as last seen whole: from
	// zerosFrom to the end of a file of zerosSize bytes.
	zerosFrom, zerosSize int64
}

// NewTailer returns a Tailer positioned before the first record whose seq is
// above afterSeq.
func NewTailer(dir string, afterSeq uint64) (*Tailer, error) {
	f, err := openForReading(dir)
	if err != nil {
		return nil, err
	}
	return &Tailer{dir: dir, f: f, lastSeq: afterSeq}, nil
}

// Path is the file the Tailer follows.
func (t *Tailer) Path() string { return filepath.Join(t.dir, FileName) }

// Next calls fn with each record appended since the last call, in seq
// order. When compaction has replaced the file, it starts over in the new
// one and skips what it has already passed.
func (t *Tailer) Next(fn func(Record)) error {
	mine, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if cur, err := os.Stat(t.Path()); err == nil && !os.SameFile(cur, mine) {
		f, err := os.Open(t.Path())
		if err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		t.f.Close()
		t.f, t.off = f, 0
		t.zerosFrom, t.zerosSize = 0, 0
		if mine, err = f.Stat(); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
	}
	end, err := t.linesEnd(mine.Size())
	if err != nil {
		return fmt.Errorf("outbox: read: %w", err)
	}
	res, err := scanLines(io.NewSectionReader(t.f, t.off, end-t.off), maxInspectLine, func(_ int64, _ int, d *line) {
		if d.Op == "" && d.Seq > t.lastSeq {
			r := d.record()
			r.Payload = bytes.Clone(r.Payload) // it shares the reader's buffer
			fn(r)
			t.lastSeq = d.Seq
		}
	})
	if err != nil {
		return fmt.Errorf("outbox: read: %w", err)
	}
	t.off += res.end
	return nil
}

// linesEnd returns where the bytes worth reading end in the file, of size
// bytes: before the zeroed
// stretch the writer keeps at the end of the file. Next runs on every
// write, and the stretch is up to a MiB, so it is read whole only when
// the file's size changes: in between, the writer only overwrites its
// front, and the new front is the first NUL from the old one on.
func (t *Tailer) linesEnd(size int64) (int64, error) {
	if size == t.zerosSize && t.zerosFrom >= t.off {
		front, err := firstNUL(t.f, t.zerosFrom, size)
		if err != nil {
			return 0, err
		}
		t.zerosFrom = front
		return front, nil
	}
	front, err := firstNUL(t.f, t.off, size)
	if err != nil || front == size {
		return size, err
	}
	zeros, err := zeroTailFrom(t.f, front, size)
	if err != nil {
		return 0, err
	}
	if zeros != front {
		// Bytes after the first NUL: a batch being written, or a hole a
		// crash left. Read to the last of them, which was written when it
		// was seen (the hole then as a corrupt line), never into the
		// stretch the writer is writing.
		return zeros, nil
	}
	t.zerosFrom, t.zerosSize = front, size
	return front, nil
}

// Close releases the file.
func (t *Tailer) Close() error { return t.f.Close() }

// Filter selects items. Zero fields select everything.
type Filter struct {
	States []State // any of these states
	TaskID string
	Kind   Kind
	Limit  int // at most this many, oldest first
}

// Select returns the items f selects, in seq order.
func (f Filter) Select(items []Item) []Item {
	out := []Item{}
	for _, it := range items {
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
		if (len(f.States) == 0 || slices.Contains(f.States, it.State)) &&
			(f.TaskID == "" || it.TaskID == f.TaskID) && (f.Kind == "" || it.Kind == f.Kind) {
			out = append(out, it)
		}
	}
	return out
}
