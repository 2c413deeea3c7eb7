package outbox

import (
	"slices"
	"time"
)

// entry is what the index keeps of one record: where its line is and what
// became of it, never its payload.
type entry struct {
	seq       uint64
	key       string
	kind      Kind
	taskID    string
	attempt   int
	createdAt time.Time

	off int64 // offset of the line in the file
	n   int   // length of the line, newline included

	state   State
	tries   int    // failed send attempts
	lastErr string // error of the last failed send
	reason  string // why it is dead
	lastTry time.Time
	deadAt  time.Time
	sentAt  time.Time
}

// index is the set of records in the file that matter: pending and dead
// records, and sent ones too when keepSent is set (for inspection).
type index struct {
	keepSent bool

	bySeq map[uint64]*entry
	order []*entry // by seq; entries no longer in bySeq are skipped
	gone  int      // entries in order that are no longer in bySeq
	head  int      // no entry before order[head] is pending

	pending   int
	dead      int
	sent      int   // only counted when keepSent
	liveBytes int64 // bytes of pending and dead record lines

	nextSeq     uint64 // one above the highest seq seen or announced
	createdAt   time.Time
	compactedAt time.Time
}

func newIndex(keepSent bool) *index {
	return &index{keepSent: keepSent, bySeq: make(map[uint64]*entry), nextSeq: 1}
}

// add indexes a line found at off, n bytes long.
func (ix *index) add(off int64, n int, d *line) {
	switch d.Op {
	case "":
		ix.addRecord(&entry{
			seq: d.Seq, key: d.Key, kind: d.Kind, taskID: d.TaskID, attempt: d.Attempt,
			createdAt: d.CreatedAt, off: off, n: n, state: StatePending,
		})
	case opHeader:
		ix.nextSeq = max(ix.nextSeq, d.NextSeq)
		if !d.CreatedAt.IsZero() {
			ix.createdAt = d.CreatedAt
		}
		if !d.CompactedAt.IsZero() {
			ix.compactedAt = d.CompactedAt
		}
	default:
		ix.mark(d)
	}
}

func (ix *index) addRecord(e *entry) {
	ix.bySeq[e.seq] = e
	ix.order = append(ix.order, e)
	ix.pending++
	ix.liveBytes += int64(e.n)
	ix.nextSeq = max(ix.nextSeq, e.seq+1)
}

// mark applies a sent, try or dead mark.
func (ix *index) mark(m *line) {
	for _, seq := range m.Seqs {
		e := ix.bySeq[seq]
		if e == nil {
			continue
		}
		switch m.Op {
		case opSent:
			if e.state == StateSent {
				continue
			}
			ix.leave(e)
			e.state, e.sentAt = StateSent, m.At
			if ix.keepSent {
				ix.sent++
			} else {
				ix.drop(e)
			}
		case opDead:
			if e.state != StatePending {
				continue
			}
			ix.pending--
			ix.dead++
			e.state, e.reason, e.deadAt = StateDead, m.Reason, m.At
		case opTry:
			e.tries += max(m.N, 1)
			e.lastErr, e.lastTry = m.Error, m.At
		}
	}
}

// leave takes e out of the live counts.
func (ix *index) leave(e *entry) {
	switch e.state {
	case StatePending:
		ix.pending--
	case StateDead:
		ix.dead--
	}
	ix.liveBytes -= int64(e.n)
}

// drop forgets e. The order slice is tidied once half of it is gone, which
// keeps memory O(live records) at O(1) amortized cost per drop.
func (ix *index) drop(e *entry) {
	delete(ix.bySeq, e.seq)
	ix.gone++
	if ix.gone > 1024 && ix.gone*2 > len(ix.order) {
		ix.order = slices.DeleteFunc(ix.order, func(e *entry) bool { return ix.bySeq[e.seq] != e })
		ix.order = slices.Clip(ix.order)
		ix.gone, ix.head = 0, 0
	}
}

// each calls fn for every indexed entry in seq order until fn returns false.
func (ix *index) each(fn func(*entry) bool) {
	for _, e := range ix.order {
		if ix.bySeq[e.seq] != e {
			continue
		}
		if !fn(e) {
			return
		}
	}
}

// oldestPending returns the first pending entry, or nil. A record never
// becomes pending again, so the scan resumes where the last one stopped.
func (ix *index) oldestPending() *entry {
	for ; ix.head < len(ix.order); ix.head++ {
		if e := ix.order[ix.head]; ix.bySeq[e.seq] == e && e.state == StatePending {
			return e
		}
	}
	return nil
}
