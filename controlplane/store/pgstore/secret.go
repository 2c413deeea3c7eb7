package pgstore

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Secret returns the secret name from the secrets table, made by the
// first replica that asks: its insert wins, every other replica's is
// dropped, and each then reads the one stored (in a statement of its
// own, which sees the winner's commit).
func (s *Store) Secret(ctx context.Context, name string, size int) ([]byte, error) {
	if name == "" || size <= 0 {
		return nil, fmt.Errorf("pgstore: secret %q of %d bytes: want a name and a size above 0", name, size)
	}
	fresh := make([]byte, size)
	rand.Read(fresh)
	var key []byte
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		if _, err := c.Exec(ctx, `INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, fresh); err != nil {
			return err
		}
		return c.QueryRow(ctx, `SELECT value FROM secrets WHERE name = $1`, name).Scan(&key)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: secret %s: %w", name, err)
	}
	if len(key) != size {
		return nil, fmt.Errorf("pgstore: secret %s is %d bytes, not %d", name, len(key), size)
	}
	return key, nil
}
