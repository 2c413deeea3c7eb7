package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The console's revoked sessions are rows of console_revoked_sessions
// (migration 00007). They are not cached: a sign-out answered on one
// replica must hold on the next request to any other, which a cache
// emptied by a NOTIFY a moment after the commit would not promise; the
// lookup is one primary-key probe per console request, and people's
// requests are few.

// RevokeSession keeps nonce revoked until expires (the later expiry of
// two), and deletes the rows that expired at or before now, in one
// statement batch (one transaction). It is tried again when the
// connection broke: done twice, it leaves what once does.
func (s *Store) RevokeSession(ctx context.Context, nonce string, expires, now time.Time) error {
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		var b pgx.Batch
		b.Queue(`INSERT INTO console_revoked_sessions (nonce, expires) VALUES ($1, $2)
			ON CONFLICT (nonce) DO UPDATE SET expires = GREATEST(console_revoked_sessions.expires, EXCLUDED.expires)`, nonce, expires)
		b.Queue(`DELETE FROM console_revoked_sessions WHERE expires <= $1`, now)
		return c.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("pgstore: revoke a console session: %w", err)
	}
	return nil
}

// SessionRevoked reports whether nonce is kept revoked.
func (s *Store) SessionRevoked(ctx context.Context, nonce string) (bool, error) {
	var ok bool
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_revoked_sessions WHERE nonce = $1)`, nonce).Scan(&ok)
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: look up a console session: %w", err)
	}
	return ok, nil
}
