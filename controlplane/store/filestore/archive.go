package filestore

import (
	"bufio"
	"bytes"
	"cmp"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/state"
)

// The archive. A task that has not ended has its file in tasks/ and is
// in memory whole. A task that ended has its file in ended/ (ended/ID.json)
// and only its ref in memory: its id, when it was created and ended, its
// phase, repository and lease agent, the sizes of its events files. The
// refs of the archived tasks are also a log, ended/index.jsonl: one JSON
// line per change of an archived task (indexLine), the latest line of an
// id the one that counts, appended and synced in the commit that moves
// or changes the task. A start reads tasks/ whole, the index, and the
// names in ended/, never an archived task's file (except those a crash
// left in doubt: see Open).
//
// The moves, each in one commit, after the commit's events:
//
//   - a task that ends: its file is written to ended/ (synced, and the
//     directory), its index line appended (synced), then its file in
//     tasks/ removed. A crash in between leaves two copies: the start
//     keeps the newer by UpdatedAt, the archived one when they are equal,
//     and removes the other.
//   - an archived task that changes (a late completion) and stays ended:
//     when events are appended to it, an index line saying check goes
//     first (synced), then its events, its file in ended/ and a clean
//     index line: a crash between its events and its file leaves a line
//     saying check, and the start reads that task and brings it up to
//     date (Recover).
//   - an archived task a person retries or continues: as above, but its
//     file goes to tasks/, its index line says live, and then its file in
//     ended/ is removed.
//   - at a start (Recover), an ended task found in tasks/ (a directory
//     from before the archive, or a crash before a move): its file,
//     brought up to date, is renamed into ended/, the directories synced,
//     then its index line appended. A crash in between leaves it in one
//     place or the other; in ended/ without a line, the next start reads
//     it and indexes it.
//
// The start reads the index's latest line of each id, and the names in
// ended/: a name without a line (or whose line says check or live) is
// read and indexed, a line without a file (a pruned task) is dropped.
// When most of the index's lines are dead, the start writes it anew.

// indexName is the index log's name in ended/.
const indexName = "index.jsonl"

// indexLine is a line of the index: an archived task's ref (Live false),
// or a task that left the archive (Live).
type indexLine struct {
	ID string `json:"id"`
	// Live: the task left the archive (its file is in tasks/).
	Live bool `json:"live,omitempty"`
	// Check: events are being appended to the task: the start reads its
	// file and brings it up to date.
	Check   bool        `json:"check,omitempty"`
	Created int64       `json:"created,omitempty"` // Unix nanoseconds
	Ended   int64       `json:"ended,omitempty"`   // Unix nanoseconds (state.EndedAt)
	Phase   state.Phase `json:"phase,omitempty"`
	Repo    string      `json:"repo,omitempty"`
	Agent   string      `json:"agent,omitempty"`
	Events  int64       `json:"events,omitempty"` // the events file's size
	Cut     int64       `json:"cut,omitempty"`    // the cut keys file's size
}

// ref is what memory keeps of every task, archived or not: its place in
// the lists and what their filters select by. The first two fields never
// change.
type ref struct {
	id      string
	created int64 // Unix nanoseconds: the lists' order, then id
	ended   int64 // Unix nanoseconds of state.EndedAt, while terminal: Prune's order
	phase   state.Phase
	repo    string
	agent   string // the lease's agent, "" without a lease
	sz      sizes  // the task's events files, as far as committed
	// resident: the task is in memory whole (s.tasks), its file in
	// tasks/; otherwise it is archived. Only between Open and Recover is a
	// resident task terminal.
	resident bool
	gen      uint32 // counts the changes: a read of an archived file is cached only when none came meanwhile
}

// nanos is t in Unix nanoseconds, clamped to what an int64 holds.
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Year() < 1678:
		return math.MinInt64
	case t.Year() > 2261:
		return math.MaxInt64
	}
	return t.UnixNano()
}

func compareRefs(a, b *ref) int {
	return cmp.Or(cmp.Compare(a.created, b.created), strings.Compare(a.id, b.id))
}

func compareEnded(a, b *ref) int {
	return cmp.Or(cmp.Compare(a.ended, b.ended), strings.Compare(a.id, b.id))
}

// line is r's index line.
func (r *ref) line() indexLine {
	return indexLine{ID: r.id, Created: r.created, Ended: r.ended, Phase: r.phase, Repo: r.repo, Agent: r.agent, Events: r.sz.events, Cut: r.sz.cut}
}

// fill sets r's fields from t.
func (r *ref) fill(t *state.Task, intern func(string) string) {
	r.phase = t.Phase
	r.repo = intern(t.Repo)
	r.agent = ""
	if t.Lease != nil {
		r.agent = intern(t.Lease.AgentID)
	}
	r.ended = 0
	if t.Phase.Terminal() {
		r.ended = nanos(state.EndedAt(t))
	}
}

