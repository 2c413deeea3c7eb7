package outbox

import (
	"slices"
	"sort"
	"strconv"
	"time"
)

// entry is what the index keeps of one record: where its line is and what
// became of it, never its payload. It is kept small (96 bytes) because
// there is one per pending record: what only some records need (send
// attempts, death, the time sent) hangs off x, a key the outbox made is
// not stored but rebuilt from the fields it was made of, the time is kept
// as seconds and nanoseconds and the state as a byte.
type entry struct {
	seq     uint64
	off     int64  // offset of the line in the file
	key     string // "" when the key is genKey's
	kind    Kind
	taskID  string
	sec     int64 // createdAt, in seconds since 1970 (UTC)
	nsec    int32 // and nanoseconds
	n       int32 // length of the line, newline included (≤ MaxRecordBytes)
	attempt int32
	state   recState
	gone    bool // dropped from the index; still in order until it is tidied
	x       *entryExtra
}

// recState is a record's State as the index keeps it.
type recState uint8

const (
	statePending recState = iota
	stateSent
	stateDead
)

// State returns s as the package's State.
func (s recState) State() State {
	switch s {
	case stateSent:
		return StateSent
	case stateDead:
		return StateDead
	}
	return StatePending
}

// createdAt returns the record's creation time, in UTC.
func (e *entry) createdAt() time.Time { return time.Unix(e.sec, int64(e.nsec)).UTC() }

// setCreatedAt keeps t as the record's creation time.
func (e *entry) setCreatedAt(t time.Time) { e.sec, e.nsec = t.Unix(), int32(t.Nanosecond()) }

// entryExtra is what a record that was tried, died or was sent carries.
type entryExtra struct {
	tries   int       // failed send attempts
	lastErr string    // error of the last failed send
	reason  string    // why it is dead
	lastTry time.Time //
	deadAt  time.Time
	sentAt  time.Time
}

// extra returns e's extra fields, making them on first use.
func (e *entry) extra() *entryExtra {
	if e.x == nil {
		e.x = &entryExtra{}
	}
	return e.x
}

// tries, lastErr, reason and deadAt read e's extra fields, zero when none.
func (e *entry) tries() int {
	if e.x == nil {
		return 0
	}
	return e.x.tries
}

func (e *entry) lastErr() string {
	if e.x == nil {
		return ""
	}
	return e.x.lastErr
}

func (e *entry) reason() string {
	if e.x == nil {
		return ""
	}
	return e.x.reason
}

func (e *entry) deadAt() time.Time {
	if e.x == nil {
		return time.Time{}
	}
	return e.x.deadAt
}

// recordKey returns e's idempotency key.
func (e *entry) recordKey() string {
	if e.key != "" {
		return e.key
	}
	return string(appendGenKey(nil, e.taskID, e.kind, e.createdAt(), e.seq))
}

// appendGenKey appends the key Append makes for a record given none:
// taskID:kind:createdAt:seq.
func appendGenKey(b []byte, taskID string, kind Kind, createdAt time.Time, seq uint64) []byte {
	b = append(b, taskID...)
	b = append(b, ':')
	b = append(b, kind...)
	b = append(b, ':')
	b = appendTime(b, createdAt)
	b = append(b, ':')
	return strconv.AppendUint(b, seq, 10)
}

// isGenKey reports whether key is the one appendGenKey makes for the
// record, so that the index need not keep it. scratch is reused.
func isGenKey(key string, taskID string, kind Kind, createdAt time.Time, seq uint64, scratch *[]byte) bool {
	if len(key) < len(taskID)+len(kind)+len(TimeFormat)+4 {
		return false
	}
	*scratch = appendGenKey((*scratch)[:0], taskID, kind, createdAt, seq)
	return string(*scratch) == key
}

// index is the set of records in the file that matter: pending and dead
// records, and sent ones too when keepSent is set (for inspection).
type index struct {
	keepSent bool

	order []*entry // by seq, rising; entries marked gone are skipped
	gone  int      // entries in order that are gone
	head  int      // no entry before order[head] is pending: the pending cursor

	pending   int
	dead      int
	sent      int   // only counted when keepSent
	liveBytes int64 // bytes of pending and dead record lines

	nextSeq     uint64 // one above the highest seq seen or announced
	createdAt   time.Time
	compactedAt time.Time

	// While a file is scanned: task ids and kinds shared between the
	// entries that carry them, and a scratch buffer for keys. Dropped
	// after the scan (see doneScanning).
	interned map[string]string
	scratch  []byte
}

func newIndex(keepSent bool) *index {
	return &index{keepSent: keepSent, nextSeq: 1, interned: map[string]string{}}
}

