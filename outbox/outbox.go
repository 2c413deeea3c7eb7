package outbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/durable"
	"github.com/gofrs/flock"
)

// File names inside an outbox directory.
const (
	FileName       = "outbox.jsonl"
	QuarantineName = "quarantine.jsonl"
	LockName       = "lock"
	compactPattern = FileName + ".compact-*"
)

// Options tune an outbox. The zero value is ready to use; each field
// documents its default.
type Options struct {
	// MaxBytes bounds the file. Past it, log records are refused (ErrFull);
	// other kinds are always accepted. Default 1 GiB.
	MaxBytes int64
	// MaxRecordBytes bounds one record line. Default 1 MiB, the largest
	// batch the control plane accepts.
	MaxRecordBytes int
	// CompactMinBytes is how many bytes of sent records and marks must pile
	// up before compaction runs on its own. Default 4 MiB.
	CompactMinBytes int64
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 30
	}
	if o.MaxRecordBytes <= 0 {
		o.MaxRecordBytes = 1 << 20
	}
	if o.CompactMinBytes <= 0 {
		o.CompactMinBytes = 4 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Outbox is an open outbox, owned by one process. Its methods are safe for
// concurrent use.
type Outbox struct {
	dir  string
	opts Options
	lock *flock.Flock
	sync func(*os.File) error // datasync; replaced by fault-injection tests

	// The queue of lines waiting for the committer. qmu guards it and
	// everything assigned at enqueue time.
	qmu        sync.Mutex
	qcond      *sync.Cond
	queue      []*write
	queueBytes int64
	nextSeq    uint64
	dropped    map[string]uint64 // log records refused per task, not yet announced
	closed     bool

	loopDone chan struct{}
	bg       sync.WaitGroup // background compactions

	// cmu serializes writers of the file: the committer and compaction's
	// final step.
	cmu  sync.Mutex
	wbuf []byte

	// mu guards the index, the file handle and its size.
	mu          sync.RWMutex
	f           *os.File
	size        int64
	ix          *index
	lastPause   time.Duration
	compactions int

	fileBytes   atomic.Int64 // mirrors size for the lock-free full check
	compacting  atomic.Bool
	compactMu   sync.Mutex
	appends     atomic.Uint64
	syncs       atomic.Uint64
	writeErrors atomic.Uint64
	// failing is the error of the last write while writes fail (a full
	// disk), nil once one succeeds again.
	failing     atomic.Pointer[string]
	droppedLogs atomic.Uint64
	quarantined int   // spans set aside at Open
	tornBytes   int64 // bytes truncated at Open
}

// write is one line waiting for the committer.
type write struct {
	line []byte
	rec  *entry     // set for a record
	mark *line      // set for a mark
	done chan error // nil when nobody waits
}

// Open opens the outbox in dir, creating it if needed, and recovers it from
// whatever a crash left. It fails only when the directory cannot be used or
// another process holds the lock (ErrLocked); corruption never makes it fail.
func Open(dir string, opts Options) (*Outbox, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	lock := flock.New(filepath.Join(dir, LockName), flock.SetPermissions(0o600))
	ok, err := lock.TryLock()
	if err != nil {
		return nil, fmt.Errorf("outbox: lock %s: %w", lock.Path(), err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s is held (is an agent already running on this data directory?)", ErrLocked, lock.Path())
	}
	if err := checkLock(lock); err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	o := &Outbox{
		dir: dir, opts: opts, lock: lock, sync: durable.Datasync,
		dropped: make(map[string]uint64), loopDone: make(chan struct{}),
	}
	o.qcond = sync.NewCond(&o.qmu)
	corrupt, err := o.recover()
	if err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	o.nextSeq = o.ix.nextSeq
	go o.commitLoop()
	if corrupt {
		// Rewrite the file without the corrupt lines, so that they are
		// quarantined once and not again at every Open.
		if _, err := o.Compact(nil); err != nil {
			_ = o.Close()
			return nil, err
		}
	}
	return o, nil
}

// recover opens the file, indexes it, quarantines what is invalid and
// truncates a torn tail. It reports whether corrupt lines were found in the
// middle of the file.
func (o *Outbox) recover() (corrupt bool, err error) {
	stale, _ := filepath.Glob(filepath.Join(o.dir, compactPattern))
	for _, p := range stale {
		_ = os.Remove(p) // a compaction cut short by a crash
	}
	path := filepath.Join(o.dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	fail := func(err error) (bool, error) { f.Close(); return false, err }
	info, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("outbox: %w", err))
	}
	o.f, o.ix = f, newIndex(false)
	if info.Size() == 0 {
		now := o.opts.Now()
		hdr := encodeMark(line{Op: opHeader, Version: formatVersion, NextSeq: 1, CreatedAt: now, At: now})
		if _, err := f.WriteAt(hdr, 0); err != nil {
			return fail(fmt.Errorf("outbox: write header: %w", err))
		}
		if err := o.sync(f); err != nil {
			return fail(fmt.Errorf("outbox: sync: %w", err))
		}
		if err := durable.SyncDir(o.dir); err != nil {
			return fail(err)
		}
		o.ix.createdAt = now
		o.setSize(int64(len(hdr)))
		return false, nil
	}
	res, err := scanLines(f, o.opts.MaxRecordBytes, o.ix.add)
	if err != nil {
		return fail(fmt.Errorf("outbox: read %s: %w", path, err))
	}
	bad := res.corrupt
	if res.torn.n > 0 {
		bad = append(bad, res.torn)
	}
	if len(bad) > 0 {
		if err := o.quarantine(f, bad); err != nil {
			return fail(err)
		}
	}
	o.quarantined = len(res.corrupt)
	if res.torn.n > 0 {
		o.tornBytes = res.torn.n
		if err := f.Truncate(res.end); err != nil {
			return fail(fmt.Errorf("outbox: truncate torn tail: %w", err))
		}
		if err := o.sync(f); err != nil {
			return fail(fmt.Errorf("outbox: sync: %w", err))
		}
	}
	o.setSize(res.end)
	return len(res.corrupt) > 0, nil
}

func (o *Outbox) setSize(n int64) {
	o.size = n
	o.fileBytes.Store(n)
}

// CheckLock reports whether the lock this outbox holds is still the file at
// its path: one deleted or replaced would let a second writer in. The
// daemon checks it at every heartbeat and stops when it fails.
func (o *Outbox) CheckLock() error { return checkLock(o.lock) }

func checkLock(lock *flock.Flock) error {
	held, err := lock.Stat()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrLockLost, lock.Path(), err)
	}
	onDisk, err := os.Lstat(lock.Path())
	if err != nil || !os.SameFile(held, onDisk) {
		return fmt.Errorf("%w: %s was removed or replaced; another agent may now use this data directory", ErrLockLost, lock.Path())
	}
	return nil
}

