package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/testkit"
)

// memStore is an in-memory store.Notifier; it leads unless follows is set.
type memStore struct {
	mu      sync.Mutex
	recs    map[[2]string]store.Notification
	gates   map[[2]string]store.NotifyGate
	follows bool // not the leader
	leads   int  // the Lead calls: one a round
}

func newMemStore() *memStore {
	return &memStore{recs: map[[2]string]store.Notification{}, gates: map[[2]string]store.NotifyGate{}}
}

func (m *memStore) NotifyGates(_ context.Context, target string, keys []string) ([]store.NotifyGate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.NotifyGate
	for _, k := range keys {
		if g, ok := m.gates[[2]string{target, k}]; ok {
			out = append(out, g)
		}
	}
	return out, nil
}

func (m *memStore) PutNotifyGates(_ context.Context, gates ...store.NotifyGate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range gates {
		if m.gates[[2]string{g.Target, g.Key}].Rev != g.Rev {
			return store.ErrGateMoved
		}
	}
	for _, g := range gates {
		g.Rev++
		m.gates[[2]string{g.Target, g.Key}] = g
	}
	return nil
}

func (m *memStore) FoldNotification(_ context.Context, n store.Notification, g store.NotifyGate, fold func(*store.Notification)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gates[[2]string{g.Target, g.Key}].Rev != g.Rev {
		return store.ErrGateMoved
	}
	held, ok := m.recs[[2]string{g.Held, n.Target}]
	if g.Held == "" || !ok {
		held = n
	}
	id := held.ID
	fold(&held)
	held.ID, held.Target = id, n.Target
	if held.ID != n.ID {
		delete(m.recs, [2]string{n.ID, n.Target})
	}
	m.recs[[2]string{held.ID, held.Target}] = held
	g.Held, g.Rev = held.ID, g.Rev+1
	m.gates[[2]string{g.Target, g.Key}] = g
	return nil
}

func (m *memStore) PruneNotifyGates(_ context.Context, before time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, g := range m.gates {
		if _, holds := m.recs[[2]string{g.Held, g.Target}]; g.Until.Before(before) && (g.Held == "" || !holds) {
			delete(m.gates, k)
		}
	}
	return nil
}

func (m *memStore) Lead(context.Context) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leads++
	return !m.follows, nil
}

// rounds waits until the loop began n more rounds.
func (m *memStore) rounds(t *testing.T, n int) {
	t.Helper()
	m.mu.Lock()
	until := m.leads + n
	m.mu.Unlock()
	testkit.WaitFor(t, fmt.Sprintf("%d rounds", n), func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.leads >= until })
}

func (m *memStore) Notify(_ context.Context, ns ...store.Notification) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, n := range ns {
		k := [2]string{n.ID, n.Target}
		if _, ok := m.recs[k]; !ok {
			m.recs[k] = n
		}
	}
	return nil
}

func (m *memStore) DueNotifications(_ context.Context, now time.Time, limit int) ([]store.Notification, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Notification
	for _, n := range m.recs {
		if !n.Due.After(now) {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b store.Notification) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Target, b.Target))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memStore) NotificationDone(_ context.Context, id, target string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, [2]string{id, target})
	return nil
}

func (m *memStore) NotificationRetry(_ context.Context, id, target string, due time.Time, lastErr string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{id, target}
	if n, ok := m.recs[k]; ok {
		n.Attempts++
		n.Due, n.LastError = due, lastErr
		m.recs[k] = n
	}
	return nil
}

func (m *memStore) get(id, target string) (store.Notification, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.recs[[2]string{id, target}]
	return n, ok
}

func (m *memStore) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// clock is a clock tests move.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// delivery is a request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a loopback HTTP receiver that answers status and keeps
// what it got.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []delivery
	status int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{status: http.StatusOK}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{req.Header.Clone(), body})
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) setStatus(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = code
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

var testSecret = []byte("0123456789abcdef0123456789abcdef-test")

// record is a stored notification of event for target.
func record(t *testing.T, id, target string, e api.NotifyEvent, at time.Time) store.Notification {
	t.Helper()
	body, err := json.Marshal(api.Notification{ID: id, Event: e, At: at, Text: "Task t1 \"fix <the> build\" & more completed",
		Link: "https://cp.example.com/console/tasks/t1", Task: &api.NotifiedTask{ID: "t1", Title: "fix the build", Phase: "completed"}})
	if err != nil {
		t.Fatal(err)
	}
	return store.Notification{ID: id, Target: target, Body: body, Created: at, Due: at}
}
