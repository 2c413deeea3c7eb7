package filestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/internal/durable"
)

// revokedSessions are the console's revoked sessions (store.Sessions):
// in memory, and on disk revoked-sessions.json (0600), the nonces and
// when each expires, written whole, synced and renamed into place at
// each sign-out. Sign-outs are a person's, a few a day: the file stays
// small, and holds no secret (a nonce opens nothing without its
// cookie's signature).
type revokedSessions struct {
	mu     sync.Mutex
	path   string
	loaded bool
	nonces map[string]time.Time
}

// revokedFile is revoked-sessions.json.
type revokedFile struct {
	Revoked map[string]time.Time `json:"revoked"`
}

// load reads the file the first time it is needed; mu is held.
func (r *revokedSessions) load(dir string) error {
	if r.loaded {
		return nil
	}
	r.path = filepath.Join(dir, "revoked-sessions.json")
	b, err := os.ReadFile(r.path)
	var f revokedFile
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("controlplane: revoked sessions: %w", err)
	default:
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("controlplane: revoked sessions: %s does not parse (%v); it lists the console sessions signed out: mend it, or remove it to let them in again", r.path, err)
		}
	}
	if f.Revoked == nil {
		f.Revoked = map[string]time.Time{}
	}
	r.nonces, r.loaded = f.Revoked, true
	return nil
}

// RevokeSession keeps nonce revoked until expires in the file, synced,
// and forgets those that expired at or before now.
func (s *Store) RevokeSession(_ context.Context, nonce string, expires, now time.Time) error {
	r := &s.sessions
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(s.dir); err != nil {
		return err
	}
	next := make(map[string]time.Time, len(r.nonces)+1)
	for n, exp := range r.nonces {
		if exp.After(now) {
			next[n] = exp
		}
	}
	if exp, ok := next[nonce]; !ok || expires.After(exp) {
		next[nonce] = expires.UTC()
	}
	b, err := json.Marshal(revokedFile{Revoked: next})
	if err != nil {
		return err
	}
	// atomic.WriteFile makes its temporary file 0600 and syncs it; the
	// directory's entry is synced here.
	if err := atomic.WriteFile(r.path, bytes.NewReader(append(b, '\n'))); err != nil {
		return fmt.Errorf("controlplane: revoke a session: %w", err)
	}
	if err := os.Chmod(r.path, 0o600); err != nil {
		return fmt.Errorf("controlplane: revoke a session: %w", err)
	}
	if err := durable.SyncDir(s.dir); err != nil {
		return fmt.Errorf("controlplane: revoke a session: %w", err)
	}
	r.nonces = next
	return nil
}

// SessionRevoked reports whether nonce is kept revoked: from memory.
func (s *Store) SessionRevoked(_ context.Context, nonce string) (bool, error) {
	r := &s.sessions
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.load(s.dir); err != nil {
		return false, err
	}
	_, ok := r.nonces[nonce]
	return ok, nil
}
