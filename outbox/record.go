package outbox

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Kind is what a record reports. The outbox treats every kind alike except
// log records, which are the first to be refused when the outbox is full.
// Kinds are opaque to it: the agent decides which it writes, and a record
// of a kind a newer agent wrote survives a downgrade (the control plane
// says whether it takes it).
type Kind string

// The kinds of record.
const (
	KindPhase    Kind = "phase"
	KindProgress Kind = "progress"
	KindLog      Kind = "log"
	KindAttempt  Kind = "attempt"
	KindComplete Kind = "complete"
)

// Valid reports whether k is a well-formed kind: 1 to 32 of a-z, 0-9
// and _. Known or not is the agent's business.
func (k Kind) Valid() bool {
	if len(k) == 0 || len(k) > 32 {
		return false
	}
	for _, c := range []byte(k) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// TimeFormat is how created_at and other times are written: RFC 3339 with
// nanoseconds, fixed width, so that keys built from times sort and compare
// as text.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Record is one payload for the control plane.
type Record struct {
	// Seq is assigned by Append and rises monotonically, across compactions
	// and restarts.
	Seq uint64 `json:"seq"`
	// Key is the idempotency key the control plane deduplicates by. When
	// empty, Append makes a unique one: taskID:kind:createdAt:seq.
	Key       string          `json:"key"`
	Kind      Kind            `json:"kind"`
	TaskID    string          `json:"task_id"`
	Attempt   int             `json:"attempt"`
	CreatedAt time.Time       `json:"created_at"`
	Payload   json.RawMessage `json:"payload"`
}

// State is where a record stands.
type State string

// The states of a record.
const (
	StatePending State = "pending"
	StateSent    State = "sent"
	StateDead    State = "dead"
)

// line is the union of every field a line may carry; op tells which.
type line struct {
	Op string `json:"op,omitempty"` // "" for a record

	// Record fields.
	Seq       uint64          `json:"seq,omitempty"`
	Key       string          `json:"key,omitempty"`
	Kind      Kind            `json:"kind,omitempty"`
	TaskID    string          `json:"task_id,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	Payload   json.RawMessage `json:"payload,omitempty"`

	// Mark fields.
	Seqs        []uint64  `json:"seqs,omitempty"`
	N           int       `json:"n,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Error       string    `json:"error,omitempty"`
	At          time.Time `json:"at"`
	Version     int       `json:"version,omitempty"`
	NextSeq     uint64    `json:"next_seq,omitempty"`
	CompactedAt time.Time `json:"compacted_at"`
}

// The mark operations.
const (
	opHeader = "header"
	opSent   = "sent"
	opTry    = "try"
	opDead   = "dead"
)

// formatVersion is written in the header line.
const formatVersion = 1

// crcSuffixLen is len(`,"crc":"xxxxxxxx"}`).
const crcSuffixLen = 18

// seal appends the CRC field and the newline to body, a JSON object without
// its closing brace, and returns the line.
func seal(body []byte) []byte { return appendCRC(body, crcOf(body)) }

// appendCRC appends ,"crc":"xxxxxxxx"} and the newline, sum being the CRC
// of everything before.
func appendCRC(b []byte, sum uint32) []byte {
	b = append(b, `,"crc":"`...)
	b = hex.AppendEncode(b, binary.BigEndian.AppendUint32(nil, sum))
	return append(b, '"', '}', '\n')
}

// verify checks a line's CRC. l excludes the trailing newline.
func verify(l []byte) error {
	if len(l) < crcSuffixLen+2 || l[0] != '{' {
		return ErrMalformed
	}
	suffix := l[len(l)-crcSuffixLen:]
	if !bytes.HasPrefix(suffix, []byte(`,"crc":"`)) || suffix[len(suffix)-2] != '"' || suffix[len(suffix)-1] != '}' {
		return ErrMalformed
	}
	var want uint32
	for _, c := range suffix[8:16] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return ErrMalformed
		}
		want = want<<4 | uint32(v)
	}
	if crcOf(l[:len(l)-crcSuffixLen]) != want {
		return ErrCRCMismatch
	}
	return nil
}

// decode verifies and parses one line (without its newline).
func decode(l []byte) (*line, error) {
	if err := verify(l); err != nil {
		return nil, err
	}
	var d line
	if err := json.Unmarshal(l, &d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch d.Op {
	case "":
		if d.Seq == 0 || !d.Kind.Valid() || d.Key == "" || len(d.Payload) == 0 {
			return nil, fmt.Errorf("%w: record lacks seq, key, kind or payload", ErrMalformed)
		}
	case opHeader, opSent, opTry, opDead:
	default:
		return nil, fmt.Errorf("%w: unknown op %q", ErrMalformed, d.Op)
	}
	return &d, nil
}

// record converts a decoded record line into a Record.
func (d *line) record() Record {
	return Record{Seq: d.Seq, Key: d.Key, Kind: d.Kind, TaskID: d.TaskID, Attempt: d.Attempt, CreatedAt: d.CreatedAt, Payload: d.Payload}
}

// encodeMark builds a sealed mark line.
func encodeMark(m line) []byte {
	m.At = m.At.UTC()
	// Marks are small and rare next to records; encoding/json is plenty.
	b, err := json.Marshal(markJSON(m))
	if err != nil {
		panic(fmt.Sprintf("outbox: encoding a mark cannot fail: %v", err))
	}
	return seal(b[:len(b)-1])
}

// markJSON is the shape of a mark on disk: only the fields a mark uses, so
// that zero times do not appear.
func markJSON(m line) any {
	type mark struct {
		Op          string   `json:"op"`
		Version     int      `json:"version,omitempty"`
		NextSeq     uint64   `json:"next_seq,omitempty"`
		CreatedAt   string   `json:"created_at,omitempty"`
		CompactedAt string   `json:"compacted_at,omitempty"`
		Seqs        []uint64 `json:"seqs,omitempty"`
		N           int      `json:"n,omitempty"`
		Reason      string   `json:"reason,omitempty"`
		Error       string   `json:"error,omitempty"`
		At          string   `json:"at"`
	}
	f := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(TimeFormat)
	}
	return mark{Op: m.Op, Version: m.Version, NextSeq: m.NextSeq, CreatedAt: f(m.CreatedAt), CompactedAt: f(m.CompactedAt),
		Seqs: m.Seqs, N: m.N, Reason: m.Reason, Error: m.Error, At: f(m.At)}
}

// appendJSONString appends s as a JSON string, escaped as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}