// lineRef is the ref t will have, with sizes sz: for its index line.
func lineRef(t *state.Task, sz sizes) indexLine {
	r := &ref{id: t.ID, created: nanos(t.CreatedAt), sz: sz}
	r.fill(t, func(s string) string { return s })
	return r.line()
}

// index is the index log, open to append.
type index struct {
	path string
	dir  string

	mu    sync.Mutex // one append at a time
	file  *os.File
	lines int // lines appended since open (with those read)
}

// readIndex reads the index (cutting a torn last line off it first), the
// latest line of each id, and how many lines it holds. A line that does
// not decode is skipped.
func readIndex(dir string) (map[string]indexLine, int, error) {
	path := filepath.Join(dir, indexName)
	if _, err := (events{dir: dir}).repairFile(path); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]indexLine{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	latest := map[string]indexLine{}
	n := 0
	br := bufio.NewReaderSize(f, 256<<10)
	for {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// No ref is this long: skip the rest of it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			n++
			continue
		}
		if errors.Is(err, io.EOF) {
			return latest, n, nil
		}
		if err != nil {
			return nil, 0, err
		}
		n++
		var l indexLine
		if json.Unmarshal(b, &l) == nil && state.ValidateID(l.ID) == nil {
			latest[l.ID] = l
		}
	}
}

// openIndex opens the index to append (creating it, 0600).
func openIndex(dir string, lines int) (*index, error) {
	path := filepath.Join(dir, indexName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := durable.SyncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return &index{path: path, dir: dir, file: f, lines: lines}, nil
}

// append appends lines and syncs them.
func (ix *index) append(lines []indexLine) error {
	if len(lines) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, err := ix.file.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("append to %s: %w", ix.path, err)
	}
	ix.lines += len(lines)
	if err := durable.Datasync(ix.file); err != nil {
		return fmt.Errorf("sync %s: %w", ix.path, err)
	}
	return nil
}

// rewrite replaces the index with lines (a temporary file synced, renamed
// over it, the directory synced) and opens it to append again.
func (ix *index) rewrite(lines []indexLine) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := atomic.WriteFile(ix.path, &buf); err != nil {
		return err
	}
	if err := os.Chmod(ix.path, 0o600); err != nil {
		return err
	}
	if err := durable.SyncDir(ix.dir); err != nil {
		return err
	}
	f, err := os.OpenFile(ix.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	ix.file.Close()
	ix.file, ix.lines = f, len(lines)
	return nil
}

func (ix *index) close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.file.Close()
}

// archiveNames lists the ids of the task files in ended/ (names only).
func archiveNames(dir string) (map[string]bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(names))
	for _, n := range names {
		if id, ok := strings.CutSuffix(n, ".json"); ok && state.ValidateID(id) == nil {
			ids[id] = true
		}
	}
	return ids, nil
}

// endedCache keeps the archived tasks read lately, decoded, with the seq
// of each one's last stored event, the least recently used going first.
type endedCache struct {
	max   int
	order *list.List // of *cached, the most recent first
	byID  map[string]*list.Element
}

type cached struct {
	t   *state.Task
	seq int
	gen uint32
}

func newEndedCache(max int) *endedCache {
	return &endedCache{max: max, order: list.New(), byID: map[string]*list.Element{}}
}

// get is task id as cached at gen, nil when it is not.
func (c *endedCache) get(id string, gen uint32) *cached {
	e := c.byID[id]
	if e == nil {
		return nil
	}
	if v := e.Value.(*cached); v.gen == gen {
		c.order.MoveToFront(e)
		return v
	}
	c.remove(id)
	return nil
}

func (c *endedCache) put(t *state.Task, seq int, gen uint32) {
	c.remove(t.ID)
	c.byID[t.ID] = c.order.PushFront(&cached{t, seq, gen})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.remove(last.Value.(*cached).t.ID)
	}
}

func (c *endedCache) remove(id string) {
	if e := c.byID[id]; e != nil {
		c.order.Remove(e)
		delete(c.byID, id)
	}
}

// endedCacheSize is how many archived tasks the cache holds: a few
// pages of the list.
const endedCacheSize = 512

