package filestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/natefinch/atomic"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/state"
)

// What agents said in their latest heartbeats is in memory, and written
// to agents-seen.json (every agent's record in one file, replaced whole
// and synced) at most every agentsEvery, on a heartbeat that finds it due,
// and at Close. A crash loses at most the last agentsEvery of it, which
// every agent says again in its next heartbeat; a heartbeat costs no
// disk write of its own, at 10 agents or 10,000.
const agentsEvery = 10 * time.Second

// agentsFile holds the agents' records.
type agentsFile struct {
	path string

	mu      sync.Mutex // one write at a time
	written time.Time  // when last written
}

// load reads the records; none when the file does not exist. A file that
// does not decode is logged and set aside: heartbeats bring the records
// back.
func (af *agentsFile) load(log *slog.Logger) map[string]store.Agent {
	agents := map[string]store.Agent{}
	b, err := os.ReadFile(af.path)
	if errors.Is(err, fs.ErrNotExist) {
		return agents
	}
	if err == nil {
		err = json.Unmarshal(b, &agents)
	}
	if err != nil {
		log.Error("the agents' records could not be read; the agents' next heartbeats bring them back", "file", af.path, "err", err)
		return map[string]store.Agent{}
	}
	return agents
}

// write replaces the file with agents, 0600, synced.
func (af *agentsFile) write(agents map[string]store.Agent, now time.Time) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(agents); err != nil {
		return err
	}
	if err := atomic.WriteFile(af.path, &buf); err != nil {
		return err
	}
	if err := os.Chmod(af.path, 0o600); err != nil {
		return err
	}
	af.written = now
	return durable.SyncDir(filepath.Dir(af.path))
}

// PutAgent keeps an agent's record in memory, and writes every agent's
// when the last write is agentsEvery old.
func (s *Store) PutAgent(_ context.Context, a store.Agent) error {
	a.View.Repos = slices.Clone(a.View.Repos)
	a.View.Labels = maps.Clone(a.View.Labels)
	a.Missing = maps.Clone(a.Missing)
	a.Granted, a.AdoptLabels = nil, false // kept apart (labels.go)
	now := s.now()
	s.mu.Lock()
	s.agents[a.View.AgentID] = a
	s.agentsDirty = true
	s.mu.Unlock()
	if !s.agentsFile.mu.TryLock() {
		return nil // being written: the next heartbeat's turn
	}
	defer s.agentsFile.mu.Unlock()
	if d := now.Sub(s.agentsFile.written); d >= 0 && d < agentsEvery {
		return nil
	}
	return s.writeAgents(now)
}

// writeAgents writes every agent's record if any changed. agentsFile.mu is
// held.
func (s *Store) writeAgents(now time.Time) error {
	s.mu.Lock()
	if !s.agentsDirty {
		s.mu.Unlock()
		return nil
	}
	snapshot := maps.Clone(s.agents)
	s.agentsDirty = false
	s.mu.Unlock()
	if err := s.agentsFile.write(snapshot, now); err != nil {
		s.mu.Lock()
		s.agentsDirty = true
		s.mu.Unlock()
		return fmt.Errorf("controlplane: store the agents' records: %w", err)
	}
	return nil
}

// Agent returns an agent's record (a copy).
func (s *Store) Agent(_ context.Context, id string) (store.Agent, bool, error) {
	s.mu.Lock()
	a, ok := s.agents[id]
	a.Missing = maps.Clone(a.Missing)
	s.mu.Unlock()
	s.grants.of(&a, id)
	return a, ok, nil
}

// AgentAndLeased is Agent and Leased.
func (s *Store) AgentAndLeased(ctx context.Context, id string) (store.Agent, bool, []*state.Task, error) {
	a, ok, err := s.Agent(ctx, id)
	if err != nil {
		return store.Agent{}, false, nil, err
	}
	leased, err := s.Leased(ctx, id)
	return a, ok, leased, err
}

// Agents returns the agents' records by id.
func (s *Store) Agents(context.Context) ([]store.Agent, error) {
	s.mu.Lock()
	out := make([]store.Agent, 0, len(s.agents))
	for _, a := range s.agents {
		out = append(out, a)
	}
	s.mu.Unlock()
	for i := range out {
		s.grants.of(&out[i], out[i].View.AgentID)
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
