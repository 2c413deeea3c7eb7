package outbox

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
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
	var be [4]byte
	binary.BigEndian.PutUint32(be[:], sum)
	b = hex.AppendEncode(b, be[:])
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

// decode verifies and parses one line (without its newline) into d, which
// it resets first: a scan reuses one line for all, rather than make one
// per line it reads.
func decode(l []byte, d *line) error {
	*d = line{}
	if err := verify(l); err != nil {
		return err
	}
	if decodeRecordFast(l[:len(l)-crcSuffixLen], d) {
		return nil
	}
	if err := json.Unmarshal(l, d); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch d.Op {
	case "":
		if d.Seq == 0 || !d.Kind.Valid() || d.Key == "" || len(d.Payload) == 0 {
			return fmt.Errorf("%w: record lacks seq, key, kind or payload", ErrMalformed)
		}
		if d.Attempt > math.MaxInt32 || d.Attempt < -math.MaxInt32 {
			return fmt.Errorf("%w: attempt %d out of range", ErrMalformed, d.Attempt)
		}
	case opHeader, opSent, opTry, opDead:
	default:
		return fmt.Errorf("%w: unknown op %q", ErrMalformed, d.Op)
	}
	return nil
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
// Ids, kinds and keys are plain ASCII, which needs no escaping and no
// allocation; anything else goes through encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendJSONStringBody(dst, s)
	return append(dst, '"')
}

// appendJSONStringBody appends s escaped as appendJSONString does, without
// the quotes.
func appendJSONStringBody(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b[1:len(b)-1]...)
		}
	}
	return append(dst, s...)
}

// decodeRecordFast reads a record line laid out exactly as Append writes
// it (body is the line before its CRC field):
//
//	{"kind":"…","task_id":"…","attempt":N,"created_at":"…Z","payload":…,"key":"…","seq":N
//
// with strings that need no unescaping and a created_at in TimeFormat, in
// UTC. It reports false for anything else, which is then decoded by
// encoding/json: it never decides a line is invalid. The payload must be
// one valid JSON value, so that what it accepts reads exactly as
// encoding/json would read it; it is checked, not parsed or copied, and
// d.Payload shares body's bytes.
//
// This is what makes Open cheap: a record line is scanned once, by the
// CRC, plus one validating pass over its payload, where encoding/json
// scans it twice and copies it.
func decodeRecordFast(body []byte, d *line) bool {
	p := body
	var ok bool
	var kind, task []byte
	if p, ok = cutPrefix(p, `{"kind":"`); !ok {
		return false
	}
	if kind, p, ok = cutPlainString(p); !ok {
		return false
	}
	if p, ok = cutPrefix(p, `,"task_id":"`); !ok {
		return false
	}
	if task, p, ok = cutPlainString(p); !ok {
		return false
	}
	if p, ok = cutPrefix(p, `,"attempt":`); !ok {
		return false
	}
	neg := len(p) > 0 && p[0] == '-'
	if neg {
		p = p[1:]
	}
	attempt, p, ok := cutUint(p)
	if !ok || attempt > math.MaxInt32 {
		return false
	}
	if p, ok = cutPrefix(p, `,"created_at":"`); !ok || len(p) < len(TimeFormat)-5 {
		return false
	}
	created, ok := parseUTC(p[:len(TimeFormat)-5])
	if !ok {
		return false
	}
	if p, ok = cutPrefix(p[len(TimeFormat)-5:], `","payload":`); !ok {
		return false
	}
	// The key is found from the end: `,"key":"` cannot occur in the key
	// or the seq after it, so its last occurrence is the field.
	k := bytes.LastIndex(p, []byte(`,"key":"`))
	if k <= 0 {
		return false
	}
	payload := trimJSONSpace(p[:k])
	key, rest, ok := cutPlainString(p[k+len(`,"key":"`):])
	if !ok || len(key) == 0 {
		return false
	}
	if rest, ok = cutPrefix(rest, `,"seq":`); !ok {
		return false
	}
	seq, rest, ok := cutUint(rest)
	if !ok || len(rest) != 0 || seq == 0 || !Kind(kind).Valid() || !validJSON(payload) {
		return false
	}
	a := int(attempt)
	if neg {
		a = -a
	}
	*d = line{Seq: seq, Key: string(key), Kind: internKind(kind), TaskID: string(task), Attempt: a, CreatedAt: created, Payload: payload}
	return true
}

// internKind returns the kind named by b, without allocating for the
// kinds this package knows.
func internKind(b []byte) Kind {
	for _, k := range []Kind{KindProgress, KindLog, KindPhase, KindAttempt, KindComplete} {
		if string(b) == string(k) {
			return k
		}
	}
	return Kind(b)
}

func cutPrefix(p []byte, prefix string) ([]byte, bool) {
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return p, false
	}
	return p[len(prefix):], true
}

// cutPlainString reads a string's content up to its closing quote; it
// reports false for one that holds an escape, a control character or
// anything not ASCII (encoding/json would replace invalid UTF-8).
func cutPlainString(p []byte) (s, rest []byte, ok bool) {
	for i, c := range p {
		switch {
		case c == '"':
			return p[:i], p[i+1:], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, p, false
		}
	}
	return nil, p, false
}

// cutUint reads a JSON unsigned integer (no leading zero, at most 19
// digits, so it cannot overflow).
func cutUint(p []byte) (uint64, []byte, bool) {
	i := 0
	var v uint64
	for i < len(p) && i < 20 && p[i] >= '0' && p[i] <= '9' {
		v = v*10 + uint64(p[i]-'0')
		i++
	}
	if i == 0 || i > 19 || (i > 1 && p[0] == '0') || (i < len(p) && p[i] >= '0' && p[i] <= '9') {
		return 0, p, false
	}
	return v, p[i:], true
}

// parseUTC reads a time written in TimeFormat in UTC:
// 2006-01-02T15:04:05.000000000Z. A field out of range is refused (and the
// line goes to encoding/json, which decides).
func parseUTC(b []byte) (time.Time, bool) {
	if len(b) != 30 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[29] != 'Z' {
		return time.Time{}, false
	}
	num := func(b []byte) (int, bool) {
		v := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	var f [7]int
	for i, r := range [7][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}, {20, 29}} {
		v, ok := num(b[r[0]:r[1]])
		if !ok {
			return time.Time{}, false
		}
		f[i] = v
	}
	t := time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], f[6], time.UTC)
	if y, m, d := t.Date(); y != f[0] || int(m) != f[1] || d != f[2] || t.Hour() != f[3] || t.Minute() != f[4] || t.Second() != f[5] {
		return time.Time{}, false
	}
	return t, true
}

// trimJSONSpace cuts the whitespace JSON allows around a value.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
