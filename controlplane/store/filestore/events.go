package filestore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/durable"
)

// events keeps the accepted events of every task, one JSONL file per task
// in dir, each line a StoredEvent, appended and synced before the answer.
//
// The events are the record: they are stored before the task file that
// reflects them is saved, and the task file says how many it reflects
// and how large the file was then (books: events_applied, events_bytes).
// A crash between the two is repaired at the next start by applying the
// events past that size again (Store.Recover); a crash in the middle of
// an append leaves a torn last line, which the next start cuts off
// (repair) before anything is appended after it.
//
// The keys of the events whose output was cut (no line) are in a file
// of their own per task (cutPath), appended and synced with the events
// in the same commit, read back with the keys of the lines.
//
// Nothing here holds a task's events in memory: they are read a line at
// a time (lineScan), for a page of an answer, for the keys of a task, or
// for the events a crash left unapplied.
type events struct {
	dir string
}

func (ev events) path(taskID string) string { return filepath.Join(ev.dir, taskID+".jsonl") }

// cutPath is a task's file of cut keys: the keys of the events whose
// output was cut (stored with no line), one JSON-quoted key a line. Each
// commit's keys follow a line of their own that holds a number: the size
// of the task's events file after that commit (what its task file says
// once saved), so that a start can tell the keys of a commit whose task
// file a crash kept from being saved (trimCut).
func (ev events) cutPath(taskID string) string { return filepath.Join(ev.dir, taskID+".cut") }

// maxStoredLine is the longest line an events file holds: one event of a
// request body at its limit, and the fields the control plane adds. A
// longer line (written before keys were capped) is skipped, not read.
const maxStoredLine = 2*api.MaxBatchBytes + 64<<10

// append writes lines (encodeStored's, one after another) to a task's
// events file, syncs them, and returns the file's size after them. torn
// is for the fault suite: write half, then crash.
func (ev events) append(taskID string, lines []byte, torn bool) (int64, error) {
	return ev.appendFile(ev.path(taskID), lines, torn)
}

// appendCut appends keys to a task's file of cut keys, after the line of
// eventsSize (the events file's size after the commit), syncs them, and
// returns the file's size after them.
func (ev events) appendCut(taskID string, keys []string, eventsSize int64) (int64, error) {
	b := strconv.AppendInt(nil, eventsSize, 10)
	b = append(b, '\n')
	for _, k := range keys {
		q, err := json.Marshal(k)
		if err != nil {
			return 0, err
		}
		b = append(append(b, q...), '\n')
	}
	return ev.appendFile(ev.cutPath(taskID), b, false)
}

