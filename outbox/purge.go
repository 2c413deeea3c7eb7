package outbox

import (
	"fmt"
	"time"
)

// Purging dead records.
//
// A dead record stays in the file, with its reason, so that a person can
// see what the control plane refused; compaction keeps it. PurgeDead ends
// that: it appends a sent mark naming the dead records, with the reason
// "purged", and they leave the index like any sent record; the next
// compaction leaves their bytes behind. A sent mark is the one mark that
// takes a record out of the outbox for every reader of format version 1,
// so purging changes nothing in the format: an agent of today reads a
// purged outbox as it reads any other.
//
// A dead record's age counts from when it was marked dead; compaction
// keeps that time (the dead mark it writes carries it), so an outbox that
// compacts often still ages its dead records.

// purgeReason is the reason on the sent mark of purged dead records.
const purgeReason = "purged"

// PurgeResult says what PurgeDead did. Its JSON form is what `agent outbox
// purge --json` prints and is stable.
type PurgeResult struct {
	// Purged is how many dead records were purged, Bytes their lines.
	Purged int   `json:"purged"`
	Bytes  int64 `json:"bytes"`
	// Kept is how many dead records remain: marked dead at or after the
	// cutoff.
	Kept int `json:"kept"`
}

// PurgeDead purges the dead records marked dead before cutoff; a zero
// cutoff purges every dead record. Pending records are never touched.
func (o *Outbox) PurgeDead(cutoff time.Time) (PurgeResult, error) {
	var (
		res  PurgeResult
		seqs []uint64
	)
	o.mu.RLock()
	o.ix.each(func(e *entry) bool {
		if e.state != stateDead {
			return true
		}
		if !cutoff.IsZero() && !deadSince(e).Before(cutoff) {
			res.Kept++
			return true
		}
		seqs = append(seqs, e.seq)
		res.Purged++
		res.Bytes += int64(e.n)
		return true
	})
	o.mu.RUnlock()
	// A record once dead is never pending again, so nothing can change
	// what was chosen between the scan and the mark.
	if err := o.appendMarks(line{Op: opSent, Reason: purgeReason}, seqs); err != nil {
		return PurgeResult{}, fmt.Errorf("outbox: purge dead records: %w", err)
	}
	return res, nil
}

// deadSince is when e was marked dead; a mark without a time (not written
// by this package) counts from the record's creation.
func deadSince(e *entry) time.Time {
	if e.deadAt().IsZero() {
		return e.createdAt()
	}
	return e.deadAt()
}

// PendingByTask counts the pending records of each task: the tasks whose
// reports the control plane has yet to receive. It reads only the index.
func (o *Outbox) PendingByTask() map[string]int {
	out := map[string]int{}
	o.mu.RLock()
	defer o.mu.RUnlock()
	o.ix.each(func(e *entry) bool {
		if e.state == statePending {
			out[e.taskID]++
		}
		return true
	})
	return out
}
