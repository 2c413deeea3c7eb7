package outbox

import (
	"time"

	"github.com/edgeagent/agent/internal/durable"
)

// Stats describe an outbox. The JSON form is what `agent outbox stats
// --json` prints and is stable.
type Stats struct {
	Pending          int       `json:"pending"`
	Dead             int       `json:"dead"`
	Sent             int       `json:"sent"` // sent records still in the file; only Inspect counts them
	OldestPending    time.Time `json:"oldest_pending,omitzero"`
	OldestPendingAge float64   `json:"oldest_pending_age_s"`
	NextSeq          uint64    `json:"next_seq"`
	FileBytes        int64     `json:"file_bytes"`    // the lines; the zeroed stretch after them is not counted
	LiveBytes        int64     `json:"live_bytes"`    // pending and dead record lines
	GarbageBytes     int64     `json:"garbage_bytes"` // sent records and marks, reclaimed by compaction
	MaxBytes         int64     `json:"max_bytes,omitempty"`
	CreatedAt        time.Time `json:"created_at,omitzero"`
	LastCompaction   time.Time `json:"last_compaction,omitzero"`
	// Counters of this process, zero for Inspect.
	Compactions      int     `json:"compactions"`
	LastCompactPause float64 `json:"last_compaction_pause_s"`
	Appends          uint64  `json:"appends"`
	Syncs            uint64  `json:"syncs"`
	DroppedLogs      uint64  `json:"dropped_logs"`
	WriteErrors      uint64  `json:"write_errors"`
	// WriteFailing is the error of the last write while writes fail (a
	// full disk); empty once a write succeeds.
	WriteFailing string `json:"write_failing,omitempty"`
	// What recovery found: corrupt spans set aside and torn bytes cut.
	// From Inspect: the corrupt spans in the file, and the bytes after its
	// last valid line (before the zeroed stretch) that the next Open would
	// cut; while the writer runs, a write in progress.
	Quarantined int   `json:"quarantined"`
	TornBytes   int64 `json:"torn_bytes"`
	// DiskFreeBytes is the space left on the outbox's file system (-1
	// when it cannot be told): a full disk is why writes fail.
	DiskFreeBytes int64 `json:"disk_free_bytes"`
}

// fill sets the fields that come from the index and the file size.
func (s *Stats) fill(ix *index, size int64, now time.Time) {
	s.Pending, s.Dead, s.Sent = ix.pending, ix.dead, ix.sent
	s.NextSeq, s.FileBytes, s.LiveBytes = ix.nextSeq, size, ix.liveBytes
	s.GarbageBytes = size - ix.liveBytes
	s.CreatedAt, s.LastCompaction = ix.createdAt, ix.compactedAt
	if e := ix.oldestPending(); e != nil {
		s.OldestPending = e.createdAt()
		s.OldestPendingAge = max(0, now.Sub(s.OldestPending).Seconds())
	}
}

// Stats returns the outbox's current figures.
func (o *Outbox) Stats() Stats {
	var s Stats
	o.mu.Lock() // oldestPending moves a cursor in the index
	s.fill(o.ix, o.size, o.opts.Now())
	s.Compactions, s.LastCompactPause = o.compactions, o.lastPause.Seconds()
	o.mu.Unlock()
	s.MaxBytes = o.opts.MaxBytes
	s.Appends, s.Syncs, s.DroppedLogs = o.appends.Load(), o.syncs.Load(), o.droppedLogs.Load()
	s.Quarantined, s.TornBytes = o.quarantined, o.tornBytes
	s.WriteErrors = o.writeErrors.Load()
	s.DiskFreeBytes = durable.FreeBytes(o.dir)
	if msg := o.failing.Load(); msg != nil {
		s.WriteFailing = *msg
	}
	return s
}
