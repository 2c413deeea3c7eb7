package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

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
	// OnCommit, if set, is told of each group commit that synced records:
	// how many, the bytes written, and how long the sync took. It runs on
	// the goroutine leading the commit (one of the appenders), before the
	// others are answered, so it must be quick and must not call the
	// outbox. Metrics use it.
	OnCommit func(records int, bytes int64, sync time.Duration)
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

	// The queue of lines waiting to be committed. qmu guards it and
	// everything assigned at enqueue time.
	qmu        sync.Mutex
	qcond      *sync.Cond // signalled when leading turns false after Close
	queue      []*write
	queueBytes int64
	nextSeq    uint64
	dropped    map[string]uint64 // log records refused per task, not yet announced
	closed     bool
	// leading is true while an appender commits the queue (the leader) or
	// has been handed the lead and is about to. While it is false the queue
	// is empty: whoever queues a line then leads.
	leading bool

	spare []*write // the array of a batch before, reused for the queue (qmu)

	// Owned by the leader: passing the lead (under qmu) passes it.
	broken error // a failed write the file is not yet repaired from

	bg sync.WaitGroup // background compactions

	// cmu serializes writers of the file: the leader and compaction's
	// final step.
	cmu    sync.Mutex
	wbuf   []byte
	zeroed int64 // the file's size: its lines, then the stretch zeroed ahead of them; never below size

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

// write is one line waiting to be committed.
type write struct {
	line  []byte
	rec   *entry     // set for a record
	mark  *line      // set for a mark
	done  chan error // nil when nobody waits
	draft *draft     // the record's draft, which holds this write, recycled once written
}

// errLead is sent, instead of an outcome, to the waiter that is to lead
// the next commit. It never leaves the package.
var errLead = errors.New("outbox: lead the commit")

// donePool recycles the channels appenders wait on; one goes back empty,
// once its outcome was received.
var donePool = sync.Pool{New: func() any { return make(chan error, 1) }}

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
		dropped: make(map[string]uint64),
	}
	o.qcond = sync.NewCond(&o.qmu)
	corrupt, err := o.recover()
	if err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	o.nextSeq = o.ix.nextSeq
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
		o.fileEndsAt(int64(len(hdr)))
		return false, nil
	}
	res, _, err := scanBeforeZeros(f, info.Size(), o.opts.MaxRecordBytes, o.ix.add)
	o.ix.doneScanning()
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
	o.tornBytes = res.torn.n
	if res.end < info.Size() { // a torn tail, the zeroed stretch, or both
		if err := f.Truncate(res.end); err != nil {
			return fail(fmt.Errorf("outbox: truncate torn tail: %w", err))
		}
		if err := o.sync(f); err != nil {
			return fail(fmt.Errorf("outbox: sync: %w", err))
		}
	}
	o.fileEndsAt(res.end)
	return len(res.corrupt) > 0, nil
}

func (o *Outbox) setSize(n int64) {
	o.size = n
	o.fileBytes.Store(n)
}

// fileEndsAt records a file that holds its lines and nothing after them,
// n bytes: as Open leaves it, and as compaction writes it.
func (o *Outbox) fileEndsAt(n int64) {
	o.setSize(n)
	o.zeroed = n
}

// zeroAheadBytes is how far past its last line the writer keeps the file
// zeroed, while the file system has more than zeroAheadMinFree free.
const (
	zeroAheadBytes   = 1 << 20
	zeroAheadMinFree = 64 << 20
)

// zeroBlock is what the stretch is written from; it is never written to,
// so its pages are the kernel's one zero page.
var zeroBlock [64 << 10]byte

