package pgstore

import (
	"context"
	"sync"
	"testing"

	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/internal/testkit"
)

// listening starts s listening (ListenQueued) until the test ends, and
// waits until its token cache is trusted.
func listening(t *testing.T, s *Store) {
	t.Helper()
	t.Cleanup(listen(t, s))
}

// listen starts s listening (ListenQueued), waits until its token cache
// is trusted, and returns what stops the listening and waits for it.
func listen(t *testing.T, s *Store) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.ListenQueued(ctx, func(int) {}) })
	testkit.WaitFor(t, "the store listens", func() bool { return isListening(s) })
	return func() { cancel(); wg.Wait() }
}

// isListening reports whether s's token cache is trusted: its listening
// session is up.
func isListening(s *Store) bool {
	s.tokens.mu.Lock()
	defer s.tokens.mu.Unlock()
	return s.tokens.listening
}

// agentOf is AgentByToken, failing the test on an error.
func agentOf(t *testing.T, s *Store, hash string) string {
	t.Helper()
	id, err := s.AgentByToken(context.Background(), hash)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A replica caches which agent a token is while it listens, and hears of
// a revocation or a new registration on another replica: the old token
// stops working there too, without its cache asked to forget.
func TestAReplicaHearsOfATokenRevokedOnAnother(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	a, b := open(t, dsn), open(t, dsn)
	listening(t, b)
	ctx := context.Background()
	if err := a.Register(ctx, "ag1", "hash-1", false); err != nil {
		t.Fatal(err)
	}
	if got := agentOf(t, b, "hash-1"); got != "ag1" {
		t.Fatalf("hash-1 on b: %q, want ag1", got)
	}
	b.tokens.mu.Lock()
	cached := b.tokens.byHash["hash-1"].id
	b.tokens.mu.Unlock()
	if cached != "ag1" {
		t.Fatalf("b's cache holds %q for hash-1, want ag1 (kept while it listens)", cached)
	}

	if ok, err := a.Revoke(ctx, "ag1"); err != nil || !ok {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	testkit.WaitFor(t, "b refuses the revoked token", func() bool { return agentOf(t, b, "hash-1") == "" })

	// Registered again with a new token (replace, as an agent's own token
	// renewing it does): the old one is refused everywhere.
	if err := a.Register(ctx, "ag1", "hash-2", false); err != nil {
		t.Fatal(err)
	}
	if got := agentOf(t, b, "hash-2"); got != "ag1" {
		t.Fatalf("hash-2 on b: %q, want ag1", got)
	}
	if err := a.Register(ctx, "ag1", "hash-3", true); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "b refuses the replaced token", func() bool { return agentOf(t, b, "hash-2") == "" })
	if got := agentOf(t, b, "hash-3"); got != "ag1" {
		t.Fatalf("hash-3 on b: %q, want ag1", got)
	}
}

// A store that does not listen caches nothing: a change it cannot hear
// of (made here behind the stores' backs) shows at once.
func TestAStoreThatDoesNotListenAsksTheDatabase(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if err := s.Register(ctx, "ag1", "hash-1", false); err != nil {
		t.Fatal(err)
	}
	if got := agentOf(t, s, "hash-1"); got != "ag1" {
		t.Fatalf("hash-1: %q, want ag1", got)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE agents SET token_hash = NULL WHERE id = 'ag1'`); err != nil {
		t.Fatal(err)
	}
	if got := agentOf(t, s, "hash-1"); got != "" {
		t.Fatalf("hash-1 after its row lost it: %q, want none", got)
	}
}

// Once the listening session ends, the cache is no longer trusted: what
// it held is forgotten and lookups ask the database again.
func TestTheTokenCacheEndsWithTheListening(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	stop := listen(t, s)
	if err := s.Register(context.Background(), "ag1", "hash-1", false); err != nil {
		t.Fatal(err)
	}
	agentOf(t, s, "hash-1")
	stop()
	if _, err := s.pool.Exec(context.Background(), `UPDATE agents SET token_hash = NULL WHERE id = 'ag1'`); err != nil {
		t.Fatal(err)
	}
	if got := agentOf(t, s, "hash-1"); got != "" {
		t.Fatalf("hash-1 after the listening ended and its row lost it: %q, want none", got)
	}
}

// A token revoked behind the stores' backs (an older replica, or a person
// with psql) is refused by a listening replica too: the trigger on the
// agents table tells every listening replica with the commit.
func TestATokenRevokedByHandIsRefusedByAListeningReplica(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	listening(t, s)
	ctx := context.Background()
	if err := s.Register(ctx, "ag1", "hash-1", false); err != nil {
		t.Fatal(err)
	}
	if got := agentOf(t, s, "hash-1"); got != "ag1" {
		t.Fatalf("hash-1: %q, want ag1", got)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE agents SET token_hash = NULL WHERE id = 'ag1'`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the token revoked by hand is refused", func() bool { return agentOf(t, s, "hash-1") == "" })
	if err := s.Register(ctx, "ag2", "hash-2", false); err != nil {
		t.Fatal(err)
	}
	agentOf(t, s, "hash-2")
	if _, err := s.pool.Exec(ctx, `DELETE FROM agents WHERE id = 'ag2'`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the token of an agent deleted by hand is refused", func() bool { return agentOf(t, s, "hash-2") == "" })
}
