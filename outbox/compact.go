package outbox

import (
	"bufio"
	"fmt"
	"github.com/edgeagent/agent/internal/durable"
	"io"
	"os"
	"path/filepath"
	"time"
)

// CompactResult tells what a compaction did.
type CompactResult struct {
	BytesBefore int64         `json:"bytes_before"`
	BytesAfter  int64         `json:"bytes_after"`
	Records     int           `json:"records"` // live records copied
	Pause       time.Duration `json:"pause_ns"`
	Took        time.Duration `json:"took_ns"`
}

// maybeCompact starts a background compaction when sent records and marks
// dominate the file, or fill a large part of it, and none is running.
func (o *Outbox) maybeCompact() {
	o.mu.RLock()
	garbage := o.size - o.ix.liveBytes
	want := garbage >= o.opts.CompactMinBytes &&
		(garbage >= o.ix.liveBytes || (o.size >= o.opts.MaxBytes/4*3 && garbage >= o.opts.MaxBytes/8))
	o.mu.RUnlock()
	if !want || !o.compacting.CompareAndSwap(false, true) {
		return
	}
	o.bg.Add(1)
	go func() {
		defer o.bg.Done()
		defer o.compacting.Store(false)
		_, _ = o.Compact(nil) // on failure the old file stays, whole, and a later batch tries again
	}()
}

// snap is a live record as compaction copies it. It is kept small, since a
// compaction of a large backlog holds one per live record: what only a
// tried or dead record carries hangs off marks.
type snap struct {
	e      *entry
	off    int64 // in the old file
	newOff int64 // in the new file
	n      int32
	marks  *snapMarks // nil when the record was never tried and is not dead
}

// snapMarks is what the marks after the copied lines say of one record.
type snapMarks struct {
	dead    bool
	tries   int
	lastErr string
	reason  string
	deadAt  time.Time // kept, so that a dead record's age survives compaction (PurgeDead)
}

// compactSpan bounds one read of compaction's copy: the live lines of a
// span are read together (a drained backlog leaves them side by side),
// not one read per line. compactGap is the most of the old file, sent
// lines and marks, that a span reads past to take in the next live line.
const (
	compactSpan = 1 << 20
	compactGap  = 16 << 10
)

// Compact rewrites the outbox with only its live records: pending and dead
// ones, with their send attempts and dead reasons. It copies them to a
// temporary file while appends go on, then pauses appends only to copy what
// they added meanwhile, sync, rename and sync the directory. progress, if
// not nil, is called as records are copied.
func (o *Outbox) Compact(progress func(done, total int)) (CompactResult, error) {
	o.compactMu.Lock()
	defer o.compactMu.Unlock()
	start := time.Now()
	o.qmu.Lock()
	err := o.usable()
	o.qmu.Unlock()
	if err != nil {
		return CompactResult{}, err
	}

	o.mu.RLock()
	old, end, nextSeq, created := o.f, o.size, o.ix.nextSeq, o.ix.createdAt
	var snaps []snap
	o.ix.each(func(e *entry) bool {
		s := snap{e: e, off: e.off, n: e.n}
		if e.state == stateDead || e.tries() > 0 {
			s.marks = &snapMarks{dead: e.state == stateDead, tries: e.tries(), lastErr: e.lastErr(), reason: e.reason(), deadAt: deadSince(e)}
		}
		snaps = append(snaps, s)
		return true
	})
	o.mu.RUnlock()
	res := CompactResult{BytesBefore: end, Records: len(snaps)}

	tmp, err := os.CreateTemp(o.dir, compactPattern)
	if err != nil {
		return res, fmt.Errorf("outbox: compact: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	now := o.opts.Now()
	w := &countingWriter{w: bufio.NewWriterSize(tmp, 256<<10)}
	w.Write(encodeMark(line{Op: opHeader, Version: formatVersion, NextSeq: nextSeq, CreatedAt: created, CompactedAt: now, At: now}))
	var buf []byte
	for i := 0; i < len(snaps); {
		// The span from snaps[i] to snaps[j-1], read at once.
		from, to := snaps[i].off, snaps[i].off+int64(snaps[i].n)
		j := i + 1
		for ; j < len(snaps); j++ {
			s := snaps[j]
			end := s.off + int64(s.n)
			if end-from > compactSpan || s.off-to > compactGap {
				break
			}
			to = end
		}
		if int64(cap(buf)) < to-from {
			buf = make([]byte, to-from)
		}
		span := buf[:to-from]
		if _, err := old.ReadAt(span, from); err != nil {
			return res, fmt.Errorf("outbox: compact: read seqs %d to %d: %w", snaps[i].e.seq, snaps[j-1].e.seq, err)
		}
		for k := i; k < j; k++ {
			s := &snaps[k]
			s.newOff = w.n
			w.Write(span[s.off-from : s.off-from+int64(s.n)])
		}
		if progress != nil && (j/1024 != i/1024 || j == len(snaps)) {
			progress(j, len(snaps))
		}
		i = j
	}
	for _, s := range snaps {
		m := s.marks
		if m == nil {
			continue
		}
		if m.tries > 0 {
			w.Write(encodeMark(line{Op: opTry, Seqs: []uint64{s.e.seq}, N: m.tries, Error: m.lastErr, At: now}))
		}
		if m.dead {
			w.Write(encodeMark(line{Op: opDead, Seqs: []uint64{s.e.seq}, Reason: m.reason, At: m.deadAt}))
		}
	}
	if err := w.flush(); err != nil {
		return res, fmt.Errorf("outbox: compact: write: %w", err)
	}

	// Appends pause from here: copy what they wrote since the snapshot.
	o.cmu.Lock()
	pauseStart := time.Now()
	defer func() {
		if !committed {
			o.cmu.Unlock()
		}
	}()
	tailStart := w.n
	if _, err := io.Copy(w, io.NewSectionReader(old, end, o.size-end)); err != nil {
		return res, fmt.Errorf("outbox: compact: copy tail: %w", err)
	}
	if err := w.flush(); err != nil {
		return res, fmt.Errorf("outbox: compact: write: %w", err)
	}
	if err := o.sync(tmp); err != nil {
		return res, fmt.Errorf("outbox: compact: sync: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(o.dir, FileName)); err != nil {
		return res, fmt.Errorf("outbox: compact: %w", err)
	}
	committed = true
	dirErr := durable.SyncDir(o.dir)

	o.mu.Lock()
	delta := tailStart - end
	for i := len(o.ix.order) - 1; i >= 0; i-- {
		e := o.ix.order[i]
		if e.off < end {
			break
		}
		e.off += delta
	}
	for _, s := range snaps {
		s.e.off = s.newOff
	}
	o.f = tmp
	o.fileEndsAt(w.n)
	o.lastPause = time.Since(pauseStart)
	o.ix.compactedAt = now
	o.compactions++
	o.mu.Unlock()
	o.cmu.Unlock()
	old.Close()

	res.BytesAfter, res.Pause, res.Took = w.n, o.lastPause, time.Since(start)
	return res, dirErr
}

// countingWriter counts bytes written and keeps the first error.
type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countingWriter) flush() error {
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.err
}
