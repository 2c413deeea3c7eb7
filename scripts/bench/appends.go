package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgeagent/agent/outbox"
	diskqueue "github.com/nsqio/go-diskqueue"
	"github.com/tidwall/wal"
)

// appender is one contender's durable append, opened in an empty directory.
type appender interface {
	append(payload []byte) error
	// syncCount is how many syncs were made so far, or -1 when the
	// contender does not tell.
	syncCount() int64
	// appended is how many records the contender itself counts as
	// stored, checked against the harness's own count.
	appended() int64
	close() error
}

// contender is one way of appending durably.
type contender struct {
	name string
	note string
	open func(dir string) (appender, error)
	// oneWriter runs the contender with one writer whatever the case says:
	// the baseline is the one-writer loop.
	oneWriter bool
}

const baselineName = "write+fdatasync loop"

// contenders are the append contenders, the baseline first.
var contenders = []contender{
	{name: baselineName, note: "one writer, one write and one fdatasync per record (ratio 1.0 by definition)", open: openRawLoop, oneWriter: true},
	{name: "outbox", note: "this product's outbox.Append", open: openOutbox},
	{name: "group commit", note: "hand-written group commit, groupcommit.go (~80 lines)", open: openGroupFile},
	{name: "tidwall/wal sync", note: "tidwall/wal, fsync per Write, writers serialized by a mutex", open: openWALSync},
	{name: "tidwall/wal batch", note: "tidwall/wal, concurrent writes grouped into one WriteBatch (one fsync) by the same committer", open: openWALBatch},
	{name: "go-diskqueue", note: "nsqio/go-diskqueue, syncEvery=1: NOT durable at acknowledgement (Put answers before its fsync)", open: openDiskQueue},
}

// benchPayload is a JSON object of exactly size bytes.
func benchPayload(size int) []byte {
	return []byte(`{"pad":"` + strings.Repeat("x", size-10) + `"}`)
}

type rawLoop struct {
	f     *os.File
	line  []byte
	syncs int64
}

func openRawLoop(dir string) (appender, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &rawLoop{f: f}, nil
}

func (r *rawLoop) append(p []byte) error {
	r.line = append(append(r.line[:0], p...), '\n')
	if _, err := r.f.Write(r.line); err != nil {
		return err
	}
	r.syncs++
	return syscall.Fdatasync(int(r.f.Fd()))
}
func (r *rawLoop) syncCount() int64 { return r.syncs }
func (r *rawLoop) appended() int64  { return r.syncs }
func (r *rawLoop) close() error     { return r.f.Close() }

type outboxAppender struct{ o *outbox.Outbox }

func openOutbox(dir string) (appender, error) {
	o, err := outbox.Open(dir, outbox.Options{})
	if err != nil {
		return nil, err
	}
	return outboxAppender{o}, nil
}

func (a outboxAppender) append(p []byte) error {
	_, err := a.o.Append(outbox.Record{Kind: outbox.KindProgress, TaskID: "bench", Attempt: 1, Payload: json.RawMessage(p)})
	return err
}
func (a outboxAppender) syncCount() int64 { return int64(a.o.Stats().Syncs) }
func (a outboxAppender) appended() int64  { return int64(a.o.Stats().Appends) }
func (a outboxAppender) close() error     { return a.o.Close() }

type walSync struct {
	mu  sync.Mutex
	l   *wal.Log
	idx uint64
}

func openWALSync(dir string) (appender, error) {
	l, err := wal.Open(filepath.Join(dir, "wal"), nil)
	if err != nil {
		return nil, err
	}
	return &walSync{l: l}, nil
}

func (w *walSync) append(p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idx++
	return w.l.Write(w.idx, p)
}
func (w *walSync) syncCount() int64 { return w.appended() }
func (w *walSync) appended() int64  { w.mu.Lock(); defer w.mu.Unlock(); return int64(w.idx) }
func (w *walSync) close() error     { return w.l.Close() }

type walBatch struct {
	*committer
	l     *wal.Log
	b     wal.Batch
	index uint64
}

func openWALBatch(dir string) (appender, error) {
	l, err := wal.Open(filepath.Join(dir, "wal"), nil)
	if err != nil {
		return nil, err
	}
	w := &walBatch{l: l}
	w.committer = newCommitter(func(batch []*commitReq) error {
		for _, r := range batch {
			w.index++
			w.b.Write(w.index, r.payload)
		}
		return w.l.WriteBatch(&w.b)
	})
	return w, nil
}

func (w *walBatch) syncCount() int64 { return w.syncs.Load() }
func (w *walBatch) appended() int64  { return w.committed.Load() }
func (w *walBatch) close() error     { w.committer.close(); return w.l.Close() }

type diskQueue struct{ q diskqueue.Interface }

func openDiskQueue(dir string) (appender, error) {
	quiet := func(diskqueue.LogLevel, string, ...any) {}
	return diskQueue{diskqueue.New("bench", dir, 1<<28, 0, 1<<20, 1, 2*time.Second, quiet)}, nil
}

func (d diskQueue) append(p []byte) error { return d.q.Put(p) }
func (d diskQueue) syncCount() int64      { return -1 }
func (d diskQueue) appended() int64       { return d.q.Depth() }
func (d diskQueue) close() error          { return d.q.Close() }

// appendRun is one contender's figures for one case in one round.
type appendRun struct {
	records int64
	elapsed time.Duration
	syncs   int64 // -1: not told
	cpu     time.Duration
}

func (r appendRun) rate() float64 { return float64(r.records) / r.elapsed.Seconds() }

// appendSession is one contender on one case in one round: its log stays
// open from slice to slice, so that it grows as over one longer run.
type appendSession struct {
	c       contender
	dir     string
	a       appender
	writers int
	payload []byte
	run     appendRun
}