// Dir returns the outbox's directory.
func (o *Outbox) Dir() string { return o.dir }

// Append writes r durably and returns its seq. It returns once the line is
// on stable storage, sharing the write and the sync with concurrent calls.
// It takes no context: once queued, a record is written whatever the
// caller does, and an answer that said otherwise would be a lie.
//
// Append fills in Seq, CreatedAt (when zero) and Key (when empty). It
// refuses a log record with ErrFull when the outbox is full.
func (o *Outbox) Append(r Record) (uint64, error) {
	if !r.Kind.Valid() || r.TaskID == "" {
		return 0, fmt.Errorf("%w: kind %q, task %q", ErrInvalid, r.Kind, r.TaskID)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = o.opts.Now()
	}
	r.CreatedAt = r.CreatedAt.UTC()
	d, err := newDraft(r)
	if err != nil {
		return 0, err
	}
	if d.maxLen() > o.opts.MaxRecordBytes {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, d.maxLen(), o.opts.MaxRecordBytes)
	}
	done := make(chan error, 1)
	o.qmu.Lock()
	if err := o.usable(); err != nil {
		o.qmu.Unlock()
		return 0, err
	}
	if r.Kind == KindLog && o.full(int64(d.maxLen())) {
		o.dropped[r.TaskID]++
		o.droppedLogs.Add(1)
		o.qmu.Unlock()
		return 0, ErrFull
	}
	if n := o.dropped[r.TaskID]; n > 0 {
		delete(o.dropped, r.TaskID)
		marker, err := newDraft(droppedMarker(r, n))
		if err != nil {
			panic(fmt.Sprintf("outbox: the dropped-records marker must encode: %v", err))
		}
		o.enqueueDraft(marker, nil)
	}
	seq := o.enqueueDraft(d, done)
	o.qmu.Unlock()
	if err := <-done; err != nil {
		return 0, err
	}
	return seq, nil
}

