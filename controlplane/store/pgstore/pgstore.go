// Package pgstore keeps the control plane's records in PostgreSQL, shared
// by any number of control plane replicas: the store.Store a fleet runs
// on.
//
// A task is a row holding its JSON document and the columns its indexes
// need (phase, repository, lease holder, creation and end), rewritten
// whole on every save; an event is a row keyed by its task and
// idempotency key; an agent is a row with its token hash and its latest
// record. The schema is in embedded migrations, applied by Open.
//
// How the store keeps store.Store's promises:
//
//   - Update is one transaction: it locks the named tasks (SELECT … FOR
//     UPDATE, in id order, so two Updates never deadlock each other), runs
//     fn, then writes the events and the saved tasks in one round trip and
//     commits. PostgreSQL's row locks hold across replicas.
//   - Claim locks queued tasks oldest first with FOR UPDATE SKIP LOCKED: a
//     task another transaction holds is skipped, and no two claims lock
//     the same task.
//   - An event's key is its row's primary key: Seen is a lookup in the
//     transaction, which sees what committed before it locked the task.
//   - A transaction's notifications (Tx.Notify) are rows of the table
//     notifications, inserted in its commit's batch (ON CONFLICT DO
//     NOTHING: a record stored already is left as it is).
//   - A commit returns once PostgreSQL has flushed it (synchronous_commit
//     on; Open turns it on for its sessions where the server has it off),
//     but PutAgent's: an agent's record is a heartbeat's, sent again at
//     the next, and is not waited for (the store contract allows it).
//   - A heartbeat (Beat, store.Beater) is one transaction on one
//     connection, of a quarter as many again as the pool's size kept for
//     heartbeats: other work waits for its turn within the pool's size
//     (pool.go).
//   - While the store listens (ListenQueued), it caches which agent a
//     token is (tokens.go) and knows when nothing is queued (queueView):
//     every change of a token hash sends a NOTIFY with its commit, and
//     every task queued one a moment after (one notifier per store, no
//     NOTIFY in the committing transaction: queued.go), which empties
//     what every listening replica knew.
//   - Lead holds a session-level advisory lock on a connection of its own:
//     PostgreSQL frees it when that session ends (the replica died, closed
//     or lost its connection), and another replica's next Lead takes it.
//
// Errors say what the store was doing ("pgstore: update tasks: …") and
// never carry the DSN's password.
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configure a Store. Zero fields take the defaults their comments
// give.
type Options struct {
	// MaxConns caps the connections of the store's pool that work other
	// than heartbeats shares; heartbeats have a quarter as many more of
	// their own (pool.go), and the lead's and the listener's sessions
	// are two more. Default: the DSN's
	// pool_max_conns, else 4*GOMAXPROCS+8. A request holds a connection
	// while it waits for PostgreSQL (a commit waits for its disk), so the
	// pool is several times the CPUs: with 2*GOMAXPROCS+2 (6 on 2 CPUs)
	// 10,000 agents' requests queued for connections, p99 in seconds,
	// where 16 held it to tens of milliseconds.
	MaxConns int32
	// Logger hears of migrations applied, the lead taken and lost, and
	// transactions tried again. Default: nothing is logged.
	Logger *slog.Logger
}

// Names the store's sessions go by in pg_stat_activity, unless the DSN
// names them (application_name).
const (
	appName     = "edgeagent-controlplane"
	leadAppName = "edgeagent-controlplane-lead"
)

// Store is a store.Store in PostgreSQL. Its methods are safe for
// concurrent use.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	lead lead
	id   string // names it in its notifications (queued.go)

	// registered counts the agents this store registered: the agents
	// table is analyzed again as they double (Register).
	registered atomic.Int64
	// tokens caches AgentByToken while the store listens (tokens.go).
	tokens tokenCache
	// queue knows, while the store listens, that nothing is queued.
	queue queueView
	// gate keeps connections for heartbeats, and counts waits (pool.go).
	gate *poolGate
	// notifier tells other replicas of tasks queued, after the commits
	// (queued.go).
	notifier notifier
	// listenCheck, when set, replaces the constant (tests).
	listenCheck time.Duration

	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects to the database dsn names (a postgres:// URL or key=value
// settings, as libpq takes them), brings its schema up to date (replicas
// opening at once take turns: goose holds an advisory lock while it
// migrates), and returns the store. The database must exist.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors hide the password.
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	} else if !hasSetting(dsn, "pool_max_conns") {
		cfg.MaxConns = int32(4*runtime.GOMAXPROCS(0) + 8)
	}
	// Heartbeats' connections come on top of the pool other work shares
	// (pool.go): kept from it, they would cut what a replica commits at
	// once by a quarter.
	gate := newPoolGate(cfg.MaxConns)
	cfg.MaxConns += gate.reserve
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = appName
	}

	if err := migrate(ctx, cfg.ConnConfig, log); err != nil {
		return nil, err
	}
	if err := checkDurable(ctx, cfg, log); err != nil {
		return nil, err
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s := &Store{pool: pool, log: log, id: newStoreID(), gate: gate}
	s.lead.cfg = leadConfig(cfg.ConnConfig)
	s.lead.log = log
	s.startNotifier()
	return s, nil
}

// hasSetting reports whether dsn sets name (a URL's query or a key=value
// setting).
func hasSetting(dsn, name string) bool {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return false
	}
	_, ok := cfg.RuntimeParams[name]
	return ok
}

