package filestore

import (
	"io"
	"log/slog"
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/storetest"
	"github.com/edgeagent/agent/state"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Recover(func(*state.Task, []Missed) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return s
}

// The file store keeps the contract of package store.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, t.TempDir()) })
}

// What the file store committed is there after it is closed and opened
// again on its directory.
func TestConformanceAcrossReopen(t *testing.T) {
	t.Parallel()
	dirs := map[store.Store]string{}
	storetest.RunReopen(t, func(t *testing.T) store.Store {
		dir := t.TempDir()
		s := open(t, dir)
		dirs[s] = dir
		return s
	}, func(t *testing.T, old store.Store) store.Store {
		return open(t, dirs[old])
	})
}
