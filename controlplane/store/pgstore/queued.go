package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// queuedChannel is the channel of PostgreSQL's NOTIFY on which a store
// says it queued tasks: "STORE-ID:N", sent by its notifier after the
// commits that queued them.
const queuedChannel = "edgeagent_queued"

// newStoreID names a store in its notifications, so that it does not
// hear its own.
func newStoreID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// queuedNote is the notification of n tasks queued by this store.
func (s *Store) queuedNote(n int) string { return s.id + ":" + strconv.Itoa(n) }

// newlyQueued counts the saved tasks that are queued and were not when
// the transaction locked them (or did not exist).
func (t *tx) newlyQueued() int {
	n := 0
	for id, task := range t.saved {
		if task.Phase == state.PhaseQueued && t.phases[id] != state.PhaseQueued {
			n++
		}
	}
	return n
}

// ListenQueued calls fn, from a goroutine of its own, each time another
// store on the database (another replica) queued tasks: with how many,
// or with 0 when it may have missed some (its session broke, and it
// listens again on a new one). It returns when ctx ends. While it
// listens, the store also caches which agent each token is (tokens.go),
// and knows when nothing is queued (queueView).
func (s *Store) ListenQueued(ctx context.Context, fn func(n int)) {
	wait := time.Second
	for ctx.Err() == nil {
		err := s.listen(ctx, fn)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("pgstore: listening for tasks queued elsewhere failed; again in a moment", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
		fn(0) // some may have been missed meanwhile
	}
}

// listen listens on a session of its own until it breaks or ctx ends:
// for tasks queued elsewhere, and for agents' tokens changed (tokens.go),
// whose cache it keeps trusted while it listens.
func (s *Store) listen(ctx context.Context, fn func(n int)) error {
	conn, err := pgx.ConnectConfig(ctx, s.lead.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+queuedChannel+"; LISTEN "+tokensChannel); err != nil {
		return err
	}
	s.tokens.reset(true)
	s.queue.reset(true)
	defer s.tokens.reset(false)
	defer s.queue.reset(false)
	for {
		n, err := waitForNotification(ctx, conn, s.listenCheck)
		if err != nil {
			return err
		}
		if n.Channel == tokensChannel {
			s.tokens.changed()
			continue
		}
		s.queue.queued() // this store's own too: it may have raced a look
		from, count, ok := strings.Cut(n.Payload, ":")
		if !ok {
			return fmt.Errorf("a notification on %s that is not STORE:N: %q", queuedChannel, n.Payload)
		}
		if from == s.id {
			continue // its own: the server woke its claims already
		}
		if c, err := strconv.Atoi(count); err == nil && c > 0 {
			fn(c)
		}
	}
}

// queueView knows, while the store listens, that no task is queued: most
// claims then need not ask the database. A claim that found the queue
// empty says so (sawEmpty); every task queued since, by this store (its
// commit) or another (its notification), makes it unknown again
// (queued). gen counts those, so that an empty queue seen by a look that
// raced a task queued is not kept. Tasks are queued only by commits
// that announce them (Create, and a transaction's commit: newlyQueued),
// so a task queued anywhere reaches the view a moment after its commit,
// unless its replica died before its notifier told it: then within
// emptyMaxAge.
//
// An empty queue seen is trusted for emptyMaxAge: the bound on a word
// missed by a listening session that died silently, or a task queued by
// hand in the database.
type queueView struct {
	mu         sync.Mutex
	gen        uint64
	empty      bool      // nothing queued, as of gen
	emptyUntil time.Time // and until then
	listening  bool
	maxAge     time.Duration // emptyMaxAge unless set (tests)
}

// emptyMaxAge is how long an empty queue seen is trusted.
const emptyMaxAge = time.Second

// known reports whether the queue is known to be empty, and the
// generation to hand to sawEmpty after looking.
func (q *queueView) known() (empty bool, gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.listening && q.empty && time.Now().Before(q.emptyUntil), q.gen
}

// sawEmpty records that a look begun at gen found nothing queued.
func (q *queueView) sawEmpty(gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.listening && q.gen == gen {
		age := q.maxAge
		if age == 0 {
			age = emptyMaxAge
		}
		q.empty, q.emptyUntil = true, time.Now().Add(age)
	}
}

// queued records that tasks may have been queued.
func (q *queueView) queued() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gen++
	q.empty = false
}

