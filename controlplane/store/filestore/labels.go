package filestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/durable"
)

// grants are the labels people granted agents (store.Store.GrantLabels),
// in memory and in agent-labels.json, replaced whole (natefinch/atomic,
// 0600, the directory synced) at each change: a person's act, or an
// agent from before the file adopting its labels once, never a
// heartbeat's.
//
// A directory of a store from before granted labels has no such file:
// the first start of this version makes it, marking every agent
// registered then as one to adopt the labels it advertises (the
// upgrade's path, docs/routing.md). Agents registered after adopt
// nothing.
type grants struct {
	path string

	mu   sync.Mutex // held over a change and its write, and by Revoke
	data grantsData
}

// grantsData is agent-labels.json.
type grantsData struct {
	Granted map[string]map[string]string `json:"granted"`
	Adopt   map[string]bool              `json:"adopt,omitempty"`
}

// openGrants reads dir/agent-labels.json, or makes it, with the agents
// of reg to adopt their labels.
func openGrants(dir string, reg *registry) (*grants, error) {
	g := &grants{path: filepath.Join(dir, "agent-labels.json")}
	b, err := os.ReadFile(g.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		g.data = grantsData{Granted: map[string]map[string]string{}, Adopt: map[string]bool{}}
		reg.mu.Lock()
		for id := range reg.byID {
			g.data.Adopt[id] = true
		}
		reg.mu.Unlock()
		if err := g.write(g.data); err != nil {
			return nil, err
		}
		return g, nil
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal(b, &g.data); err != nil {
		return nil, fmt.Errorf("%s: %w", g.path, err)
	}
	if g.data.Granted == nil {
		g.data.Granted = map[string]map[string]string{}
	}
	if g.data.Adopt == nil {
		g.data.Adopt = map[string]bool{}
	}
	return g, nil
}

// write replaces the file with d. mu is held, or nobody else has g.
func (g *grants) write(d grantsData) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := atomic.WriteFile(g.path, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("controlplane: store the granted labels: %w", err)
	}
	if err := os.Chmod(g.path, 0o600); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(g.path))
}

// change applies fn to a copy of the grants, writes it, and keeps it
// once written. mu is held.
func (g *grants) change(fn func(d *grantsData)) error {
	d := grantsData{Granted: maps.Clone(g.data.Granted), Adopt: maps.Clone(g.data.Adopt)}
	fn(&d)
	if err := g.write(d); err != nil {
		return err
	}
	g.data = d
	return nil
}

// of fills a's granted labels and whether it is to adopt its own.
func (g *grants) of(a *store.Agent, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a.Granted, a.AdoptLabels = maps.Clone(g.data.Granted[id]), g.data.Adopt[id]
}

// GrantLabels sets and removes registered agent id's granted labels.
func (s *Store) GrantLabels(_ context.Context, id string, set map[string]string, remove []string) (map[string]string, error) {
	g := s.grants
	g.mu.Lock()
	defer g.mu.Unlock()
	s.reg.mu.Lock()
	_, ok := s.reg.byID[id]
	s.reg.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("controlplane: grant labels to %s: %w", id, store.ErrNotRegistered)
	}
	labels := maps.Clone(g.data.Granted[id])
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, set)
	for _, k := range remove {
		delete(labels, k)
	}
	err := g.change(func(d *grantsData) {
		d.Granted[id] = labels
		delete(d.Adopt, id)
	})
	return maps.Clone(labels), err
}

// AdoptLabels grants agent id the labels it advertises, once, when it
// was registered before granted labels were kept.
func (s *Store) AdoptLabels(_ context.Context, id string, labels map[string]string) (bool, error) {
	g := s.grants
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.data.Adopt[id] {
		return false, nil
	}
	err := g.change(func(d *grantsData) {
		d.Granted[id] = maps.Clone(labels)
		delete(d.Adopt, id)
	})
	return err == nil, err
}

// Revoke forgets agent id's granted labels, then its token hash: held
// over both, so that no grant comes between, and in that order, so that
// a crash between leaves an agent with fewer labels, never an id free
// to register with the labels a person granted another.
func (s *Store) Revoke(_ context.Context, id string) (bool, error) {
	g := s.grants
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.data.Granted[id]; ok || g.data.Adopt[id] {
		err := g.change(func(d *grantsData) {
			delete(d.Granted, id)
			delete(d.Adopt, id)
		})
		if err != nil {
			return false, err
		}
	}
	return s.reg.revoke(id)
}
