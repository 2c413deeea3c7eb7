package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
)

// memStore is an in-memory store.Notifier; it leads unless follows is set.
type memStore struct {
	mu      sync.Mutex
	recs    map[[2]string]store.Notification
	follows bool // not the leader
}

func newMemStore() *memStore { return &memStore{recs: map[[2]string]store.Notification{}} }

func (m *memStore) Lead(context.Context) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.follows, nil
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
	sort.Slice(out, func(i, j int) bool { return out[i].Due.Before(out[j].Due) })
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

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
