package outbox

import "errors"

// Errors a line can fail with during recovery. Open never returns them; it
// counts and quarantines the lines instead. Inspect reports them per line.
var (
	// ErrCRCMismatch: the line's bytes do not match its CRC.
	ErrCRCMismatch = errors.New("outbox: crc mismatch")
	// ErrMalformed: the line is not a well-formed record or mark.
	ErrMalformed = errors.New("outbox: malformed line")
	// ErrTornTail: bytes after the last valid line, cut short by a crash.
	ErrTornTail = errors.New("outbox: torn tail")
	// ErrLineTooLong: a line longer than the record limit.
	ErrLineTooLong = errors.New("outbox: line too long")
	// ErrSeqOrder: a record whose seq does not rise above the one before.
	ErrSeqOrder = errors.New("outbox: seq out of order")
)

// Errors Append and the marks return.
var (
	// ErrFull: the outbox is at its byte limit and the record is a log
	// record, which is refused first. The drop is counted, and a marker
	// record tells the control plane.
	ErrFull = errors.New("outbox: full, log record dropped")
	// ErrClosed: the outbox was closed.
	ErrClosed = errors.New("outbox: closed")
	// ErrTooLarge: the record is larger than Options.MaxRecordBytes.
	ErrTooLarge = errors.New("outbox: record too large")
	// ErrInvalid: the record lacks a valid kind, a task id or a JSON payload.
	ErrInvalid = errors.New("outbox: invalid record")
	// ErrLockLost: the lock file is no longer the one this outbox holds.
	ErrLockLost = errors.New("outbox: lock lost")
	// ErrLocked: another process holds the outbox's lock.
	ErrLocked = errors.New("outbox: locked by another process")
)
