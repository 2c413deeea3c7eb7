// Package outbox is the agent's durable, compacting JSONL outbox.
//
// Every payload the agent will send to the control plane is appended here
// first. Append returns only once the record's bytes are on stable storage
// (fdatasync), so a record that was acknowledged to its caller survives a
// crash, a SIGKILL or a power cut. Records stay pending until the control
// plane acknowledges them; a permanent rejection marks them dead.
//
// # On-disk format
//
// The outbox is one directory holding:
//
//	outbox.jsonl      records and marks, one JSON object per line
//	quarantine.jsonl  corrupt bytes set aside by recovery (created on demand)
//	lock              held (flock) by the one writer
//
// While the outbox is open, outbox.jsonl ends in a stretch of NUL bytes,
// about 1 MiB, that the writer keeps zeroed ahead of its lines: a batch
// then overwrites blocks the file already has, and its fdatasync does not
// also commit the file system's journal for a new size (on ext4, 1.5x to
// 2.2x the durable appends per second). The batch whose write passes the
// stretch's end extends it, under its own sync; Close cuts it, so a file
// closed cleanly ends with its last line; on a disk with less than 64 MiB
// free no stretch is made. No line holds a NUL (payloads are checked
// JSON, which escapes control bytes), so every reader here stops where a
// run of NULs reaches the end of the file. A program reading the file
// while the agent runs should do the same.
//
// A record line (wrapped here; on disk it is one line):
//
//	{"kind":"phase","task_id":"t-1","attempt":1,
//	 "created_at":"2026-11-21T12:00:00.000000000Z",
//	 "payload":{"phase":"claimed"},
//	 "key":"t-1:phase:claimed:2026-11-21T12:00:00.000000000Z",
//	 "seq":42,"crc":"1c291ca3"}
//
// Key and seq come last so that an append encodes and checksums everything
// else before it takes the lock that assigns seqs. Readers do not depend on
// the order of fields: a line laid out exactly as above, with strings that
// need no unescaping, is read without a JSON parse (the payload is only
// validated, in place); any other valid line is decoded with encoding/json
// to the same record.
//
// The payload is stored as the caller gave it, once checked to be one
// JSON value (surrounding whitespace cut; the check is the package's own
// scanner, which gives encoding/json's Valid answers, faster): it is not
// rewritten. Only a payload holding a newline or a carriage return
// (whitespace between its tokens: inside strings they are escaped) is
// compacted, so that every record stays one line. The attempt must fit in
// 32 bits; the task id and the key must be valid UTF-8.
//
// Marks record what happened to records later. They are appended, never
// written over a record:
//
//	{"op":"header","version":1,"next_seq":40,"created_at":"…","compacted_at":"…","crc":"…"}
//	{"op":"sent","seqs":[40,41,42],"at":"…","crc":"…"}
//	{"op":"try","seqs":[43],"n":1,"error":"connection refused","at":"…","crc":"…"}
//	{"op":"dead","seqs":[44],"reason":"terminal","at":"…","crc":"…"}
//
// Every line ends in ,"crc":"xxxxxxxx"} where xxxxxxxx is the CRC-32C
// (Castagnoli), in lower-case hex, of every byte before ,"crc":. Checking a
// line needs no JSON parse.
//
// # Recovery rules
//
// Open reads the file once, front to back, and never fails because of
// corruption:
//
//   - A run of NUL bytes that reaches the end of the file is the stretch
//     the writer keeps zeroed (or what a crash left of it): it is cut,
//     neither set aside nor counted torn. A run of NULs with bytes after
//     it is a hole a crash left in a batch that was never synced: it is
//     read as a corrupt line (below), never taken for the end.
//   - Bytes after the last valid line, before that stretch (a line cut
//     short by a crash, or garbage) are a torn tail. They are copied to
//     the quarantine file, and the file is truncated to the end of the last
//     valid line. The truncation is fsynced. A record is acknowledged only
//     after its whole line, newline included, is durable, so a torn tail
//     never holds an acknowledged record.
//   - A line that fails its CRC or does not parse, followed by valid lines,
//     is corrupt. It is skipped, counted in Stats.Quarantined and copied to
//     the quarantine file. The outbox is then compacted once, so the same
//     bytes are not quarantined again at the next Open.
//   - A line longer than the record limit is read past, not buffered whole.
//   - A record whose seq is not above the seq before it is treated as
//     corrupt: sequence numbers only rise.
//   - A mark that names a seq not in the file is ignored.
//
// # Guarantees
//
//  1. Append is durable when it returns. Concurrent appends share one write
//     and one fdatasync (group commit), led by one of the appenders: no
//     committer goroutine, one hand-off per append.
//  2. One JSON object per line, each with a CRC-32C.
//  3. Sent is recorded by appending a mark, never by rewriting a record.
//  4. Open recovers from a crash at any byte and never loops.
//  5. Compaction writes the live records (pending and dead) to a temporary
//     file, fsyncs it, renames it over the outbox and fsyncs the directory.
//     It runs on its own once dead bytes dominate. It copies only live
//     records, and appends pause only while it copies the records appended
//     during the copy.
//  6. Bounded: once the file would pass Options.MaxBytes, log records are
//     refused with ErrFull and counted. The next record of that task is
//     preceded by a marker log record that says how many were dropped.
//     Phase, progress, attempt and completion records are never refused.
//  7. One writer per directory (flock). Inspect, Tail and the CLI's read-only
//     commands read the file without the lock while the writer runs.
//  8. MarkDead keeps a permanently rejected record, with its reason, out of
//     Pending. Dead records survive compaction so they can be inspected,
//     with the time they died, until PurgeDead appends a sent mark for them
//     with the reason "purged".
//  9. Memory is O(pending records): the index keeps each live record's
//     offset and metadata (about 140 bytes a record; a key the outbox made
//     is rebuilt, not kept), never its payload. Payloads are read back from
//     the file when they are sent, each batch with one read, starting at a
//     cursor past the records already sent, so a batch costs the same
//     however long the backlog.
package outbox
