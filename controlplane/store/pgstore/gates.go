package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/agent/controlplane/store"
)

// The notification gates are rows of notify_gates (migrations 00007, 00008),
// keyed by target and gate_key. Only the replica that leads writes them
// (its deliverer); a write is conditional on the row's rev, so that a
// replica that led a moment ago and writes late changes nothing.

// NotifyGates returns target's gates named keys, those stored.
func (s *Store) NotifyGates(ctx context.Context, target string, keys []string) ([]store.NotifyGate, error) {
	var out []store.NotifyGate
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		out = out[:0]
		rows, err := c.Query(ctx, `SELECT gate_key, ends, sent, passed, held, rev FROM notify_gates
			WHERE target = $1 AND gate_key = ANY($2) ORDER BY gate_key`, target, keys)
		if err != nil {
			return err
		}
		g := store.NotifyGate{Target: target}
		_, err = pgx.ForEachRow(rows, []any{&g.Key, &g.Until, &g.Sent, &g.Passed, &g.Held, &g.Rev}, func() error {
			g.Until = g.Until.UTC()
			out = append(out, g)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: notification gates: %w", err)
	}
	return out, nil
}

// putGate writes g at g.Rev+1 in tx if it is still at g.Rev (absent for
// 0): store.ErrGateMoved otherwise.
func putGate(ctx context.Context, tx pgx.Tx, g store.NotifyGate) error {
	var sql string
	if g.Rev == 0 {
		sql = `INSERT INTO notify_gates (target, gate_key, ends, sent, passed, held, rev) VALUES ($1, $2, $3, $4, $5, $6, 1)
			ON CONFLICT DO NOTHING`
	} else {
		sql = `UPDATE notify_gates SET ends = $3, sent = $4, passed = $5, held = $6, rev = rev + 1
			WHERE target = $1 AND gate_key = $2 AND rev = $7`
	}
	passed := g.Passed
	if passed == nil {
		passed = []string{}
	}
	args := []any{g.Target, g.Key, g.Until, g.Sent, passed, g.Held}
	if g.Rev != 0 {
		args = append(args, g.Rev)
	}
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return store.ErrGateMoved
	}
	return nil
}

// PutNotifyGates stores gates still at their Rev, in one transaction.
func (s *Store) PutNotifyGates(ctx context.Context, gates ...store.NotifyGate) error {
	if len(gates) == 0 {
		return nil
	}
	err := s.write(ctx, func(c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			for _, g := range gates {
				if err := putGate(ctx, tx, g); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if errors.Is(err, store.ErrGateMoved) {
		return store.ErrGateMoved
	}
	if err != nil {
		return fmt.Errorf("pgstore: notification gates: %w", err)
	}
	return nil
}

// FoldNotification folds n into the record g holds, in one transaction:
// the held record is locked (FOR UPDATE) while fold changes it.
func (s *Store) FoldNotification(ctx context.Context, n store.Notification, g store.NotifyGate, fold func(held *store.Notification)) error {
	err := s.write(ctx, func(c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			held := n
			if g.Held != "" {
				h := store.Notification{ID: g.Held, Target: n.Target}
				err := tx.QueryRow(ctx, `SELECT body, created, due, attempts, last_error, gate FROM notifications
					WHERE id = $1 AND target = $2 FOR UPDATE`, g.Held, n.Target).Scan(&h.Body, &h.Created, &h.Due, &h.Attempts, &h.LastError, &h.Gate)
				switch {
				case err == nil:
					h.Created, h.Due = h.Created.UTC(), h.Due.UTC()
					held = h
				case !errors.Is(err, pgx.ErrNoRows):
					return err
				}
			}
			id := held.ID
			fold(&held)
			held.ID, held.Target = id, n.Target
			g.Held = held.ID
			if err := putGate(ctx, tx, g); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO notifications (id, target, body, created, due, attempts, last_error, gate)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id, target) DO UPDATE SET body = EXCLUDED.body,
				created = EXCLUDED.created, due = EXCLUDED.due, attempts = EXCLUDED.attempts, last_error = EXCLUDED.last_error, gate = EXCLUDED.gate`,
				held.ID, held.Target, held.Body, held.Created, held.Due, held.Attempts, held.LastError, held.Gate); err != nil {
				return err
			}
			if held.ID != n.ID {
				if _, err := tx.Exec(ctx, `DELETE FROM notifications WHERE id = $1 AND target = $2`, n.ID, n.Target); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if errors.Is(err, store.ErrGateMoved) {
		return store.ErrGateMoved
	}
	if err != nil {
		return fmt.Errorf("pgstore: fold notification %s: %w", n.ID, err)
	}
	return nil
}

// PruneNotifyGates deletes the gates whose window ended before before and
// whose held record (if any) is gone.
func (s *Store) PruneNotifyGates(ctx context.Context, before time.Time) error {
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM notify_gates g WHERE ends < $1 AND (held = '' OR NOT EXISTS
			(SELECT 1 FROM notifications n WHERE n.id = g.held AND n.target = g.target))`, before)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: prune notification gates: %w", err)
	}
	return nil
}