// appendFile appends lines to the file at path, creating it (0600; the
// directory is synced then, so that the new file outlives a crash),
// syncs them, and returns the file's size after them.
func (ev events) appendFile(path string, lines []byte, torn bool) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if before.Size() == 0 {
		// New, or empty: its name may not be on disk yet.
		if err := durable.SyncDir(ev.dir); err != nil {
			return 0, err
		}
	}
	if torn {
		f.Write(lines[:len(lines)/2])
		f.Sync()
		crash()
	}
	if _, err := f.Write(lines); err != nil {
		// Cut what part of the batch got in: the next append must start
		// on a line of its own.
		if info, serr := f.Stat(); serr == nil {
			_ = f.Truncate(info.Size() - int64(len(lines))) // best effort; repair at start covers the rest
		}
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// open opens a task's events file for reading; a task with no events has
// none (nil, nil).
func (ev events) open(taskID string) (*os.File, error) {
	f, err := os.Open(ev.path(taskID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return f, err
}

// repair cuts a torn last line (a crash in the middle of an append) off a
// task's events file, syncs the cut, and returns the file's size. It reads
// only the file's tail.
func (ev events) repair(taskID string) (int64, error) { return ev.repairFile(ev.path(taskID)) }

// repairFile cuts a torn last line off the file at path (an events file
// or a file of cut keys), syncs the cut, and returns the file's size; a
// file that is not there has size 0.
func (ev events) repairFile(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return 0, err
	}
	size := info.Size()
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil || last[0] == '\n' {
		return size, err
	}
	buf := make([]byte, min(size, 64<<10))
	for pos := size; pos > 0; {
		n := min(int64(len(buf)), pos)
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return 0, err
		}
		i := bytes.LastIndexByte(buf[:n], '\n')
		if i < 0 {
			continue
		}
		keep := pos + int64(i) + 1
		if err := f.Truncate(keep); err != nil {
			return 0, err
		}
		return keep, durable.Datasync(f)
	}
	if err := f.Truncate(0); err != nil { // one torn line and nothing before it
		return 0, err
	}
	return 0, durable.Datasync(f)
}

// lineScan reads the lines of a region of an events file one at a time,
// through a buffer of its own: a line longer than the caller keeps is
// skipped, never held.
type lineScan struct {
	r    *bufio.Reader
	long []byte // a line longer than the buffer, put together
}

func newLineScan(f *os.File, off, end int64) *lineScan {
	return &lineScan{r: bufio.NewReaderSize(io.NewSectionReader(f, off, max(end-off, 0)), 64<<10)}
}

// next reads the next line. n is its length with its newline, 0 at the
// end of the region (a last line without its newline is not a line yet:
// an append in progress, or a torn one). line is the line without its
// newline when it is at most keep bytes long, else nil; it is valid until
// the next call.
func (s *lineScan) next(keep int) (line []byte, n int64, err error) {
	s.long = s.long[:0]
	whole := true
	for {
		frag, err := s.r.ReadSlice('\n')
		n += int64(len(frag))
		switch {
		case err == nil && n == int64(len(frag)):
			if n-1 > int64(keep) {
				return nil, n, nil
			}
			return frag[:len(frag)-1], n, nil // the common case: in the buffer
		case whole && n-1 <= int64(keep):
			s.long = append(s.long, frag...)
		default:
			whole, s.long = false, s.long[:0]
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, 0, nil
		case err != nil:
			return nil, 0, err
		}
		if !whole {
			return nil, n, nil
		}
		return s.long[:len(s.long)-1], n, nil
	}
}

// head is the start of the line next read, at most the buffer's size:
// enough for its key.
func (s *lineScan) head(keep int) (head []byte, n int64, err error) {
	b, err := s.r.Peek(min(keep, s.r.Size()))
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, 0, err
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	head = bytes.Clone(b)
	_, n, err = s.next(-1)
	return head, n, err
}

// keyPrefix starts every line: a StoredEvent's first field is its key.
const keyPrefix = `{"key":`

// lineKey is the key of a stored line, read from its first bytes.
func lineKey(head []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(head, []byte(keyPrefix+`"`))
	if !ok {
		return "", false
	}
	escaped := false
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			if i == 0 {
				return "", false
			}
			if !escaped {
				return string(rest[:i]), true
			}
			var k string
			if json.Unmarshal(head[len(keyPrefix):len(keyPrefix)+i+2], &k) != nil {
				return "", false
			}
			return k, k != ""
		}
	}
	return "", false
}

// keys reads the keys of a task: those of its events, from the lines in
// its events file's first sz.events bytes, and its cut keys, from its
// file of cut keys' first sz.cut bytes.
func (ev events) keys(taskID string, sz sizes) (map[string]struct{}, error) {
	keys := map[string]struct{}{}
	if err := ev.cutKeys(taskID, sz.cut, keys); err != nil {
		return nil, err
	}
	f, err := ev.open(taskID)
	if f == nil || err != nil {
		return keys, err
	}
	defer f.Close()
	sc := newLineScan(f, 0, sz.events)
	for {
		head, n, err := sc.head(len(keyPrefix) + 8*api.MaxKeyBytes)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return keys, nil
		}
		if k, ok := lineKey(head); ok {
			keys[k] = struct{}{}
		}
	}
}