// reset forgets what the view knew, as the store starts or stops
// listening.
func (q *queueView) reset(listening bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gen++
	q.empty = false
	q.listening = listening
}

// listenCheck is how long a listening session may be silent before it is
// asked whether it is alive: one that died without a word (its host gone,
// a firewall dropping the flow) would otherwise be noticed only by TCP's
// keepalive, minutes later, while the caches it keeps trusted go stale.
const listenCheck = 10 * time.Second

// waitForNotification waits for conn's next notification, pinging the
// session after each silence of check (listenCheck when 0; 5 s to
// answer): an error when it does not answer, or when ctx ends.
func waitForNotification(ctx context.Context, conn *pgx.Conn, check time.Duration) (*pgconn.Notification, error) {
	if check == 0 {
		check = listenCheck
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, check)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil || ctx.Err() != nil || wctx.Err() == nil {
			return n, err
		}
		// Silent for listenCheck: a timeout leaves the session usable.
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("the listening session did not answer: %w", err)
		}
	}
}

// The word that tasks were queued goes out after their commit, not with
// it: PostgreSQL takes one cluster-wide lock for every committing
// transaction that sent a NOTIFY and holds it through the commit's flush
// to disk, so a NOTIFY in every transaction that queues a task (each
// submit, release, lapse) made those commits one at a time, whichever
// replica sent them. Instead each store has one notifier: a commit that
// queued tasks adds them to its count (announce), and the notifier sends
// one NOTIFY, outside any other transaction, for all those counted since
// its last: at most one such commit at a time per replica, however many
// tasks are queued.
//
// A word can now be lost (the replica dies between the commit and its
// NOTIFY, or the NOTIFY fails): the other replicas trust an empty queue
// they saw for a second only (queueView), and their claims waiting for
// work look again every second (the server's poll for a listening
// store), so a task queued elsewhere is still seen within a second or so.

// notifier is a store's count of tasks queued and not yet told.
type notifier struct {
	mu      sync.Mutex
	pending int
	wake    chan struct{} // a count is pending
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// announce counts n tasks queued by a commit of this store, told the
// other replicas by the notifier a moment later.
func (s *Store) announce(n int) {
	if n <= 0 {
		return
	}
	s.notifier.mu.Lock()
	s.notifier.pending += n
	s.notifier.mu.Unlock()
	select {
	case s.notifier.wake <- struct{}{}:
	default:
	}
}

// startNotifier starts the store's notifier; Close stops it.
func (s *Store) startNotifier() {
	ctx, cancel := context.WithCancel(context.Background())
	s.notifier.wake, s.notifier.stop = make(chan struct{}, 1), cancel
	s.notifier.wake <- struct{}{} // what was counted before it started
	s.notifier.done.Go(func() { s.runNotifier(ctx) })
}

// stopNotifier stops the notifier, once it told what was pending (within
// a few seconds).
func (s *Store) stopNotifier() {
	if s.notifier.stop == nil {
		return
	}
	s.notifier.stop()
	s.notifier.done.Wait()
}

// runNotifier sends what is counted, a NOTIFY at a time, until ctx ends;
// a NOTIFY that failed is sent again a moment later, with what was
// counted meanwhile.
func (s *Store) runNotifier(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			// What was counted last still goes, if it can go quickly.
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.tell(fctx)
			cancel()
			return
		case <-s.notifier.wake:
		}
		if !s.tell(ctx) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
				s.notifier.wake <- struct{}{} // the notifier alone receives: room is there
			}
		}
	}
}

// tell sends one NOTIFY of every task counted since the last; on a
// failure the count is kept for the next. It reports whether it sent or
// had nothing to send.
func (s *Store) tell(ctx context.Context) bool {
	s.notifier.mu.Lock()
	n := s.notifier.pending
	s.notifier.pending = 0
	s.notifier.mu.Unlock()
	if n == 0 {
		return true
	}
	// Ahead of other work: one at a time, and what claims elsewhere wait
	// for.
	err := s.write(store.WithPriority(ctx, true), func(c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_notify($1, $2)`, queuedChannel, s.queuedNote(n))
		return err
	})
	if err != nil {
		s.notifier.mu.Lock()
		s.notifier.pending += n
		s.notifier.mu.Unlock()
		if ctx.Err() == nil {
			s.log.Warn("pgstore: telling other replicas of tasks queued failed; again in a moment", "tasks", n, "err", err)
		}
		return false
	}
	return true
}
