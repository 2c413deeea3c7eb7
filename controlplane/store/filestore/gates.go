package filestore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
)

// The notification gates (store.NotifyGate) are kept with the records,
// in memory and in the notification log (notify.go): a write is a line,
// synced before the call returns.

// gateKey names a gate: its target and key.
type gateKey struct{ target, key string }

// applyGates applies a gates, fold or ungate line; false: the line makes
// no sense.
func (l *notifyLog) applyGates(e noteLine) bool {
	switch e.Op {
	case "fold":
		if e.N == nil || e.N.ID == "" {
			return false
		}
		if e.ID != e.N.ID || e.Target != e.N.Target {
			delete(l.queue, noteKey{e.ID, e.Target})
		}
		l.queue[noteKey{e.N.ID, e.N.Target}] = *e.N
		fallthrough
	case "gates":
		for _, g := range e.Gates {
			l.gates[gateKey{g.Target, g.Key}] = g
		}
	case "ungate":
		for _, g := range e.Gates {
			delete(l.gates, gateKey{g.Target, g.Key})
		}
	}
	return true
}

// sortedGates is every gate, by target then key.
func (l *notifyLog) sortedGates() []store.NotifyGate {
	out := make([]store.NotifyGate, 0, len(l.gates))
	for _, g := range l.gates {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b store.NotifyGate) int {
		return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// moved reports whether a gate is no longer at g.Rev; mu is held.
func (l *notifyLog) moved(g store.NotifyGate) bool {
	return l.gates[gateKey{g.Target, g.Key}].Rev != g.Rev
}

// NotifyGates returns target's gates named keys, those stored: from
// memory.
func (s *Store) NotifyGates(_ context.Context, target string, keys []string) ([]store.NotifyGate, error) {
	l := s.notes
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []store.NotifyGate
	for _, k := range keys {
		if g, ok := l.gates[gateKey{target, k}]; ok {
			out = append(out, g)
		}
	}
	return out, nil
}

// PutNotifyGates stores gates still at their Rev, each at Rev+1, in one
// line; ErrGateMoved, and nothing written, when one moved.
func (s *Store) PutNotifyGates(_ context.Context, gates ...store.NotifyGate) error {
	if len(gates) == 0 {
		return nil
	}
	l := s.notes
	l.mu.Lock()
	defer l.mu.Unlock()
	next := make([]store.NotifyGate, len(gates))
	for i, g := range gates {
		if l.moved(g) {
			return store.ErrGateMoved
		}
		g.Rev++
		next[i] = g
	}
	if err := l.write([]noteLine{{Op: "gates", Gates: next}}); err != nil {
		return fmt.Errorf("controlplane: notification gates: %w", err)
	}
	return nil
}

// FoldNotification folds n into the record g holds (n itself when it
// holds none that is stored), in one line.
func (s *Store) FoldNotification(_ context.Context, n store.Notification, g store.NotifyGate, fold func(held *store.Notification)) error {
	l := s.notes
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.moved(g) {
		return store.ErrGateMoved
	}
	held, ok := l.queue[noteKey{g.Held, n.Target}]
	if g.Held == "" || !ok {
		held = n
	}
	held.Body = slices.Clone(held.Body)
	id := held.ID
	fold(&held)
	held.ID, held.Target = id, n.Target
	g.Held, g.Rev = held.ID, g.Rev+1
	e := noteLine{Op: "fold", N: &held, ID: n.ID, Target: n.Target, Gates: []store.NotifyGate{g}}
	if err := l.write([]noteLine{e}); err != nil {
		return fmt.Errorf("controlplane: fold notification %s: %w", n.ID, err)
	}
	return nil
}

// PruneNotifyGates removes the gates whose window ended before before and
// whose held record (if any) is gone, in one line.
func (s *Store) PruneNotifyGates(_ context.Context, before time.Time) error {
	l := s.notes
	l.mu.Lock()
	defer l.mu.Unlock()
	var gone []store.NotifyGate
	for k, g := range l.gates {
		if _, holds := l.queue[noteKey{g.Held, k.target}]; g.Until.Before(before) && (g.Held == "" || !holds) {
			gone = append(gone, store.NotifyGate{Target: k.target, Key: k.key})
		}
	}
	if len(gone) == 0 {
		return nil
	}
	slices.SortFunc(gone, func(a, b store.NotifyGate) int {
		return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(a.Key, b.Key))
	})
	if err := l.write([]noteLine{{Op: "ungate", Gates: gone}}); err != nil {
		return fmt.Errorf("controlplane: prune notification gates: %w", err)
	}
	return nil
}
