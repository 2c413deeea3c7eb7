package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// leadLockID is the advisory lock the replicas' watchdogs take turns on
// ("edgelead" in ASCII). Advisory locks are per database: control planes
// on two databases of one server do not meet.
const leadLockID int64 = 0x656467656c656164

// lead is a store's hold on the lead: a session of its own, outside the
// pool, which holds the advisory lock while this replica leads.
type lead struct {
	cfg *pgx.ConnConfig
	log *slog.Logger

	mu     sync.Mutex
	conn   *pgx.Conn // nil until the first Lead, and after a failure
	held   bool      // conn holds the lock
	closed bool
}

// leadConfig is the pool's connection settings for the lead's session,
// which the server drops (and the lock with it) within half a minute of
// its client going silent, not TCP's default two hours.
func leadConfig(cc *pgx.ConnConfig) *pgx.ConnConfig {
	cfg := cc.Copy()
	if cfg.RuntimeParams["application_name"] == appName {
		cfg.RuntimeParams["application_name"] = leadAppName
	}
	for k, v := range map[string]string{"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"} {
		if _, ok := cfg.RuntimeParams[k]; !ok {
			cfg.RuntimeParams[k] = v
		}
	}
	return cfg
}

// Lead reports whether this replica runs the watchdog: whether its lead
// session holds the advisory lock. A replica that holds it checks that
// its session is alive (a round trip); one whose session broke has lost
// the lock with it, reports false, and tries to take it again on its next
// call. One that does not hold it tries to take it, without waiting.
// Errors (the database unreachable) come with false.
func (s *Store) Lead(ctx context.Context) (bool, error) {
	l := &s.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, errors.New("pgstore: lead: the store is closed")
	}
	if l.conn != nil && l.held {
		if err := l.conn.Ping(ctx); err == nil {
			return true, nil
		}
		l.log.Warn("pgstore: lost the lead: its session broke")
		l.drop()
		return false, nil
	}
	var ok bool
	// A session kept from an earlier try may have broken since: one
	// failure on it is tried again on a new one.
	fresh := l.conn == nil || l.conn.IsClosed()
	for {
		if l.conn == nil || l.conn.IsClosed() {
			l.drop()
			conn, err := pgx.ConnectConfig(ctx, l.cfg)
			if err != nil {
				return false, fmt.Errorf("pgstore: lead: %w", err)
			}
			l.conn = conn
		}
		err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, leadLockID).Scan(&ok)
		if err == nil {
			break
		}
		l.drop()
		if fresh || ctx.Err() != nil {
			return false, fmt.Errorf("pgstore: lead: %w", err)
		}
		fresh = true
	}
	if ok {
		l.held = true
		l.log.Info("pgstore: took the lead")
	}
	return ok, nil
}

// drop closes the lead's session; the lock, if it held it, goes with it.
func (l *lead) drop() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = l.conn.Close(ctx)
		cancel()
	}
	l.conn, l.held = nil, false
}

// close ends the lead's session for good: another replica's next Lead
// takes over.
func (l *lead) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop()
	l.closed = true
}