// usable reports why the outbox cannot take work, if it cannot. qmu is held.
// A failed write does not make it unusable: the committer repairs the file
// and the next write may well succeed (space came back).
func (o *Outbox) usable() error {
	if o.closed {
		return ErrClosed
	}
	return nil
}

// full reports whether n more bytes would pass the limit. qmu is held.
func (o *Outbox) full(n int64) bool {
	return o.fileBytes.Load()+o.queueBytes+n > o.opts.MaxBytes
}

// enqueueDraft gives d the next seq, finishes its line and queues it; done,
// if not nil, receives the outcome of the write. qmu is held: this is all
// the work an append does under it.
func (o *Outbox) enqueueDraft(d *draft, done chan error) uint64 {
	seq := o.nextSeq
	o.nextSeq++
	l, key := d.finish(seq)
	r := d.rec
	e := &entry{seq: seq, key: key, kind: r.Kind, taskID: r.TaskID, attempt: r.Attempt,
		createdAt: r.CreatedAt, n: len(l), state: StatePending}
	o.enqueue(&write{line: l, rec: e, done: done})
	return seq
}

// droppedMarker is the log record that tells the control plane how many
// log records of a task the outbox refused while it was full.
func droppedMarker(next Record, n uint64) Record {
	msg := fmt.Sprintf("outbox full: %d log record(s) dropped", n)
	payload, _ := json.Marshal(map[string]any{"stream": "agent", "dropped": n, "lines": []string{msg}})
	return Record{Kind: KindLog, TaskID: next.TaskID, Attempt: next.Attempt, CreatedAt: next.CreatedAt, Payload: payload}
}

// enqueue queues w and wakes the committer. qmu is held.
func (o *Outbox) enqueue(w *write) {
	o.queue = append(o.queue, w)
	o.queueBytes += int64(len(w.line))
	o.qcond.Signal()
}

// commitLoop is the committer: it takes everything queued, writes it with
// one write and one sync, indexes it, and answers the waiters.
//
// A write or sync that fails (ENOSPC, EIO) fails its whole batch, and the
// file is cut back to its last good size and synced, so that no partial
// line stays behind; the next batch is tried afresh. Until that repair
// succeeds, every batch fails with its error.
func (o *Outbox) commitLoop() {
	defer close(o.loopDone)
	var (
		spare  []*write
		broken error // a failed write the file is not yet repaired from
	)
	for {
		o.qmu.Lock()
		for len(o.queue) == 0 && !o.closed {
			o.qcond.Wait()
		}
		if len(o.queue) == 0 {
			o.qmu.Unlock()
			return
		}
		batch := o.queue
		o.queue, o.queueBytes = spare[:0], 0
		o.qmu.Unlock()

		var err error
		if broken != nil {
			if rerr := o.repair(); rerr != nil {
				err = fmt.Errorf("%w (and the repair failed: %v)", broken, rerr)
			} else {
				broken = nil
			}
		}
		if err == nil {
			if err = o.commit(batch); err != nil {
				broken = err
				if o.repair() == nil {
					broken = nil
				}
			}
		}
		if err != nil {
			o.writeErrors.Add(1)
			msg := err.Error()
			o.failing.Store(&msg)
		} else {
			o.failing.Store(nil)
		}
		for i, w := range batch {
			if w.done != nil {
				w.done <- err
			}
			batch[i] = nil
		}
		spare = batch
		if err == nil {
			o.maybeCompact()
		}
	}
}

// repair cuts the file back to its last good size, dropping whatever part
// of a failed batch reached it, and syncs the cut.
func (o *Outbox) repair() error {
	o.cmu.Lock()
	defer o.cmu.Unlock()
	o.mu.RLock()
	f, size := o.f, o.size
	o.mu.RUnlock()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("outbox: truncate after a failed write: %w", err)
	}
	if err := o.sync(f); err != nil {
		return fmt.Errorf("outbox: sync after a failed write: %w", err)
	}
	return nil
}