// readEnded reads archived task id: from the cache, else from its file
// (mu is not held then), with the seq of its last stored event. A task
// that left the archive meanwhile is returned as it is now. nil when
// there is no such task.
func (s *Store) readEnded(id string) (*state.Task, int, error) {
	for range 3 {
		s.mu.Lock()
		r := s.refs[id]
		switch {
		case r == nil:
			s.mu.Unlock()
			return nil, 0, nil
		case r.resident:
			t, seq := s.tasks[id], r.sz.seq
			s.mu.Unlock()
			return t, seq, nil
		}
		gen := r.gen
		if c := s.cache.get(id, gen); c != nil {
			s.mu.Unlock()
			return c.t, c.seq, nil
		}
		s.mu.Unlock()
		t, b, err := s.loadArchived(id)
		if errors.Is(err, fs.ErrNotExist) {
			s.mu.Lock()
			r := s.refs[id]
			same := r != nil && !r.resident && r.gen == gen
			s.mu.Unlock()
			if same {
				return nil, 0, fmt.Errorf("controlplane: read ended task %s: %w", id, err)
			}
			continue // moved or pruned meanwhile: look again
		}
		if err != nil {
			return nil, 0, fmt.Errorf("controlplane: read ended task %s: %w", id, err)
		}
		seq := 0
		if b.EventsApplied != nil {
			seq = *b.EventsApplied
		}
		s.mu.Lock()
		if r := s.refs[id]; r != nil && !r.resident && r.gen == gen {
			s.cache.put(t, seq, gen)
		}
		s.mu.Unlock()
		return t, seq, nil
	}
	return nil, 0, fmt.Errorf("controlplane: read ended task %s: it keeps moving", id)
}

// loadArchived reads archived task id's file, and what it says of the
// task's events, and counts the read.
func (s *Store) loadArchived(id string) (*state.Task, books, error) {
	s.archiveReads.Add(1)
	var b books
	t, err := s.archive.LoadWith(id, &b)
	return t, b, err
}

// ArchiveReads is how many times the store read an ended task's file:
// for tests (a start reads none).
func (s *Store) ArchiveReads() int64 { return s.archiveReads.Load() }

// intern returns a string equal to v that the refs share.
func (s *Store) intern(v string) string {
	if v == "" {
		return ""
	}
	if w, ok := s.strings[v]; ok {
		return w
	}
	if len(s.strings) > 1<<16 {
		return v // many repositories or agents: stop sharing new ones
	}
	s.strings[v] = v
	return v
}

// install makes c task c.ID, with sizes sz: resident (in memory whole)
// or archived, and files it in every list and count. mu is held.
func (s *Store) install(c *state.Task, sz sizes, resident bool) *ref {
	r := s.refs[c.ID]
	if r == nil {
		r = &ref{id: c.ID, created: nanos(c.CreatedAt)}
		s.refs[c.ID] = r
		i, _ := slices.BinarySearchFunc(s.order, r, compareRefs)
		s.order = slices.Insert(s.order, i, r)
	} else {
		s.unfile(r)
	}
	r.fill(c, s.intern)
	r.sz, r.resident = sz, resident
	r.gen++
	s.cache.remove(c.ID)
	if resident {
		s.tasks[c.ID] = c
	} else {
		delete(s.tasks, c.ID)
	}
	s.file(r)
	return r
}

// installRef files an archived task from its index line. mu is held; the
// order is sorted after (Open adds many).
func (s *Store) installRef(l indexLine) {
	r := &ref{id: l.ID, created: l.Created, ended: l.Ended, phase: l.Phase, repo: s.intern(l.Repo), agent: s.intern(l.Agent),
		sz: sizes{events: l.Events, cut: l.Cut}}
	s.refs[l.ID] = r
	s.order = append(s.order, r)
	s.ended = append(s.ended, r)
	s.counts[r.phase]++
}

// file puts r in the lists its fields say: the queued, the leased, the
// archived by end, the counts. mu is held.
func (s *Store) file(r *ref) {
	s.counts[r.phase]++
	switch {
	case !r.resident && s.bulk:
		s.ended = append(s.ended, r) // sorted when the bulk ends
	case !r.resident:
		i, _ := slices.BinarySearchFunc(s.ended, r, compareEnded)
		s.ended = slices.Insert(s.ended, i, r)
	case r.phase == state.PhaseQueued:
		i, _ := slices.BinarySearchFunc(s.queued, r, compareRefs)
		s.queued = slices.Insert(s.queued, i, r)
	}
	if r.resident && !r.phase.Terminal() && r.agent != "" {
		m := s.leased[r.agent]
		if m == nil {
			m = map[string]struct{}{}
			s.leased[r.agent] = m
		}
		m[r.id] = struct{}{}
	}
}

// unfile takes r out of the lists file put it in. mu is held.
func (s *Store) unfile(r *ref) {
	if s.counts[r.phase]--; s.counts[r.phase] <= 0 {
		delete(s.counts, r.phase)
	}
	switch {
	case !r.resident:
		if i, ok := slices.BinarySearchFunc(s.ended, r, compareEnded); ok {
			s.ended = slices.Delete(s.ended, i, i+1)
		}
	case r.phase == state.PhaseQueued:
		if i, ok := slices.BinarySearchFunc(s.queued, r, compareRefs); ok {
			s.queued = slices.Delete(s.queued, i, i+1)
		}
	}
	if m := s.leased[r.agent]; m != nil {
		delete(m, r.id)
		if len(m) == 0 {
			delete(s.leased, r.agent)
		}
	}
}