// zeroAhead extends the file with zeros to zeroAheadBytes past end, where
// the batch about to be written ends, so that the batches after it
// overwrite blocks the file has: their fdatasync then writes their data
// and need not commit the file system's journal for a new size (on ext4
// on a virtual disk, 1.4x the durable writes per second with 256 B, 1.7x
// with 4 KiB). The batch's own sync makes the zeros durable. Should the
// zeros not fit (a full disk), it cuts back what it wrote and the batch
// appends as it would without them. On a nearly full disk it zeroes
// nothing: the space is left to whoever needs it, and a full disk fails
// the next write at once, so the agent reports it and holds its reports.
// cmu is held.
func (o *Outbox) zeroAhead(end int64) {
	if free := durable.FreeBytes(o.dir); free >= 0 && free < zeroAheadMinFree {
		return
	}
	to := (end + zeroAheadBytes + 4095) &^ 4095
	for at := o.zeroed; at < to; {
		n := min(int64(len(zeroBlock)), to-at)
		if _, err := o.f.WriteAt(zeroBlock[:n], at); err != nil {
			_ = o.f.Truncate(o.zeroed)
			return
		}
		at += n
	}
	o.zeroed = to
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
	if !r.Kind.Valid() || r.TaskID == "" || r.Attempt > math.MaxInt32 || r.Attempt < -math.MaxInt32 {
		return 0, fmt.Errorf("%w: kind %q, task %q, attempt %d", ErrInvalid, r.Kind, r.TaskID, r.Attempt)
	}
	// JSON would carry invalid UTF-8 as U+FFFD: the key the file holds
	// would not be the one sent before a restart.
	if !utf8.ValidString(r.TaskID) || !utf8.ValidString(r.Key) {
		return 0, fmt.Errorf("%w: task %q or key %q is not UTF-8", ErrInvalid, r.TaskID, r.Key)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = o.opts.Now()
	}
	r.CreatedAt = r.CreatedAt.UTC()
	d, err := newDraft(r)
	if err != nil {
		return 0, err
	}
	if n := d.maxLen(); n > o.opts.MaxRecordBytes {
		d.release()
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, o.opts.MaxRecordBytes)
	}
	o.qmu.Lock()
	if err := o.usable(); err != nil {
		o.qmu.Unlock()
		d.release()
		return 0, err
	}
	if r.Kind == KindLog && o.full(int64(d.maxLen())) {
		o.dropped[r.TaskID]++
		o.droppedLogs.Add(1)
		o.qmu.Unlock()
		d.release()
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
	done := donePool.Get().(chan error)
	seq := o.enqueueDraft(d, done)
	err = o.await(done)
	donePool.Put(done)
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// usable reports why the outbox cannot take work, if it cannot. qmu is held.
// A failed write does not make it unusable: the leader repairs the file
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
	l := d.finish(seq)
	e := d.e
	e.seq, e.n = seq, int32(len(l))
	d.w = write{line: l, rec: e, done: done, draft: d}
	o.enqueue(&d.w)
	return seq
}

// droppedMarker is the log record that tells the control plane how many
// log records of a task the outbox refused while it was full.
func droppedMarker(next Record, n uint64) Record {
	msg := fmt.Sprintf("outbox full: %d log record(s) dropped", n)
	payload, _ := json.Marshal(map[string]any{"stream": "agent", "dropped": n, "lines": []string{msg}})
	return Record{Kind: KindLog, TaskID: next.TaskID, Attempt: next.Attempt, CreatedAt: next.CreatedAt, Payload: payload}
}

// enqueue queues w. qmu is held.
func (o *Outbox) enqueue(w *write) {
	o.queue = append(o.queue, w)
	o.queueBytes += int64(len(w.line))
}

// await is called with qmu held, once the caller has queued its lines,
// the last of them with done; it releases qmu and returns the outcome of
// the write.
//
// Group commit without a committer goroutine: the caller that finds no
// commit under way leads one itself: it takes everything queued, writes
// and syncs it and answers the others. Any other caller waits once, for
// its outcome, or to be handed the lead (see lead).
func (o *Outbox) await(done chan error) error {
	if o.leading {
		o.qmu.Unlock()
	} else {
		o.leading = true
		o.lead()
	}
	err := <-done
	if err == errLead {
		o.qmu.Lock()
		o.lead()
		err = <-done // the first batch held the caller's own lines
	}
	return err
}

