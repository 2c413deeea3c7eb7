package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/agent/controlplane/store"
)

// Register records agent id's token hash, in one statement: an id that
// has a hash keeps it (store.ErrRegistered) unless replace is set. A hash
// another agent has is an error (the column is unique).
func (s *Store) Register(ctx context.Context, id, tokenHash string, replace bool) error {
	var tag pgconn.CommandTag
	err := s.write(ctx, func(c *pgxpool.Conn) (err error) {
		tag, err = c.Exec(ctx, `INSERT INTO agents (id, token_hash) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET token_hash = EXCLUDED.token_hash
			WHERE agents.token_hash IS NULL OR $3`, id, tokenHash, replace)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: register agent %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrRegistered
	}
	return nil
}

// Revoke forgets agent id's token hash, and reports whether it had one.
// Its record stays.
func (s *Store) Revoke(ctx context.Context, id string) (bool, error) {
	var tag pgconn.CommandTag
	err := s.write(ctx, func(c *pgxpool.Conn) (err error) {
		tag, err = c.Exec(ctx, `UPDATE agents SET token_hash = NULL WHERE id = $1 AND token_hash IS NOT NULL`, id)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: revoke agent %s: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// AgentByToken returns the agent tokenHash belongs to, "" when none: one
// lookup in the hash's unique index.
func (s *Store) AgentByToken(ctx context.Context, tokenHash string) (string, error) {
	var id string
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT id FROM agents WHERE token_hash = $1`, tokenHash).Scan(&id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("pgstore: agent by token: %w", err)
	}
	return id, nil
}

// The agents' records are written behind: PutAgent keeps a record in
// memory, and a goroutine of the store's writes those it holds every
// agentsEvery, all in one transaction (one commit for any number of
// heartbeats), and at Close. Agent, Agents and Serves read this replica's
// records first; another replica sees them within agentsEvery. A record
// never replaces a newer one (seen_at: its heartbeat's time). A crash
// loses at most the last agentsEvery of heartbeats, which agents say
// again.
const agentsEvery = time.Second

// agentsBehind is what PutAgent has not written yet.
type agentsBehind struct {
	mu      sync.Mutex
	pending map[string]store.Agent
	stop    chan struct{}
	done    chan struct{}
}

// runAgents writes the pending records every agentsEvery until stop.
func (s *Store) runAgents() {
	defer close(s.agents.done)
	t := time.NewTicker(agentsEvery)
	defer t.Stop()
	for {
		select {
		case <-s.agents.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*agentsEvery)
			if err := s.flushAgents(ctx); err != nil {
				s.log.Warn("pgstore: writing the agents' records failed; tried again in a moment", "err", err)
			}
			cancel()
		}
	}
}

// flushAgents writes the pending records in one transaction. Those it
// could not write are pending again, unless a newer one came meanwhile.
func (s *Store) flushAgents(ctx context.Context) error {
	s.agents.mu.Lock()
	batch := s.agents.pending
	s.agents.pending = map[string]store.Agent{}
	s.agents.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(batch)) // one order: no deadlock between replicas
	err := s.write(ctx, func(c *pgxpool.Conn) error {
		var b pgx.Batch
		b.Queue("BEGIN")
		for _, id := range ids {
			a := batch[id]
			record, err := json.Marshal(a)
			if err != nil {
				return err
			}
			repos := a.View.Repos
			if repos == nil {
				repos = []string{}
			}
			b.Queue(`INSERT INTO agents (id, record, repos, seen_at) VALUES ($1, $2, $3, $4)
				ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record, repos = EXCLUDED.repos, seen_at = EXCLUDED.seen_at
				WHERE agents.seen_at IS NULL OR agents.seen_at <= EXCLUDED.seen_at`, id, record, repos, a.View.LastHeartbeat)
		}
		b.Queue("COMMIT")
		err := c.SendBatch(ctx, &b).Close()
		if err != nil {
			_, _ = c.Exec(context.WithoutCancel(ctx), "ROLLBACK") // a connection left in a failed transaction goes back to the pool clean
		}
		return err
	})
	if err != nil {
		s.agents.mu.Lock()
		for id, a := range batch {
			if _, newer := s.agents.pending[id]; !newer {
				s.agents.pending[id] = a
			}
		}
		s.agents.mu.Unlock()
		return fmt.Errorf("pgstore: write %d agents' records: %w", len(batch), err)
	}
	return nil
}

// closeAgents stops the writer and writes what is pending.
func (s *Store) closeAgents() error {
	close(s.agents.stop)
	<-s.agents.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.flushAgents(ctx)
}

// pendingAgent is this replica's record of agent id not yet written.
func (s *Store) pendingAgent(id string) (store.Agent, bool) {
	s.agents.mu.Lock()
	defer s.agents.mu.Unlock()
	a, ok := s.agents.pending[id]
	return a, ok
}

// PutAgent keeps a's record, to be written within agentsEvery.
func (s *Store) PutAgent(_ context.Context, a store.Agent) error {
	a.View.Repos = slices.Clone(a.View.Repos)
	a.View.Labels = maps.Clone(a.View.Labels)
	a.Missing = maps.Clone(a.Missing)
	s.agents.mu.Lock()
	defer s.agents.mu.Unlock()
	if s.agents.pending == nil {
		return errors.New("pgstore: put agent: the store is closed")
	}
	s.agents.pending[a.View.AgentID] = a
	return nil
}

// Agent returns agent id's record; ok is false when it has none.
func (s *Store) Agent(ctx context.Context, id string) (store.Agent, bool, error) {
	if a, ok := s.pendingAgent(id); ok {
		a.Missing = maps.Clone(a.Missing)
		return a, true, nil
	}
	var record []byte
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT record FROM agents WHERE id = $1 AND record IS NOT NULL`, id).Scan(&record)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Agent{}, false, nil
	}
	if err != nil {
		return store.Agent{}, false, fmt.Errorf("pgstore: agent %s: %w", id, err)
	}
	var a store.Agent
	if err := json.Unmarshal(record, &a); err != nil {
		return store.Agent{}, false, fmt.Errorf("pgstore: agent %s: %w", id, err)
	}
	return a, true, nil
}

// Agents returns the agents' records by id.
func (s *Store) Agents(ctx context.Context) ([]store.Agent, error) {
	var agents []store.Agent
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		agents = nil
		rows, err := c.Query(ctx, `SELECT record FROM agents WHERE record IS NOT NULL ORDER BY id`)
		if err != nil {
			return err
		}
		var record []byte
		_, err = pgx.ForEachRow(rows, []any{&record}, func() error {
			var a store.Agent
			if err := json.Unmarshal(record, &a); err != nil {
				return err
			}
			agents = append(agents, a)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: agents: %w", err)
	}
	s.agents.mu.Lock()
	defer s.agents.mu.Unlock()
	for i, a := range agents {
		if p, ok := s.agents.pending[a.View.AgentID]; ok {
			agents[i] = p
		}
	}
	for id, p := range s.agents.pending {
		if _, found := slices.BinarySearchFunc(agents, id, func(a store.Agent, id string) int { return strings.Compare(a.View.AgentID, id) }); !found {
			agents = append(agents, p)
		}
	}
	slices.SortFunc(agents, func(a, b store.Agent) int { return strings.Compare(a.View.AgentID, b.View.AgentID) })
	return agents, nil
}

// Serves reports whether an agent's record lists repository repo (the
// repositories' index answers it).
func (s *Store) Serves(ctx context.Context, repo string) (bool, error) {
	s.agents.mu.Lock()
	for _, a := range s.agents.pending {
		if slices.Contains(a.View.Repos, repo) {
			s.agents.mu.Unlock()
			return true, nil
		}
	}
	s.agents.mu.Unlock()
	var ok bool
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agents WHERE repos @> ARRAY[$1::text])`, repo).Scan(&ok)
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: agents serving %s: %w", repo, err)
	}
	return ok, nil
}
