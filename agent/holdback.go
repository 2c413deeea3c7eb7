package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"

	"github.com/edgeagent/agent/internal/utc"
)

// holdback keeps what could not be written (a full disk, an I/O error):
// reports the outbox refused, in order, and the latest state of tasks that
// could not be saved. It writes them again as soon as writes work (each
// heartbeat, and before a task's next report), so nothing is dropped and
// nothing needs a restart. Phase, progress, attempt and completion reports
// are always kept; log reports are dropped, and counted, past
// holdbackLogBytes. While anything is held, the agent reports its storage
// as failing: health degraded, no claims.
type holdback struct {
	mu      sync.Mutex
	records []outbox.Record
	bytes   int
	held    map[string]int // task → its records held
	tasks   map[string]*state.Task
	dropped map[string]int // log reports dropped while holding, per task
	failing error
	since   time.Time
}

// Bounds of what is held in memory: log reports past holdbackLogBytes are
// dropped; past holdbackRecords reports in all, a task's next report waits
// (its runner with it) until writes work again, rather than grow memory
// without end or drop what must not be dropped.
const (
	holdbackLogBytes = 64 << 20
	holdbackRecords  = 100_000
)

func newHoldback() *holdback {
	return &holdback{held: map[string]int{}, tasks: map[string]*state.Task{}, dropped: map[string]int{}}
}

// append appends rec to o, or holds it: when the append fails, or when
// earlier reports of its task are held (its order must hold).
func (h *holdback) append(o *outbox.Outbox, rec outbox.Record) error {
	h.mu.Lock()
	waiting := h.held[rec.TaskID] > 0
	h.mu.Unlock()
	if !waiting {
		_, err := o.Append(rec)
		if err == nil || !writeFailure(err) {
			return err // written, or refused for what it is: holding it would not help
		}
		h.mu.Lock()
		h.fail(err)
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.records) >= holdbackRecords && rec.Kind != outbox.KindLog {
		h.mu.Unlock()
		time.Sleep(time.Second) // the heartbeat's flush makes room once writes work
		h.mu.Lock()
	}
	if rec.Kind == outbox.KindLog && (h.bytes+len(rec.Payload) > holdbackLogBytes || len(h.records) >= holdbackRecords) {
		h.dropped[rec.TaskID]++
		return fmt.Errorf("log report dropped: %d bytes already held while writes fail", h.bytes)
	}
	h.records = append(h.records, rec)
	h.bytes += len(rec.Payload)
	h.held[rec.TaskID]++
	return nil
}

// save saves t, or holds a copy of it until a save works.
func (h *holdback) save(st *state.Store, t *state.Task) error {
	err := st.Save(t)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.tasks[t.ID] = t.Clone()
		h.fail(err)
		return err
	}
	delete(h.tasks, t.ID) // a newer state made it
	return nil
}

// flush writes what is held, in order, until a write fails. It reports
// whether everything is written.
func (h *holdback) flush(o *outbox.Outbox, st *state.Store) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.records) > 0 {
		rec := h.records[0]
		if _, err := o.Append(rec); err != nil && writeFailure(err) {
			h.fail(err)
			return false
		}
		h.records = h.records[1:]
		h.bytes -= len(rec.Payload)
		if h.held[rec.TaskID]--; h.held[rec.TaskID] == 0 {
			delete(h.held, rec.TaskID)
		}
	}
	h.records = nil
	for id, n := range h.dropped {
		// Say what was dropped, where the lines would have been.
		payload, _ := json.Marshal(state.LogEvent{Stream: state.LogAgent, Lines: []string{fmt.Sprintf("%d log report(s) dropped while the disk was full", n)}})
		if _, err := o.Append(outbox.Record{Kind: outbox.KindLog, TaskID: id, Payload: payload}); err != nil && !errors.Is(err, outbox.ErrFull) {
			h.fail(err)
			return false
		}
		delete(h.dropped, id)
	}
	for id, t := range h.tasks {
		if err := st.Save(t); err != nil {
			h.fail(err)
			return false
		}
		delete(h.tasks, id)
	}
	h.failing = nil
	return true
}

// writeFailure reports whether an append failed for the disk's sake (and
// may work later), not for the record's: full (log records), too large,
// invalid, or the outbox closed say nothing about the disk.
func writeFailure(err error) bool {
	for _, e := range []error{outbox.ErrFull, outbox.ErrTooLarge, outbox.ErrInvalid, outbox.ErrClosed} {
		if errors.Is(err, e) {
			return false
		}
	}
	return true
}

// fail records a write error. mu is held.
func (h *holdback) fail(err error) {
	if h.failing == nil {
		h.since = utc.Now()
	}
	h.failing = err
}

// status says whether writes fail, and what is held.
func (h *holdback) status() datadir.StorageStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := datadir.StorageStatus{HeldReports: len(h.records), HeldTasks: len(h.tasks)}
	for _, n := range h.dropped {
		s.DroppedLogs += n
	}
	if h.failing != nil || len(h.records) > 0 || len(h.tasks) > 0 {
		s.Since, s.Failing = h.since, storageReason(h.failing)
	}
	return s
}

// storageReason names a write error: disk_full when the device is full.
func storageReason(err error) string {
	switch {
	case err == nil:
		return "storage_error: writes are held"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), strings.Contains(err.Error(), "no space left"):
		return "disk_full: " + err.Error()
	}
	return "storage_error: " + err.Error()
}
