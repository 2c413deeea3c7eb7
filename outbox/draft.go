package outbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"time"
)

// draft is a record line encoded, and its CRC computed, outside the
// outbox's lock, all but its seq. Key and seq come last in the line,
//
//	{"kind":…,"task_id":…,"attempt":…,"created_at":…,"payload":…,"key":"…","seq":N,"crc":"…"}
//
// so that under the lock an append only adds the seq's digits (and, for a
// key the outbox makes, the same digits at the key's end) and carries the
// CRC over those few bytes. Readers do not depend on the field order.
//
// Drafts are recycled (with their buffer and the write that carries the
// line) once their line is written: at a few hundred thousand appends a
// second, their garbage was what kept the collector busy.
type draft struct {
	e   *entry // the record's index entry, made here, outside the lock: all but its seq and length
	buf []byte // the line up to the key; the key's closing quote too unless the key ends in the seq
	crc uint32 // of buf
	gen bool   // the key is the outbox's, taskID:kind:createdAt:seq; else the Record's
	w   write  // the queued line (finished buf) once enqueued
}

var draftPool = sync.Pool{New: func() any { return new(draft) }}

// maxPooledLine bounds the buffers kept for reuse: a burst of large
// records does not pin its memory.
const maxPooledLine = 64 << 10

// release gives d back for reuse. Its line must be written and no longer
// referenced.
func (d *draft) release() {
	buf := d.buf[:0]
	if cap(buf) > maxPooledLine {
		buf = nil
	}
	*d = draft{buf: buf}
	draftPool.Put(d)
}

// draftTail bounds what finish adds: a key's seq and quote, `,"seq":` and
// a seq, the CRC field and the newline.
const draftTail = 20 + 1 + 7 + 20 + crcSuffixLen + 1

func newDraft(r Record) (*draft, error) {
	d := draftPool.Get().(*draft)
	d.gen = r.Key == ""
	b := d.buf[:0]
	if need := len(r.Payload) + 3*len(r.TaskID) + 2*len(r.Key) + 160 + draftTail; cap(b) < need {
		b = make([]byte, 0, need)
	}
	b = appendRecordHead(b, r.Kind, r.TaskID, r.Attempt, r.CreatedAt)
	timeEnd := len(b) - len(`","payload":`)
	timeStart := bytes.LastIndexByte(b[:timeEnd], '"') + 1
	b, err := appendPayload(b, r.Payload)
	if err != nil {
		d.release()
		return nil, err
	}
	b = append(b, `,"key":`...)
	if d.gen {
		// `"taskID:kind:createdAt:`; the seq and the closing quote come in
		// finish. The time is the head's, copied rather than formatted again.
		b = append(b, '"')
		b = appendJSONStringBody(b, r.TaskID)
		b = append(b, ':')
		b = appendJSONStringBody(b, string(r.Kind))
		b = append(b, ':')
		b = append(b, b[timeStart:timeEnd]...)
		b = append(b, ':')
	} else {
		b = appendJSONString(b, r.Key)
	}
	d.buf, d.crc = b, crcOf(b)
	d.e = &entry{kind: r.Kind, taskID: r.TaskID, attempt: int32(r.Attempt), state: statePending}
	d.e.setCreatedAt(r.CreatedAt)
	if !d.gen {
		d.e.key = r.Key
	}
	return d, nil
}

// maxLen bounds the finished line's length.
func (d *draft) maxLen() int { return len(d.buf) + draftTail }

// finish completes the line with seq.
func (d *draft) finish(seq uint64) []byte {
	b, start := d.buf, len(d.buf)
	if d.gen {
		b = strconv.AppendUint(b, seq, 10)
		b = append(b, '"')
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	return appendCRC(b, crc32.Update(d.crc, castagnoli, b[start:]))
}

// appendPayload appends p to b once it is known to be JSON. It is copied as
// it is: valid JSON can hold a newline or a carriage return only as
// whitespace between tokens (inside a string they must be escaped), so
// only a payload that holds one is compacted, to keep the record on one
// line. Validating is a single scan with no output, a fraction of what
// compacting every payload cost.
func appendPayload(b, p []byte) ([]byte, error) {
	p = trimJSONSpace(p)
	valid, breaks := validJSONLine(p)
	if len(p) == 0 || !valid {
		return nil, fmt.Errorf("%w: payload is not JSON", ErrInvalid)
	}
	if !breaks {
		return append(b, p...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, p); err != nil {
		return nil, fmt.Errorf("%w: payload is not JSON", ErrInvalid)
	}
	return buf.Bytes(), nil
}

// appendRecordHead appends a record line's fields before its payload,
// `{"kind":…,"task_id":…,"attempt":…,"created_at":"…","payload":`. Pending
// builds the same bytes to find the payload in a line without parsing it.
func appendRecordHead(b []byte, kind Kind, taskID string, attempt int, createdAt time.Time) []byte {
	b = append(b, `{"kind":`...)
	b = appendJSONString(b, string(kind))
	b = append(b, `,"task_id":`...)
	b = appendJSONString(b, taskID)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"created_at":"`...)
	b = appendTime(b, createdAt)
	return append(b, `","payload":`...)
}
