package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/agent/controlplane/store"
)

// The notifications are rows of their own (migration 00002), keyed by ID
// and target: a transaction inserts its own with its changes, before
// COMMIT, and a record stored already is left as it is (ON CONFLICT DO
// NOTHING).

const insertNotification = `INSERT INTO notifications (id, target, body, created, due, attempts, last_error, gate)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`

// queueNotifications queues the inserts of ns on b.
func queueNotifications(b *pgx.Batch, ns []store.Notification) {
	for _, n := range ns {
		b.Queue(insertNotification, n.ID, n.Target, n.Body, n.Created, n.Due, n.Attempts, n.LastError, n.Gate)
	}
}

// Notify stores ns in one statement batch, which PostgreSQL runs as one
// transaction: all of them or none. It is tried again when the
// connection broke, for a record stored already is left as it is.
func (s *Store) Notify(ctx context.Context, ns ...store.Notification) error {
	if len(ns) == 0 {
		return nil
	}
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		var b pgx.Batch
		queueNotifications(&b, ns)
		return c.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("pgstore: store notifications: %w", err)
	}
	return nil
}

// DueNotifications returns up to limit records due at or before now,
// the earliest due first: a walk of the index on due.
func (s *Store) DueNotifications(ctx context.Context, now time.Time, limit int) ([]store.Notification, error) {
	var out []store.Notification
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		out = out[:0]
		rows, err := c.Query(ctx, `SELECT id, target, body, created, due, attempts, last_error, gate FROM notifications
			WHERE due <= $1 ORDER BY due, id, target LIMIT $2`, now, limit)
		if err != nil {
			return err
		}
		var n store.Notification
		_, err = pgx.ForEachRow(rows, []any{&n.ID, &n.Target, &n.Body, &n.Created, &n.Due, &n.Attempts, &n.LastError, &n.Gate}, func() error {
			n.Created, n.Due = n.Created.UTC(), n.Due.UTC()
			out = append(out, n)
			n = store.Notification{}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: due notifications: %w", err)
	}
	return out, nil
}

// NotificationDone deletes a record; one that is gone is not an error.
func (s *Store) NotificationDone(ctx context.Context, id, target string) error {
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM notifications WHERE id = $1 AND target = $2`, id, target)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: notification %s done: %w", id, err)
	}
	return nil
}

// NotificationRetry counts a failed delivery and sets when the record is
// next due. A record that is gone (done meanwhile) is left gone.
func (s *Store) NotificationRetry(ctx context.Context, id, target string, due time.Time, lastErr string) error {
	err := s.write(ctx, func(c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `UPDATE notifications SET attempts = attempts + 1, due = $3, last_error = $4
			WHERE id = $1 AND target = $2`, id, target, due, lastErr)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: notification %s retry: %w", id, err)
	}
	return nil
}
