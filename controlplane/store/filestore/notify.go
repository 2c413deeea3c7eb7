package filestore

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/internal/private"
)

// notifyLog is the queue of notifications waiting for delivery: every
// record in memory, and on disk notify/log.jsonl, one JSON line per
// change, appended and synced before the call (or the commit) goes on:
//
//	{"op":"add","n":{"id":"n-…","target":"ops","body":{…},"created":…,"due":…}}
//	{"op":"retry","id":"n-…","target":"ops","due":…,"attempts":2,"last_error":"…"}
//	{"op":"done","id":"n-…","target":"ops"}
//	{"op":"gates","gates":[{"target":"ops","key":"target","until":…,"sent":3,"rev":4}]}
//	{"op":"fold","n":{…},"id":"n-…","target":"ops","gates":[…]}
//	{"op":"ungate","gates":[{"target":"ops","key":"target"}]}
//
// The last three are the deliverer's rate limits (gates.go): a gates
// line carries each gate's state after it, a fold line the record that
// folds (stored whole, in place of one with its ID and Target), the
// record folded into it (removed, unless it is that one) and its gate,
// and an ungate line the gates pruned.
//
// An add of a record that is queued already is not written (a record
// whose ID and Target are stored is left as it is). A retry line carries
// the record's state after it, so a line applied twice changes nothing.
//
// Open replays the log into memory. A line that cannot be read (a torn
// last line, a crash in the middle of an append, or a damaged one) is
// skipped with a warning, never a failed start; the log is then written
// anew (compacted: one add line per record, with its attempts, due and
// last error, and one gates line) whenever it holds a line that is not a
// live record's add (or holds gates),
// so a torn tail never has a line appended after it. It is compacted
// while running too, when its dead lines outnumber the live records by
// far. A compaction replaces the file whole (a new file, synced, renamed
// over the old, the directory synced): a crash leaves the old log or the
// new one.
//
// A transaction's notifications are appended in its commit after its
// events and before its task files (tx.go): a crash before them leaves
// events that the next start's Recover applies again, and the control
// plane's rules write the notification again then; a crash after them
// leaves the notification and a change that Recover (or, for a change
// without events, the rule that made it, such as the watchdog) makes
// again, under the same notification ID.
type notifyLog struct {
	path string
	log  *slog.Logger

	mu    sync.Mutex
	file  *os.File // open to append
	size  int64
	lines int // the lines in the file
	queue map[noteKey]store.Notification
	gates map[gateKey]store.NotifyGate
}

// noteKey names a record: a notification's ID and target.
type noteKey struct{ id, target string }

// noteLine is a line of the log.
type noteLine struct {
	Op string `json:"op"` // add, retry or done
	// N is the record an add stores.
	N *store.Notification `json:"n,omitempty"`
	// ID and Target name the record a retry or done is of; Due, Attempts
	// and LastError are its state after a retry.
	ID        string    `json:"id,omitempty"`
	Target    string    `json:"target,omitempty"`
	Due       time.Time `json:"due,omitzero"`
	Attempts  int       `json:"attempts,omitempty"`
	LastError string    `json:"last_error,omitempty"`
	// Gates are the gates a gates or fold line stores, or an ungate
	// line removes.
	Gates []store.NotifyGate `json:"gates,omitempty"`
}

// compactAt is how many dead lines the log may hold past twice its live
// records before it is written anew while running.
const compactAt = 1024

// openNotifyLog opens (creating, 0700) dir/notify and replays its log.
func openNotifyLog(dir string, log *slog.Logger) (*notifyLog, error) {
	nd := filepath.Join(dir, "notify")
	if err := os.MkdirAll(nd, 0o700); err != nil {
		return nil, err
	}
	if err := private.Dir("state directory", nd); err != nil {
		return nil, err
	}
	l := &notifyLog{path: filepath.Join(nd, "log.jsonl"), log: log, queue: map[noteKey]store.Notification{}, gates: map[gateKey]store.NotifyGate{}}
	clean, err := l.replay()
	if err != nil {
		return nil, err
	}
	if !clean {
		if err := l.compact(); err != nil {
			return nil, fmt.Errorf("%s: %w", l.path, err)
		}
		return l, nil
	}
	if err := l.openToAppend(); err != nil {
		return nil, err
	}
	return l, nil
}

// replay reads the log into the queue. clean says that it holds only
// the live records' add lines, whole: nothing to compact.
func (l *notifyLog) replay() (clean bool, err error) {
	f, err := os.Open(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var offset int64
	clean = true
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				l.log.Warn("the notification log ends in a torn line (a crash in the middle of an append); it is skipped", "file", l.path, "offset", offset)
				clean = false
			}
			break
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", l.path, err)
		}
		l.lines++
		var e noteLine
		if err := json.Unmarshal(bytes.TrimSpace(line), &e); err != nil || !l.apply(e) {
			l.log.Warn("a line of the notification log could not be read; it is skipped", "file", l.path, "offset", offset)
			clean = false
		} else if e.Op != "add" {
			clean = false
		}
		offset += int64(len(line))
	}
	return clean && l.lines == len(l.queue) && len(l.gates) == 0, nil
}

