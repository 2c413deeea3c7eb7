package outbox

import (
	"encoding/json"
	"fmt"
	"github.com/edgeagent/agent/internal/durable"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"
)

// quarantineEntry is one line of the quarantine file: bytes that recovery
// took out of the outbox, kept for a person to look at.
type quarantineEntry struct {
	At     string `json:"at"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason"`
	// Text holds the bytes when they are valid UTF-8, Base64 otherwise.
	Text   string `json:"text,omitempty"`
	Base64 []byte `json:"base64,omitempty"`
}

// maxQuarantineSpan caps the bytes kept of one span, so that a file of
// garbage does not double on disk.
const maxQuarantineSpan = 1 << 20

// quarantine appends the spans of f to the quarantine file and syncs it,
// before recovery removes them from the outbox.
func (o *Outbox) quarantine(f *os.File, spans []span) error {
	path := filepath.Join(o.dir, QuarantineName)
	q, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("outbox: quarantine: %w", err)
	}
	defer q.Close()
	enc := json.NewEncoder(q)
	for _, s := range spans {
		b := make([]byte, min(s.n, maxQuarantineSpan))
		if _, err := f.ReadAt(b, s.off); err != nil && err != io.EOF {
			return fmt.Errorf("outbox: quarantine: read: %w", err)
		}
		qe := quarantineEntry{At: o.opts.Now().UTC().Format(TimeFormat), Offset: s.off, Bytes: s.n, Reason: s.why.Error()}
		if utf8.Valid(b) {
			qe.Text = string(b)
		} else {
			qe.Base64 = b
		}
		if err := enc.Encode(qe); err != nil {
			return fmt.Errorf("outbox: quarantine: %w", err)
		}
	}
	if err := q.Sync(); err != nil {
		return fmt.Errorf("outbox: quarantine: %w", err)
	}
	return durable.SyncDir(o.dir)
}