func openSession(c contender, parent string, size, writers int) (*appendSession, error) {
	dir, err := os.MkdirTemp(parent, "append-")
	if err != nil {
		return nil, err
	}
	a, err := c.open(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: open: %w", c.name, err)
	}
	if c.oneWriter {
		writers = 1
	}
	return &appendSession{c: c, dir: dir, a: a, writers: writers, payload: benchPayload(size)}, nil
}

// slice runs the session's writers for about d: they append the payload
// until told to stop; the clock stops when the last append has returned.
func (s *appendSession) slice(d time.Duration) error {
	runtime.GC()
	cpu0 := cpuTime()
	var (
		stop  atomic.Bool
		count atomic.Int64
		first atomic.Pointer[error]
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range s.writers {
		wg.Go(func() {
			for !stop.Load() {
				if err := s.a.append(s.payload); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				count.Add(1)
			}
		})
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	s.run.elapsed += time.Since(start)
	s.run.cpu += cpuTime() - cpu0
	s.run.records += count.Load()
	if e := first.Load(); e != nil {
		return fmt.Errorf("%s: append: %w", s.c.name, *e)
	}
	return nil
}

// close ends the session, checks the harness's count against the
// contender's own and returns the figures of all its slices.
func (s *appendSession) close() (appendRun, error) {
	defer os.RemoveAll(s.dir)
	s.run.syncs = s.a.syncCount()
	stored := s.a.appended()
	if err := s.a.close(); err != nil {
		return appendRun{}, fmt.Errorf("%s: close: %w", s.c.name, err)
	}
	if stored != s.run.records {
		return appendRun{}, fmt.Errorf("%s: %d appends answered, %d stored by its own count", s.c.name, s.run.records, stored)
	}
	return s.run, nil
}

// runCase runs every contender on one case for about d each, in slices
// taken in turn (contender order rotated by shift), so that a disk that
// is slower for a few seconds slows them all alike rather than the one
// whose turn it was.
func runCase(ac appendCase, d time.Duration, slices, shift int) ([]appendRun, error) {
	slices = max(slices, 1)
	sessions := make([]*appendSession, len(contenders))
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.a.close()
				os.RemoveAll(s.dir)
			}
		}
	}()
	for j, c := range contenders {
		s, err := openSession(c, ac.dir, ac.size, ac.writers)
		if err != nil {
			return nil, err
		}
		sessions[j] = s
	}
	for range slices {
		for k := range contenders {
			if err := sessions[(k+shift)%len(contenders)].slice(d / time.Duration(slices)); err != nil {
				return nil, err
			}
		}
	}
	runs := make([]appendRun, len(contenders))
	for j, s := range sessions {
		sessions[j] = nil
		r, err := s.close()
		if err != nil {
			return nil, err
		}
		runs[j] = r
	}
	return runs, nil
}

// appendCase is one payload size, writer count and file system.
type appendCase struct {
	fs      string // "disk" or "tmpfs"
	dir     string
	size    int
	writers int
}

func (c appendCase) String() string {
	return fmt.Sprintf("%s, %s, %d writer%s", c.fs, sizeName(c.size), c.writers, plural(c.writers))
}

// appendRow is the result of one contender on one case over all rounds.
type appendRow struct {
	Case          string    `json:"case"`
	Contender     string    `json:"contender"`
	Ratios        []float64 `json:"ratios"` // records/s over the baseline's, per round
	Ratio         float64   `json:"ratio"`  // median of Ratios
	RecordsPerSec float64   `json:"records_per_s"`
	Records       int64     `json:"records"`
	SyncsPerRec   float64   `json:"syncs_per_record"` // -1: not told
	CPUPerRec     float64   `json:"cpu_us_per_record"`
}

// appendsSection runs every case, every round, every contender in slices
// taken in turn within a case (runCase). The contenders' order rotates
// from round to round.
func appendsSection(cfg config, log *log.Logger) ([]appendRow, error) {
	var cases []appendCase
	for _, fs := range cfg.filesystems() {
		for _, size := range cfg.payloads {
			for _, w := range cfg.writers {
				cases = append(cases, appendCase{fs: fs.name, dir: fs.dir, size: size, writers: w})
			}
		}
	}
	runs := make([][][]appendRun, len(cases)) // case, contender, round
	for i := range runs {
		runs[i] = make([][]appendRun, len(contenders))
	}
	for round := range cfg.rounds {
		for i, ac := range cases {
			rs, err := runCase(ac, cfg.appendTime, cfg.appendSlices, round)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ac, err)
			}
			for j, r := range rs {
				log.Printf("round %d, %s, %s: %.0f records/s", round+1, ac, contenders[j].name, r.rate())
				runs[i][j] = append(runs[i][j], r)
			}
		}
	}
	var rows []appendRow
	for i, ac := range cases {
		base := runs[i][0]
		for j, c := range contenders {
			row := appendRow{Case: ac.String(), Contender: c.name}
			var rates []float64
			var syncs int64
			var cpu time.Duration
			syncsKnown := true
			for round, r := range runs[i][j] {
				row.Ratios = append(row.Ratios, r.rate()/base[round].rate())
				rates = append(rates, r.rate())
				row.Records += r.records
				cpu += r.cpu
				if r.syncs < 0 {
					syncsKnown = false
				}
				syncs += r.syncs
			}
			row.Ratio = median(row.Ratios)
			row.RecordsPerSec = median(rates)
			row.SyncsPerRec = -1
			if syncsKnown && row.Records > 0 {
				row.SyncsPerRec = float64(syncs) / float64(row.Records)
			}
			if row.Records > 0 {
				row.CPUPerRec = float64(cpu.Microseconds()) / float64(row.Records)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}
