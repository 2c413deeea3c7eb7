package filestore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/internal/durable"
)

// secretName is what a secret may be called: it names its file.
var secretName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// Secret returns the secret name, kept hex-encoded in secrets/NAME
// (0600, in a 0700 directory), made the first time it is asked for and
// synced before it is returned.
func (s *Store) Secret(_ context.Context, name string, size int) ([]byte, error) {
	if !secretName.MatchString(name) || size <= 0 {
		return nil, fmt.Errorf("controlplane: secret %q of %d bytes: want a name of a-z, 0-9 and - and a size above 0", name, size)
	}
	s.secretMu.Lock()
	defer s.secretMu.Unlock()
	dir := filepath.Join(s.dir, "secrets")
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key, err := hex.DecodeString(string(bytes.TrimSpace(b)))
		if err != nil || len(key) != size {
			return nil, fmt.Errorf("controlplane: secret %s is not %d hex-encoded bytes; remove it to make a new one (what it signed stops working)", path, size)
		}
		return key, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("controlplane: read secret %s: %w", path, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	key := make([]byte, size)
	rand.Read(key)
	// atomic.WriteFile makes its temporary file 0600 and syncs it; the
	// directory's entry is synced here.
	if err := atomic.WriteFile(path, bytes.NewReader([]byte(hex.EncodeToString(key)+"\n"))); err != nil {
		return nil, fmt.Errorf("controlplane: write secret %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	if err := durable.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("controlplane: sync %s: %w", dir, err)
	}
	return key, nil
}
