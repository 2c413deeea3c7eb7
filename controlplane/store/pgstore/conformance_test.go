package pgstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/storetest"
	"github.com/edgeagent/agent/internal/pgtest"
)

// TestConformance runs the stores' conformance suite against the
// PostgreSQL store, each subtest on a database of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		dsns = map[store.Store]string{}
	)
	openDB := func(t *testing.T, dsn string) store.Store {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := Open(ctx, dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		dsns[s] = dsn
		mu.Unlock()
		return s
	}
	open := func(t *testing.T) store.Store { return openDB(t, pgtest.Start(t)) }
	storetest.Run(t, open)
	storetest.RunReopen(t, open, func(t *testing.T, s store.Store) store.Store {
		mu.Lock()
		dsn := dsns[s]
		mu.Unlock()
		return openDB(t, dsn)
	})
}