// cutKeys adds to keys the keys in the first end bytes of a task's file
// of cut keys. A line that is not a JSON string is skipped.
func (ev events) cutKeys(taskID string, end int64, keys map[string]struct{}) error {
	f, err := os.Open(ev.cutPath(taskID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := newLineScan(f, 0, end)
	for {
		line, n, err := sc.next(8*api.MaxKeyBytes + 2)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		var k string
		if line != nil && json.Unmarshal(line, &k) == nil && k != "" {
			keys[k] = struct{}{}
		}
	}
}

// trimCut cuts off a task's file of cut keys the keys of the commits
// whose task file was not saved: those after a size past eventsSize,
// what the task file says. It syncs the cut and returns the file's size.
// Those events were never answered for: sent again, they are counted
// again, as the task file that a crash kept back needs.
func (ev events) trimCut(taskID string, eventsSize, end int64) (int64, error) {
	f, err := os.OpenFile(ev.cutPath(taskID), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := newLineScan(f, 0, end)
	var off int64
	for {
		line, n, err := sc.next(32)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return end, nil
		}
		if size, err := strconv.ParseInt(string(line), 10, 64); err == nil && size > eventsSize {
			if err := f.Truncate(off); err != nil {
				return 0, err
			}
			return off, durable.Datasync(f)
		}
		off += n
	}
}

// storedLine is an event read back from its file, with its line's length.
type storedLine struct {
	api.StoredEvent
	size int64
}

// read decodes the events stored in a task's file from byte off to end:
// the events a crash left unapplied. A line that does not decode is
// skipped, as every reader skips it.
func (ev events) read(taskID string, off, end int64) ([]storedLine, error) {
	f, err := ev.open(taskID)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	var out []storedLine
	sc := newLineScan(f, off, end)
	for {
		line, n, err := sc.next(maxStoredLine)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		var e api.StoredEvent
		if line != nil && json.Unmarshal(line, &e) == nil && e.Key != "" {
			out = append(out, storedLine{e, n})
		}
	}
}

// skipLines returns the offset after a task's first n lines, within its
// file's first end bytes, and how many lines there were when fewer.
func (ev events) skipLines(taskID string, n int, end int64) (off int64, lines int, err error) {
	f, err := ev.open(taskID)
	if f == nil || err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := newLineScan(f, 0, end)
	for lines < n {
		_, size, err := sc.next(-1)
		if err != nil {
			return 0, 0, err
		}
		if size == 0 {
			break
		}
		off += size
		lines++
	}
	return off, lines, nil
}

// page reads a page of a task's events from its file's first end bytes:
// up to limit after seq after, at most maxBytes of lines but at least
// one. First the page's bounds, by line lengths alone; then its lines. A
// line no reader can take (written before keys were capped) keeps its
// seq but is left out.
func (ev events) page(taskID string, end int64, after, limit int, maxBytes int64) ([]store.EventLine, bool, error) {
	f, err := ev.open(taskID)
	if f == nil || err != nil {
		return nil, false, err
	}
	defer f.Close()
	sc := newLineScan(f, 0, end)
	var from, size int64
	for seq := 0; seq < after; seq++ {
		_, n, err := sc.next(-1)
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			break
		}
		from += n
	}
	count := 0
	for count < limit {
		_, n, err := sc.next(-1)
		if err != nil {
			return nil, false, err
		}
		if n == 0 || count > 0 && size+n > maxBytes {
			break
		}
		count, size = count+1, size+n
	}
	more := from+size < end
	sc = newLineScan(f, from, from+size)
	var out []store.EventLine
	for seq := after + 1; ; seq++ {
		line, n, err := sc.next(maxStoredLine)
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			break
		}
		if !storedWell(line) {
			continue
		}
		out = append(out, store.EventLine{Seq: seq, Line: bytes.Clone(line)})
	}
	return out, more, nil
}

// storedWell reports whether an events file's line is an event every
// reader can take: JSON, with a key.
func storedWell(line []byte) bool {
	if _, ok := lineKey(line); !ok {
		return false
	}
	return json.Valid(line)
}

// remove deletes a task's events file and its file of cut keys.
func (ev events) remove(taskID string) error {
	for _, path := range []string{ev.path(taskID), ev.cutPath(taskID)} {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
