package filestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/durable"
)

// registry holds the agents' token hashes, in agents.json and in memory.
// The control plane keeps the tokens' SHA-256, never the tokens.
type registry struct {
	path   string
	mu     sync.Mutex
	byHash map[string]string // token hash → agent id
	byID   map[string]string // agent id → token hash
}

func openRegistry(dir string) (*registry, error) {
	r := &registry{path: filepath.Join(dir, "agents.json"), byHash: map[string]string{}, byID: map[string]string{}}
	b, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &r.byID); err != nil {
		return nil, fmt.Errorf("%s: %w", r.path, err)
	}
	for id, h := range r.byID {
		r.byHash[h] = id
	}
	return r, nil
}

// register records agent id's token hash. Unless replace is set, an id
// that already has one is store.ErrRegistered.
func (r *registry) register(id, hash string, replace bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.byID[id]
	if ok && !replace {
		return store.ErrRegistered
	}
	if ok {
		delete(r.byHash, old)
	}
	r.byID[id], r.byHash[hash] = hash, id
	return r.save()
}

// revoke forgets agent id's token hash; it reports whether there was one.
func (r *registry) revoke(id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.byID[id]
	if !ok {
		return false, nil
	}
	delete(r.byID, id)
	delete(r.byHash, h)
	return true, r.save()
}

// save writes the registry, 0600, synced. mu is held.
func (r *registry) save() error {
	data, _ := json.MarshalIndent(r.byID, "", "  ")
	if err := atomic.WriteFile(r.path, strings.NewReader(string(data))); err != nil {
		return err
	}
	if err := os.Chmod(r.path, 0o600); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(r.path))
}

// agent returns the agent a token hash belongs to, "" when none.
func (r *registry) agent(hash string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byHash[hash]
}