// lead commits the queue as one batch, with one write and one sync,
// indexes it, passes the lead on and answers the waiters. If lines were
// queued meanwhile, the lead goes to the oldest of their waiters (leading
// stays true); otherwise leading turns false. It is passed on before the
// waiters are answered, so that the next batch's write and sync go on
// while this one's waiters are woken. A leader leads one batch only, so
// that its own caller returns, and can queue its next line behind the
// next batch, as it would behind a committer goroutine. qmu is held on
// entry and released on return.
//
// A write or sync that fails (ENOSPC, EIO) fails its whole batch, and the
// file is cut back to its last good size and synced, so that no partial
// line stays behind; the next batch is tried afresh. Until that repair
// succeeds, every batch fails with its error.
func (o *Outbox) lead() {
	batch := o.queue
	o.queue, o.queueBytes = o.spare[:0], 0
	o.spare = nil
	o.qmu.Unlock()

	var err error
	if o.broken != nil {
		if rerr := o.repair(); rerr != nil {
			err = fmt.Errorf("%w (and the repair failed: %v)", o.broken, rerr)
		} else {
			o.broken = nil
		}
	}
	if err == nil {
		if err = o.commit(batch); err != nil {
			o.broken = err
			if o.repair() == nil {
				o.broken = nil
			}
		}
	}
	if err != nil {
		o.writeErrors.Add(1)
		msg := err.Error()
		o.failing.Store(&msg)
	} else if o.failing.Load() != nil {
		o.failing.Store(nil)
	}
	if err == nil {
		// While still leading, so that Close, which waits for the lead to
		// end, then also waits for a compaction started here.
		o.maybeCompact()
	}

	o.qmu.Lock()
	if len(o.queue) == 0 {
		o.leading = false
		if o.closed {
			o.qcond.Broadcast()
		}
	} else {
		// Every caller's lines end with one that has a waiter.
		for _, w := range o.queue {
			if w.done != nil {
				w.done <- errLead
				break
			}
		}
	}
	o.qmu.Unlock()

	for i, w := range batch {
		if w.done != nil {
			w.done <- err
		}
		if w.draft != nil {
			w.draft.release() // w with it
		}
		batch[i] = nil
	}
	// The batch's array is kept for a queue to come; qmu guards it, the
	// lead having moved on.
	o.qmu.Lock()
	if o.spare == nil {
		o.spare = batch[:0]
	}
	o.qmu.Unlock()
}