// commit writes and indexes one batch.
func (o *Outbox) commit(batch []*write) error {
	o.cmu.Lock()
	defer o.cmu.Unlock()
	buf := o.wbuf[:0]
	records := 0
	for _, w := range batch {
		buf = append(buf, w.line...)
		if w.rec != nil {
			records++
		}
	}
	o.wbuf = buf
	if cap(o.wbuf) > 4<<20 {
		o.wbuf = nil // do not pin a burst's buffer forever
	}
	off := o.size
	if _, err := o.f.WriteAt(buf, off); err != nil {
		return fmt.Errorf("outbox: write: %w", err)
	}
	// Marks alone need no sync: a lost sent mark costs a duplicate send,
	// which the control plane drops. Records are synced before anyone is
	// told they are written.
	if records > 0 {
		if err := o.sync(o.f); err != nil {
			return fmt.Errorf("outbox: sync: %w", err)
		}
		o.syncs.Add(1)
		o.appends.Add(uint64(records))
	}
	o.mu.Lock()
	for _, w := range batch {
		if w.rec != nil {
			w.rec.off = off
			o.ix.addRecord(w.rec)
		} else {
			o.ix.mark(w.mark)
		}
		off += int64(len(w.line))
	}
	o.setSize(off)
	o.mu.Unlock()
	return nil
}

// maxSeqsPerMark keeps mark lines short.
const maxSeqsPerMark = 512

// MarkSent records that the control plane accepted the records (or already
// had them). They leave Pending for good.
func (o *Outbox) MarkSent(seqs ...uint64) error {
	return o.appendMarks(line{Op: opSent}, seqs)
}

// MarkFailed records a failed attempt to send the records; they stay
// pending. The count and the error show in inspection.
func (o *Outbox) MarkFailed(reason string, seqs ...uint64) error {
	return o.appendMarks(line{Op: opTry, N: 1, Error: truncate(reason, 512)}, seqs)
}

// MarkDead records that the control plane rejected the records for good.
// They leave Pending, and stay in the file, with the reason, for inspection.
func (o *Outbox) MarkDead(reason string, seqs ...uint64) error {
	return o.appendMarks(line{Op: opDead, Reason: truncate(reason, 512)}, seqs)
}

func (o *Outbox) appendMarks(m line, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	m.At = o.opts.Now()
	done := make(chan error, 1)
	o.qmu.Lock()
	if err := o.usable(); err != nil {
		o.qmu.Unlock()
		return err
	}
	for len(seqs) > 0 {
		k := min(len(seqs), maxSeqsPerMark)
		mk := m
		mk.Seqs = append([]uint64(nil), seqs[:k]...)
		seqs = seqs[k:]
		w := &write{line: encodeMark(mk), mark: &mk}
		if len(seqs) == 0 {
			// Batches commit in order, so the last chunk's outcome is the
			// outcome of all of them.
			w.done = done
		}
		o.enqueue(w)
	}
	o.qmu.Unlock()
	return <-done
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Pending returns up to max pending records, oldest first, whose lines add
// up to at most maxBytes (at least one record is returned when any is
// pending). Payloads are read from the file.
func (o *Outbox) Pending(max int, maxBytes int) ([]Record, error) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var (
		out   []Record
		total int
		err   error
	)
	o.ix.each(func(e *entry) bool {
		if e.state != StatePending {
			return true
		}
		if len(out) >= max || (len(out) > 0 && total+e.n > maxBytes) {
			return false
		}
		var r Record
		if r, err = o.readRecord(e); err != nil {
			return false
		}
		out = append(out, r)
		total += e.n
		return true
	})
	return out, err
}

// readRecord reads e's line back from the file. mu is held.
func (o *Outbox) readRecord(e *entry) (Record, error) {
	buf := make([]byte, e.n)
	if _, err := o.f.ReadAt(buf, e.off); err != nil {
		return Record{}, fmt.Errorf("outbox: read seq %d: %w", e.seq, err)
	}
	d, err := decode(buf[:len(buf)-1])
	if err != nil || d.Seq != e.seq {
		return Record{}, fmt.Errorf("outbox: seq %d at offset %d no longer reads back (%v); reopen to recover", e.seq, e.off, err)
	}
	return d.record(), nil
}

// Close waits for queued writes and a running compaction, then closes the
// file and releases the lock. Appends after Close fail with ErrClosed.
func (o *Outbox) Close() error {
	o.qmu.Lock()
	if o.closed {
		o.qmu.Unlock()
		return nil
	}
	o.closed = true
	o.qcond.Broadcast()
	o.qmu.Unlock()
	<-o.loopDone
	o.bg.Wait()
	o.mu.Lock()
	err := o.f.Close()
	o.mu.Unlock()
	if uerr := o.lock.Unlock(); err == nil {
		err = uerr
	}
	return err
}