// migrate applies the embedded migrations the database lacks.
func migrate(ctx context.Context, cc *pgx.ConnConfig, log *slog.Logger) error {
	db := stdlib.OpenDB(*cc.Copy())
	defer db.Close()
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	// Replicas opening at once: the first migrates, the others wait for
	// it (a try every second, for up to five minutes).
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true), goose.WithSlog(log))
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	for _, r := range results {
		log.Info("pgstore: schema migrated", "version", r.Source.Version, "file", r.Source.Path, "took", r.Duration)
	}
	return nil
}

// checkDurable makes the store's sessions commit durably where the
// server's default says otherwise (synchronous_commit off): the store
// promises that what it answered as done is on disk.
func checkDurable(ctx context.Context, cfg *pgxpool.Config, log *slog.Logger) error {
	if _, ok := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; ok {
		return nil // the DSN says; the operator chose
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("pgstore: open: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var sc string
	if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sc); err != nil {
		return fmt.Errorf("pgstore: open: %w", err)
	}
	if sc == "off" {
		log.Warn("pgstore: the server's synchronous_commit is off; the store's sessions turn it on")
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	}
	return nil
}

// Close releases the store: the lead (if this store held it) and every
// connection. Calls after it fail.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopNotifier() // what it counted told first, while the pool is open
		s.lead.close()
		s.pool.Close()
	})
	return nil
}

// Shared is true: other replicas change the database too.
func (s *Store) Shared() bool { return true }

// maxTries bounds how often a transaction runs when PostgreSQL breaks it
// for a deadlock or a serialization failure, or its connection broke
// before its commit was sent.
const maxTries = 5

// conflict reports whether PostgreSQL broke a transaction for a deadlock
// or a serialization failure: it did not commit, and may run again.
func conflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// withConn runs f on a connection of the pool. When f failed because the
// connection broke (PostgreSQL restarted, failed over, or ended the
// session), the pool's idle connections are likely broken too: they are
// closed, and the next calls connect anew. When retry is set (f only
// reads), f then runs once more, on a new connection.
func (s *Store) withConn(ctx context.Context, retry bool, f func(*pgxpool.Conn) error) error {
	for try := 1; ; try++ {
		c, release, err := s.acquire(ctx)
		if err != nil {
			return err
		}
		err = f(c)
		broken := err != nil && c.Conn().IsClosed() && ctx.Err() == nil
		release()
		if !broken {
			return err
		}
		s.pool.Reset()
		if !retry || try == 2 {
			return err
		}
		s.log.Debug("pgstore: a connection broke; trying on a new one", "err", err)
	}
}

// read runs f, which only reads, as withConn does, once more on a new
// connection if its connection broke.
func (s *Store) read(ctx context.Context, f func(*pgxpool.Conn) error) error {
	return s.withConn(ctx, true, f)
}

// write runs f, which writes, as withConn does: once.
func (s *Store) write(ctx context.Context, f func(*pgxpool.Conn) error) error {
	return s.withConn(ctx, false, f)
}

// inTx runs fn in a transaction (tx: fn commits it with tx.commit, which
// sends COMMIT with the transaction's writes). A transaction that did not
// commit runs again, from the start, in a new one (up to maxTries runs):
// when PostgreSQL broke it (a deadlock, a serialization failure), or when
// its connection broke before its commit was sent. One whose connection
// broke while its commit was on its way is not run again, for it may
// have committed: its error is returned. fn's own errors (fnError) end it
// at once: the transaction is rolled back and the error returned as it
// is.
func (s *Store) inTx(ctx context.Context, op string, fn func(*tx) error) error {
	for try := 1; ; try++ {
		var again bool
		err := s.withConn(ctx, false, func(c *pgxpool.Conn) error {
			t := newTx(ctx, c.Conn(), s)
			err := fn(t)
			if err != nil && t.begun && !t.done && !c.Conn().IsClosed() {
				// Rolled back, so the connection goes back to the pool
				// clean; if this fails, the pool drops the connection.
				_, _ = c.Conn().Exec(context.WithoutCancel(ctx), "ROLLBACK")
			}
			again = conflict(err) || !t.commitSent && c.Conn().IsClosed() || pgconn.SafeToRetry(err)
			return err
		})
		var fe fnError
		if errors.As(err, &fe) {
			return fe.err
		}
		if err == nil {
			return nil
		}
		if !again || try == maxTries || ctx.Err() != nil {
			return fmt.Errorf("pgstore: %s: %w", op, err)
		}
		s.log.Debug("pgstore: transaction runs again", "op", op, "try", try, "err", err)
		if conflict(err) {
			time.Sleep(time.Duration(rand.Int64N(int64(5*time.Millisecond) << try)))
		}
	}
}

// fnError carries the error of a caller's function out of a transaction,
// unwrapped and untouched.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// nanos is t in nanoseconds since 1970, clamped to int64 (the zero time
// is the smallest).
func nanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// columns are a task's derived columns, from its document.
type columns struct {
	created    int64
	phase      string
	repo       string
	leaseAgent *string
	endedAt    *time.Time
}

func columnsOf(t *state.Task) columns {
	c := columns{created: nanos(t.CreatedAt), phase: string(t.Phase), repo: t.Repo}
	if t.Lease != nil {
		c.leaseAgent = &t.Lease.AgentID
	}
	if t.Phase.Terminal() {
		e := state.EndedAt(t)
		c.endedAt = &e
	}
	return c
}