// repair cuts the file back to its last good size, dropping whatever part
// of a failed batch reached it, and syncs the cut.
func (o *Outbox) repair() error {
	o.cmu.Lock()
	defer o.cmu.Unlock()
	o.mu.RLock()
	f, size := o.f, o.size
	o.mu.RUnlock()
	o.zeroed = size
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
	off, end := o.size, o.size+int64(len(buf))
	if end > o.zeroed {
		o.zeroAhead(end)
	}
	if _, err := o.f.WriteAt(buf, off); err != nil {
		return fmt.Errorf("outbox: write: %w", err)
	}
	// A batch written without a stretch (a nearly full disk, a zero write
	// refused) moves the file's end past it: the next stretch must start
	// after the lines, never over them.
	o.zeroed = max(o.zeroed, end)
	// Marks alone need no sync: a lost sent mark costs a duplicate send,
	// which the control plane drops. Records are synced before anyone is
	// told they are written.
	if records > 0 {
		var syncStart time.Time
		if o.opts.OnCommit != nil { // the clock only for an observer
			syncStart = time.Now()
		}
		if err := o.sync(o.f); err != nil {
			return fmt.Errorf("outbox: sync: %w", err)
		}
		o.syncs.Add(1)
		o.appends.Add(uint64(records))
		if o.opts.OnCommit != nil {
			o.opts.OnCommit(records, int64(len(buf)), time.Since(syncStart))
		}
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
	done := donePool.Get().(chan error)
	o.qmu.Lock()
	if err := o.usable(); err != nil {
		o.qmu.Unlock()
		donePool.Put(done)
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
	err := o.await(done)
	donePool.Put(done)
	return err
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
//
// It starts at the index's pending cursor, so its cost does not grow with
// the records sent before; the lines of a batch, next to each other in the
// file, are read with one read.
func (o *Outbox) Pending(max int, maxBytes int) ([]Record, error) {
	return o.PendingAfter(0, max, maxBytes)
}

// PendingAfter is Pending of the records whose seq is above after. A
// sender with a batch in flight reads the next one meanwhile, passing the
// last seq of the batch in flight.
func (o *Outbox) PendingAfter(after uint64, max int, maxBytes int) ([]Record, error) {
	o.mu.Lock()
	o.ix.oldestPending() // moves the cursor past what was sent
	o.mu.Unlock()
	o.mu.RLock()
	defer o.mu.RUnlock()
	var (
		es    []*entry
		total int
	)
	o.ix.eachFrom(o.ix.after(after), func(e *entry) bool {
		if e.state != statePending {
			return true
		}
		if len(es) >= max || (len(es) > 0 && total+int(e.n) > maxBytes) {
			return false
		}
		es = append(es, e)
		total += int(e.n)
		return true
	})
	if len(es) == 0 {
		return nil, nil
	}
	first, last := es[0], es[len(es)-1]
	var (
		span     []byte
		spanFrom = first.off
		spanLen  = last.off + int64(last.n) - first.off
	)
	// One read when the lines lie close together (dead records and sent
	// ones not yet compacted away may sit between them).
	if spanLen <= 2*int64(total)+64<<10 {
		span = make([]byte, spanLen)
		if _, err := o.f.ReadAt(span, spanFrom); err != nil {
			return nil, fmt.Errorf("outbox: read seqs %d to %d: %w", first.seq, last.seq, err)
		}
	}
	out := make([]Record, len(es))
	for i, e := range es {
		var buf []byte
		if span != nil {
			buf = span[e.off-spanFrom : e.off-spanFrom+int64(e.n)]
		} else {
			buf = make([]byte, e.n)
			if _, err := o.f.ReadAt(buf, e.off); err != nil {
				return nil, fmt.Errorf("outbox: read seq %d: %w", e.seq, err)
			}
		}
		r, err := readRecord(e, buf)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// readRecord turns e's line, as read back from the file, into a Record.
// The index already holds every field but the payload; when the line is
// laid out as Append writes it, the payload is the bytes between the
// fields before it and those after, taken as they are: it was checked to
// be JSON when the line was indexed (by Append, or by Open's decoding),
// and the CRC says the line has not changed since. Any other layout is
// decoded in full.
func readRecord(e *entry, buf []byte) (Record, error) {
	bad := func(err error) (Record, error) {
		return Record{}, fmt.Errorf("outbox: seq %d at offset %d no longer reads back (%v); reopen to recover", e.seq, e.off, err)
	}
	if len(buf) == 0 || buf[len(buf)-1] != '\n' {
		return bad(ErrTornTail)
	}
	l := buf[:len(buf)-1]
	if err := verify(l); err != nil {
		return bad(err)
	}
	r := Record{Seq: e.seq, Key: e.recordKey(), Kind: e.kind, TaskID: e.taskID, Attempt: int(e.attempt), CreatedAt: e.createdAt()}
	if p, ok := payloadOf(l[:len(l)-crcSuffixLen], &r); ok {
		r.Payload = p
		return r, nil
	}
	var d line
	err := decode(l, &d)
	if err == nil && d.Seq != e.seq {
		err = fmt.Errorf("seq %d in the line", d.Seq)
	}
	if err != nil {
		return bad(err)
	}
	return d.record(), nil
}

// payloadOf returns the payload of body (a record line before its CRC
// field) when body is exactly the line Append writes for r, payload
// aside.
func payloadOf(body []byte, r *Record) ([]byte, bool) {
	var a [256]byte
	pre := appendRecordHead(a[:0], r.Kind, r.TaskID, r.Attempt, r.CreatedAt)
	if !bytes.HasPrefix(body, pre) {
		return nil, false
	}
	var b [128]byte
	post := append(b[:0], `,"key":`...)
	post = appendJSONString(post, r.Key)
	post = append(post, `,"seq":`...)
	post = strconv.AppendUint(post, r.Seq, 10)
	if len(body) < len(pre)+len(post) || !bytes.HasSuffix(body, post) {
		return nil, false
	}
	return trimJSONSpace(body[len(pre) : len(body)-len(post)]), true
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
	for o.leading { // the leader commits what was queued before Close
		o.qcond.Wait()
	}
	o.qmu.Unlock()
	o.bg.Wait()
	o.mu.Lock()
	// A file closed cleanly ends with its last line; after a crash, the
	// next Open cuts the zeroed stretch.
	var err error
	if o.zeroed > o.size {
		if err = o.f.Truncate(o.size); err == nil {
			err = o.sync(o.f)
		}
		if err != nil {
			err = fmt.Errorf("outbox: cut the zeroed stretch: %w", err)
		}
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	o.mu.Unlock()
	if uerr := o.lock.Unlock(); err == nil {
		err = uerr
	}
	return err
}
