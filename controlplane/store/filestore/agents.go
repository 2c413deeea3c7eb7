package filestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/internal/private"
)

// agentDir keeps each agent's latest record (what its latest heartbeat
// said) in a file of its own in dir, named by the SHA-256 of the agent's
// id (an id may hold any byte), replaced whole and synced on each
// PutAgent: a heartbeat writes its agent's file and no other.
type agentDir struct {
	dir string
}

func (ad agentDir) path(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(ad.dir, hex.EncodeToString(sum[:])+".json")
}

// load reads every agent's record, creating the directory (0700) when
// there is none. A file that cannot be read is logged and left alone.
func (ad agentDir) load(log *slog.Logger) (map[string]store.Agent, error) {
	if err := os.MkdirAll(ad.dir, 0o700); err != nil {
		return nil, err
	}
	if err := private.Dir("state directory", ad.dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(ad.dir)
	if err != nil {
		return nil, err
	}
	agents := map[string]store.Agent{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue // atomic's temporary files end otherwise
		}
		path := filepath.Join(ad.dir, e.Name())
		b, err := os.ReadFile(path)
		var a store.Agent
		if err == nil {
			err = json.Unmarshal(b, &a)
		}
		if err == nil && ad.path(a.View.AgentID) != path {
			err = fmt.Errorf("the record of agent %q is not in its file", a.View.AgentID)
		}
		if err != nil {
			log.Error("an agent's record could not be read; it is left alone", "file", path, "err", err)
			continue
		}
		agents[a.View.AgentID] = a
	}
	return agents, nil
}

// save replaces an agent's record, 0600, synced, its directory too.
func (ad agentDir) save(a store.Agent) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := atomic.WriteFile(ad.path(a.View.AgentID), strings.NewReader(string(b))); err != nil {
		return err
	}
	return durable.SyncDir(ad.dir)
}

// PutAgent stores an agent's record: on disk, synced, then in memory.
// The records of different agents are written side by side; those of one
// agent one after the other, the last one written the one kept.
func (s *Store) PutAgent(_ context.Context, a store.Agent) error {
	a.View.Repos = slices.Clone(a.View.Repos)
	a.View.Labels = maps.Clone(a.View.Labels)
	a.Missing = maps.Clone(a.Missing)
	id := a.View.AgentID
	s.mu.Lock()
	mu := s.agentMu[id]
	if mu == nil {
		mu = &sync.Mutex{}
		s.agentMu[id] = mu
	}
	s.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if err := s.agentDir.save(a); err != nil {
		return fmt.Errorf("controlplane: store agent %s: %w", id, err)
	}
	s.mu.Lock()
	s.agents[id] = a
	s.mu.Unlock()
	return nil
}

// Agent returns an agent's record (a copy).
func (s *Store) Agent(_ context.Context, id string) (store.Agent, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[id]
	a.Missing = maps.Clone(a.Missing)
	return a, ok, nil
}

// Agents returns the agents' records by id.
func (s *Store) Agents(context.Context) ([]store.Agent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.Agent, 0, len(s.agents))
	for _, a := range s.agents {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b store.Agent) int { return strings.Compare(a.View.AgentID, b.View.AgentID) })
	return out, nil
}

// Serves reports whether an agent announced repository repo in its
// latest record.
func (s *Store) Serves(_ context.Context, repo string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.agents {
		if slices.Contains(a.View.Repos, repo) {
			return true, nil
		}
	}
	return false, nil
}
