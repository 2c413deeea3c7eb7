package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// Register records agent id's token hash, in one statement: an id that
// has a hash keeps it (store.ErrRegistered) unless replace is set. A
// hash replaced is told to every replica's token cache (tokens.go) with
// the commit, by the trigger agents_token_changed. A hash another agent
// has is an error (the column is unique).
func (s *Store) Register(ctx context.Context, id, tokenHash string, replace bool) error {
	var tag pgconn.CommandTag
	err := s.write(ctx, func(c *pgxpool.Conn) (err error) {
		// An id taken anew (its token revoked, perhaps by a replica
		// from before granted labels) starts with no labels granted.
		tag, err = c.Exec(ctx, `INSERT INTO agents (id, token_hash) VALUES ($1, $2)
			ON CONFLICT (id) DO UPDATE SET token_hash = EXCLUDED.token_hash,
				granted_labels = CASE WHEN agents.token_hash IS NULL THEN NULL ELSE agents.granted_labels END,
				adopt_labels = agents.adopt_labels AND agents.token_hash IS NOT NULL
			WHERE agents.token_hash IS NULL OR $3`, id, tokenHash, replace)
		return err
	})
	if replace {
		s.tokens.changed()
	}
	if err != nil {
		return fmt.Errorf("pgstore: register agent %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrRegistered
	}
	if n := s.registered.Add(1); n >= analyzeFrom && n&(n-1) == 0 {
		s.analyzeAgents(ctx)
	}
	return nil
}

// analyzeFrom is the count of registrations from which the agents table
// is analyzed each time they double.
const analyzeFrom = 64

// analyzeAgents has PostgreSQL count the agents table again. A fleet
// enrolling grows it from a page to hundreds in a minute, faster than
// autovacuum looks (autovacuum_naptime); meanwhile each session's
// prepared lookups keep the plan made for a page (a sequential scan,
// reading every agent for each request), until new statistics replace
// it. A failure is logged: the lookups stay right, only slower.
//
// It waits at most 100 ms for the table (autovacuum may hold it), inside
// the request that registered: then it is left to autovacuum.
func (s *Store) analyzeAgents(ctx context.Context) {
	err := s.write(ctx, func(c *pgxpool.Conn) error {
		var b pgx.Batch
		b.Queue("BEGIN")
		b.Queue("SET LOCAL lock_timeout = '100ms'")
		b.Queue("ANALYZE agents")
		b.Queue("COMMIT")
		return c.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		s.log.Warn("pgstore: analyze the agents table", "err", err)
	}
}

// Revoke forgets agent id's token hash and the labels granted it, and
// reports whether it had a token. Its record stays. Every replica's
// token cache hears of it with the commit (the trigger
// agents_token_changed).
func (s *Store) Revoke(ctx context.Context, id string) (bool, error) {
	var tag pgconn.CommandTag
	err := s.write(ctx, func(c *pgxpool.Conn) (err error) {
		tag, err = c.Exec(ctx, `UPDATE agents SET token_hash = NULL, granted_labels = NULL, adopt_labels = false
			WHERE id = $1 AND token_hash IS NOT NULL`, id)
		return err
	})
	s.tokens.changed()
	if err != nil {
		return false, fmt.Errorf("pgstore: revoke agent %s: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// AgentByToken returns the agent tokenHash belongs to, "" when none: one
// lookup in the hash's unique index, or none while the store listens
// (ListenQueued) and cached it (tokens.go). A revocation on any replica
// empties every listening replica's cache a moment after it commits.
func (s *Store) AgentByToken(ctx context.Context, tokenHash string) (string, error) {
	id, ok, gen := s.tokens.get(tokenHash)
	if ok {
		return id, nil
	}
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT id FROM agents WHERE token_hash = $1`, tokenHash).Scan(&id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("pgstore: agent by token: %w", err)
	}
	s.tokens.put(tokenHash, id, gen)
	return id, nil
}

// PutAgent stores a's record, and the repositories it serves, in place
// of the one before. It returns once PostgreSQL has the record, without
// waiting for its disk (synchronous_commit off for this transaction
// alone): a record is a heartbeat's, sent again at the next one, and a
// crash of PostgreSQL loses at most the last fraction of a second of
// them (three times wal_writer_delay), never a task, an event or a
// token. At 10,000 agents these are a thousand commits a second.
func (s *Store) PutAgent(ctx context.Context, a store.Agent) error {
	id := a.View.AgentID
	record, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("pgstore: put agent %s: %w", id, err)
	}
	repos := a.View.Repos
	if repos == nil {
		repos = []string{}
	}
	err = s.write(ctx, func(c *pgxpool.Conn) error {
		var b pgx.Batch
		b.Queue("BEGIN")
		b.Queue("SET LOCAL synchronous_commit TO off")
		b.Queue(`INSERT INTO agents (id, record, repos) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record, repos = EXCLUDED.repos`, id, record, repos)
		b.Queue("COMMIT")
		return c.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("pgstore: put agent %s: %w", id, err)
	}
	return nil
}

// agentSQL selects agent $1's record (null before its first heartbeat)
// and the labels granted it; no row when it has neither a token nor a
// record.
const agentSQL = `SELECT record, granted_labels, adopt_labels FROM agents WHERE id = $1`

// agentRow is a row of agentSQL, or of Agents'.
type agentRow struct {
	record, granted []byte
	adopt           bool
}

// fields are where a row scans to.
func (r *agentRow) fields() []any { return []any{&r.record, &r.granted, &r.adopt} }

// Agent returns agent id's record; ok is false when it has none.
func (s *Store) Agent(ctx context.Context, id string) (store.Agent, bool, error) {
	var row agentRow
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, agentSQL, id).Scan(row.fields()...)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Agent{}, false, nil
	}
	if err != nil {
		return store.Agent{}, false, fmt.Errorf("pgstore: agent %s: %w", id, err)
	}
	return decodeAgent(id, row)
}

// AgentAndLeased is Agent and Leased in one round trip (a batch of the
// two queries).
func (s *Store) AgentAndLeased(ctx context.Context, id string) (store.Agent, bool, []*state.Task, error) {
	var (
		row    agentRow
		leased []*state.Task
	)
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		row, leased = agentRow{}, nil
		var b pgx.Batch
		b.Queue(agentSQL, id).Query(func(rows pgx.Rows) error {
			_, err := pgx.ForEachRow(rows, row.fields(), func() error { return nil })
			return err
		})
		b.Queue(leasedSQL, id).Query(func(rows pgx.Rows) (err error) {
			leased, err = decodeRows(rows)
			return err
		})
		return c.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return store.Agent{}, false, nil, fmt.Errorf("pgstore: agent %s and its leases: %w", id, err)
	}
	a, ok, err := decodeAgent(id, row)
	if err != nil {
		return store.Agent{}, false, nil, err
	}
	return a, ok, leased, nil
}

// decodeAgent decodes agent id's stored row: its record (ok when it has
// one) and the labels granted it.
func decodeAgent(id string, row agentRow) (a store.Agent, ok bool, err error) {
	if row.record != nil {
		if err := json.Unmarshal(row.record, &a); err != nil {
			return store.Agent{}, false, fmt.Errorf("pgstore: agent %s: %w", id, err)
		}
	}
	if row.granted != nil {
		if err := json.Unmarshal(row.granted, &a.Granted); err != nil {
			return store.Agent{}, false, fmt.Errorf("pgstore: agent %s's granted labels: %w", id, err)
		}
	}
	a.AdoptLabels = row.adopt
	return a, row.record != nil, nil
}

// Agents returns the agents' records by id.
func (s *Store) Agents(ctx context.Context) ([]store.Agent, error) {
	var agents []store.Agent
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		agents = nil
		rows, err := c.Query(ctx, `SELECT id, record, granted_labels, adopt_labels FROM agents WHERE record IS NOT NULL ORDER BY id`)
		if err != nil {
			return err
		}
		var (
			id  string
			row agentRow
		)
		_, err = pgx.ForEachRow(rows, append([]any{&id}, row.fields()...), func() error {
			a, _, err := decodeAgent(id, row)
			if err != nil {
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
	return agents, nil
}

// GrantLabels sets and removes registered agent id's granted labels, in
// one statement that reads and writes the row under its lock: two
// grants at once, on two replicas, both count.
func (s *Store) GrantLabels(ctx context.Context, id string, set map[string]string, remove []string) (map[string]string, error) {
	if set == nil {
		set = map[string]string{}
	}
	if remove == nil {
		remove = []string{}
	}
	setJSON, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	var granted []byte
	err = s.write(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `UPDATE agents SET adopt_labels = false,
				granted_labels = convert_to(((coalesce(convert_from(granted_labels, 'UTF8')::jsonb, '{}'::jsonb) || $2::jsonb) - $3::text[])::text, 'UTF8')
			WHERE id = $1 AND token_hash IS NOT NULL RETURNING granted_labels`, id, string(setJSON), remove).Scan(&granted)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: grant labels to %s: %w", id, store.ErrNotRegistered)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: grant labels to %s: %w", id, err)
	}
	labels := map[string]string{}
	if err := json.Unmarshal(granted, &labels); err != nil {
		return nil, fmt.Errorf("pgstore: agent %s's granted labels: %w", id, err)
	}
	return labels, nil
}

// AdoptLabels grants agent id the labels it advertises, once, when it
// was registered before granted labels were kept (00006).
func (s *Store) AdoptLabels(ctx context.Context, id string, labels map[string]string) (bool, error) {
	b, err := json.Marshal(labels)
	if err != nil {
		return false, err
	}
	if labels == nil {
		b = []byte("{}")
	}
	var tag pgconn.CommandTag
	err = s.write(ctx, func(c *pgxpool.Conn) (err error) {
		tag, err = c.Exec(ctx, `UPDATE agents SET granted_labels = $2, adopt_labels = false
			WHERE id = $1 AND adopt_labels AND token_hash IS NOT NULL`, id, b)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: agent %s adopts its labels: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Serves reports whether an agent's record lists repository repo (the
// repositories' index answers it).
func (s *Store) Serves(ctx context.Context, repo string) (bool, error) {
	var ok bool
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agents WHERE repos @> ARRAY[$1::text])`, repo).Scan(&ok)
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: agents serving %s: %w", repo, err)
	}
	return ok, nil
}
