package storetest_test

import (
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/storetest"
)

// The suite passes a correct store.
func TestMemStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) store.Store { return newMemStore(nil, "") })
	storetest.RunReopen(t, func(*testing.T) store.Store { return newMemStore(nil, "") },
		func(_ *testing.T, s store.Store) store.Store { return newMemStore(s.(*memStore).d, "") })
}