// doneScanning drops what only the scan of a file needs.
func (ix *index) doneScanning() {
	ix.interned, ix.scratch = nil, nil
	if cap(ix.order) > len(ix.order)+len(ix.order)/8+1024 {
		ix.order = slices.Clone(ix.order) // drop the slack appends grew
	}
}

// intern returns s, shared with earlier equal strings of the scan.
func (ix *index) intern(s string) string {
	if ix.interned == nil {
		return s
	}
	if v, ok := ix.interned[s]; ok {
		return v
	}
	ix.interned[s] = s
	return s
}

// add indexes a line found at off, n bytes long.
func (ix *index) add(off int64, n int, d *line) {
	switch d.Op {
	case "":
		e := &entry{
			seq: d.Seq, kind: Kind(ix.intern(string(d.Kind))), taskID: ix.intern(d.TaskID), attempt: int32(d.Attempt),
			off: off, n: int32(n), state: statePending,
		}
		e.setCreatedAt(d.CreatedAt)
		if !isGenKey(d.Key, e.taskID, e.kind, d.CreatedAt, e.seq, &ix.scratch) {
			e.key = d.Key
		}
		ix.addRecord(e)
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

// addRecord indexes e, whose seq is above every indexed one: the scan
// refuses falling seqs, and commits write in the order seqs were
// given.
func (ix *index) addRecord(e *entry) {
	ix.order = append(ix.order, e)
	ix.pending++
	ix.liveBytes += int64(e.n)
	ix.nextSeq = max(ix.nextSeq, e.seq+1)
}

// find returns the indexed entry of seq, or nil.
func (ix *index) find(seq uint64) *entry {
	i := sort.Search(len(ix.order), func(i int) bool { return ix.order[i].seq >= seq })
	if i < len(ix.order) && ix.order[i].seq == seq && !ix.order[i].gone {
		return ix.order[i]
	}
	return nil
}

// mark applies a sent, try or dead mark.
func (ix *index) mark(m *line) {
	for _, seq := range m.Seqs {
		e := ix.find(seq)
		if e == nil {
			continue
		}
		switch m.Op {
		case opSent:
			if e.state == stateSent {
				continue
			}
			ix.leave(e)
			e.state = stateSent
			if ix.keepSent {
				e.extra().sentAt = m.At
				ix.sent++
			} else {
				ix.drop(e)
			}
		case opDead:
			if e.state != statePending {
				continue
			}
			ix.pending--
			ix.dead++
			x := e.extra()
			e.state, x.reason, x.deadAt = stateDead, m.Reason, m.At
		case opTry:
			x := e.extra()
			x.tries += max(m.N, 1)
			x.lastErr, x.lastTry = m.Error, m.At
		}
	}
}

// leave takes e out of the live counts.
func (ix *index) leave(e *entry) {
	switch e.state {
	case statePending:
		ix.pending--
	case stateDead:
		ix.dead--
	}
	ix.liveBytes -= int64(e.n)
}

// drop forgets e. The order slice is tidied once half of it is gone, which
// keeps memory O(live records) at O(1) amortized cost per drop.
func (ix *index) drop(e *entry) {
	e.gone = true
	e.x = nil
	ix.gone++
	if ix.gone > 1024 && ix.gone*2 > len(ix.order) {
		head := 0
		for _, e := range ix.order[:ix.head] {
			if !e.gone {
				head++
			}
		}
		// A new array of the exact size: deleting in place would keep the
		// old one, sized for every record ever indexed, alive.
		kept := make([]*entry, 0, len(ix.order)-ix.gone)
		for _, e := range ix.order {
			if !e.gone {
				kept = append(kept, e)
			}
		}
		ix.order = kept
		ix.gone, ix.head = 0, head
	}
}

// each calls fn for every indexed entry in seq order until fn returns false.
func (ix *index) each(fn func(*entry) bool) {
	ix.eachFrom(0, fn)
}

// after returns where in order the pending records above seq start: at
// the pending cursor, or past seq when that is further on.
func (ix *index) after(seq uint64) int {
	if seq == 0 {
		return ix.head
	}
	i := sort.Search(len(ix.order), func(i int) bool { return ix.order[i].seq > seq })
	return max(i, ix.head)
}

// eachFrom is each from order[i] on.
func (ix *index) eachFrom(i int, fn func(*entry) bool) {
	for _, e := range ix.order[i:] {
		if e.gone {
			continue
		}
		if !fn(e) {
			return
		}
	}
}

// oldestPending moves the pending cursor to the first pending entry and
// returns it, or nil. A record never becomes pending again, so the cursor
// only moves forward, and finding the oldest pending record costs O(1)
// amortized however long the backlog behind it.
func (ix *index) oldestPending() *entry {
	for ; ix.head < len(ix.order); ix.head++ {
		if e := ix.order[ix.head]; !e.gone && e.state == statePending {
			return e
		}
	}
	return nil
}