// apply applies a line to the queue; false: the line makes no sense.
func (l *notifyLog) apply(e noteLine) bool {
	switch e.Op {
	case "add":
		if e.N == nil || e.N.ID == "" {
			return false
		}
		k := noteKey{e.N.ID, e.N.Target}
		if _, ok := l.queue[k]; !ok {
			l.queue[k] = *e.N
		}
	case "retry":
		k := noteKey{e.ID, e.Target}
		if n, ok := l.queue[k]; ok {
			n.Due, n.Attempts, n.LastError = e.Due, e.Attempts, e.LastError
			l.queue[k] = n
		}
	case "done":
		delete(l.queue, noteKey{e.ID, e.Target})
	case "gates", "fold", "ungate":
		return l.applyGates(e)
	default:
		return false
	}
	return true
}

// openToAppend opens the log to append (creating it, 0600, and syncing
// its directory).
func (l *notifyLog) openToAppend() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	info, err := f.Stat()
	if err == nil {
		err = durable.SyncDir(filepath.Dir(l.path))
	}
	if err != nil {
		f.Close()
		return err
	}
	l.file, l.size = f, info.Size()
	return nil
}

// compact writes the log anew: one add line per record, and one gates
// line of every gate. mu is held, or nobody else has l.
func (l *notifyLog) compact() error {
	keys := make([]noteKey, 0, len(l.queue))
	for k := range l.queue {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b noteKey) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.target, b.target)) })
	var buf bytes.Buffer
	for _, k := range keys {
		n := l.queue[k]
		b, err := json.Marshal(noteLine{Op: "add", N: &n})
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	}
	lines := len(keys)
	if len(l.gates) > 0 {
		b, err := json.Marshal(noteLine{Op: "gates", Gates: l.sortedGates()})
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
		lines++
	}
	if err := atomic.WriteFile(l.path, &buf); err != nil {
		return err
	}
	if err := os.Chmod(l.path, 0o600); err != nil {
		return err
	}
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
	l.lines = lines
	return l.openToAppend()
}

// write appends lines to the log, synced, then applies them to the queue.
// mu is held. A write that fails part-way is cut off, so the next one
// starts a line; the queue is then as it was.
func (l *notifyLog) write(lines []noteLine) error {
	if len(lines) == 0 {
		return nil
	}
	if l.file == nil {
		return errors.New("the notification log is closed")
	}
	var buf []byte
	for _, e := range lines {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	if _, err := l.file.Write(buf); err != nil {
		_ = l.file.Truncate(l.size) // best effort: a start skips a torn line anyway
		return fmt.Errorf("%s: %w", l.path, err)
	}
	if err := durable.Datasync(l.file); err != nil {
		return fmt.Errorf("%s: %w", l.path, err)
	}
	l.size += int64(len(buf))
	l.lines += len(lines)
	for _, e := range lines {
		l.apply(e)
	}
	if l.lines > 2*len(l.queue)+compactAt {
		if err := l.compact(); err != nil {
			// The log as it was stays whole: only longer than it need be.
			l.log.Error("compact the notification log", "file", l.path, "err", err)
		}
	}
	return nil
}

// add stores the records of ns not queued already.
func (l *notifyLog) add(ns []store.Notification) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []noteLine
	fresh := map[noteKey]bool{}
	for _, n := range ns {
		k := noteKey{n.ID, n.Target}
		if _, ok := l.queue[k]; ok || fresh[k] {
			continue
		}
		fresh[k] = true
		n.Body = slices.Clone(n.Body)
		lines = append(lines, noteLine{Op: "add", N: &n})
	}
	return l.write(lines)
}

func (l *notifyLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	return err
}

// Notify stores notifications no transaction carries, synced before it
// returns.
func (s *Store) Notify(_ context.Context, ns ...store.Notification) error {
	if err := s.notes.add(ns); err != nil {
		return fmt.Errorf("controlplane: store notifications: %w", err)
	}
	return nil
}

// DueNotifications returns up to limit records due at or before now, the
// earliest due first: from memory.
func (s *Store) DueNotifications(_ context.Context, now time.Time, limit int) ([]store.Notification, error) {
	l := s.notes
	l.mu.Lock()
	var out []store.Notification
	for _, n := range l.queue {
		if !n.Due.After(now) {
			out = append(out, n)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b store.Notification) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Target, b.Target))
	})
	out = out[:min(len(out), max(limit, 0))]
	for i := range out {
		out[i].Body = slices.Clone(out[i].Body)
	}
	return out, nil
}

// NotificationDone removes a record; one that is gone is not an error
// (and writes nothing).
func (s *Store) NotificationDone(_ context.Context, id, target string) error {
	l := s.notes
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.queue[noteKey{id, target}]; !ok {
		return nil
	}
	if err := l.write([]noteLine{{Op: "done", ID: id, Target: target}}); err != nil {
		return fmt.Errorf("controlplane: notification %s done: %w", id, err)
	}
	return nil
}

// NotificationRetry counts a failed delivery and sets when the record is
// next due. A record that is gone (done meanwhile) stays gone.
func (s *Store) NotificationRetry(_ context.Context, id, target string, due time.Time, lastErr string) error {
	l := s.notes
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.queue[noteKey{id, target}]
	if !ok {
		return nil
	}
	e := noteLine{Op: "retry", ID: id, Target: target, Due: due, Attempts: n.Attempts + 1, LastError: lastErr}
	if err := l.write([]noteLine{e}); err != nil {
		return fmt.Errorf("controlplane: notification %s retry: %w", id, err)
	}
	return nil
}
