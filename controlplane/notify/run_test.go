package notify

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/testkit"
)

// syncBuffer is a log buffer the loop's goroutines write concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runLoop runs Run until the test ends, and waits for it to return.
func runLoop(t *testing.T, st Store, targets []Target, opts Options) *syncBuffer {
	t.Helper()
	logs := &syncBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.Interval == 0 {
		opts.Interval = 2 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, st, targets, opts) }()
	t.Cleanup(func() { cancel(); <-done })
	return logs
}

func TestBackoff(t *testing.T) {
	for attempts, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second,
		7: 320 * time.Second, 8: 10 * time.Minute, 50: 10 * time.Minute} {
		if got := Backoff(attempts, DefaultMinBackoff, DefaultMaxBackoff); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", attempts, got, want)
		}
	}
}

// A target that fails is tried again after the backoff, doubling, and
// not before; once it answers 2xx the record leaves the store. Every try
// carries the same id.
func TestRetryWithBackoff(t *testing.T) {
	r := newReceiver(t)
	r.setStatus(http.StatusServiceUnavailable)
	clk := &clock{now: time.Unix(1767225600, 0)}
	st := newMemStore()
	st.Notify(context.Background(), record(t, "n1", "hooks", api.NotifyFailed, clk.Now()))
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	counts := NewCounts([]Target{target})
	logs := runLoop(t, st, []Target{target}, Options{Now: clk.Now, Jitter: func(d time.Duration) time.Duration { return d }, Counts: counts})

	tries := func() int { return len(r.deliveries()) }
	testkit.WaitFor(t, "the first try", func() bool { n, _ := st.get("n1", "hooks"); return n.Attempts == 1 })
	n, _ := st.get("n1", "hooks")
	if want := clk.Now().Add(5 * time.Second); !n.Due.Equal(want) || n.LastError != "503 Service Unavailable" {
		t.Fatalf("after a failure: due %s, last error %q; want %s, 503", n.Due, n.LastError, want)
	}
	// Not due yet: nothing is sent however often the loop looks.
	clk.Add(4 * time.Second)
	for _, d := range []time.Duration{time.Second, 10 * time.Second} {
		before := tries()
		clk.Add(d)
		testkit.WaitFor(t, "the next try", func() bool { n, _ := st.get("n1", "hooks"); return n.Attempts == before+1 })
		if tries() != before+1 {
			t.Fatalf("%d tries, want %d", tries(), before+1)
		}
	}
	n, _ = st.get("n1", "hooks")
	if want := clk.Now().Add(20 * time.Second); !n.Due.Equal(want) {
		t.Fatalf("after 3 failures due %s, want %s (5 s doubling)", n.Due, want)
	}
	r.setStatus(http.StatusNoContent)
	clk.Add(20 * time.Second)
	testkit.WaitFor(t, "the delivery", func() bool { return st.len() == 0 })
	got := r.deliveries()
	if len(got) != 4 {
		t.Fatalf("%d tries, want 4", len(got))
	}
	if c := counts.ByTarget()["hooks"]; c["failed"] != 3 || c["delivered"] != 1 || c["given_up"] != 0 || len(c) != len(Results) {
		t.Errorf("counts %v, want 3 failed, 1 delivered, and every result", c)
	}
	for _, d := range got {
		if id := d.header.Get(HeaderID); id != "n1" {
			t.Errorf("a try carries id %q, want n1", id)
		}
	}
	if s := logs.String(); strings.Contains(s, r.URL) || strings.Contains(s, string(testSecret)) {
		t.Errorf("the log holds the URL or the secret:\n%s", s)
	}
}

// A record that still fails MaxAge after it was written is given up on,
// with one error line, and leaves the store.
func TestGiveUpAfterMaxAge(t *testing.T) {
	r := newReceiver(t)
	r.setStatus(http.StatusInternalServerError)
	clk := &clock{now: time.Unix(1767225600, 0)}
	st := newMemStore()
	st.Notify(context.Background(), record(t, "n1", "hooks", api.NotifyFailed, clk.Now()))
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	counts := NewCounts([]Target{target})
	logs := runLoop(t, st, []Target{target}, Options{Now: clk.Now, MaxAge: time.Hour, Counts: counts})
	testkit.WaitFor(t, "the first try", func() bool { n, _ := st.get("n1", "hooks"); return n.Attempts == 1 })
	clk.Add(time.Hour)
	testkit.WaitFor(t, "the record to be given up on", func() bool { return st.len() == 0 })
	if c := counts.ByTarget()["hooks"]; c["failed"] != 1 || c["given_up"] != 1 {
		t.Errorf("counts %v, want 1 failed, 1 given up", c)
	}
	if n := strings.Count(logs.String(), "notification given up on"); n != 1 {
		t.Errorf("%d give-up lines, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"notification given up on\" target=hooks id=n1 attempts=2") {
		t.Errorf("the give-up line does not say which:\n%s", logs)
	}
}

// Only the leader sends; a record for a target no longer configured is
// dropped, with one warning for the target.
func TestLeaderOnlyAndUnknownTargets(t *testing.T) {
	r := newReceiver(t)
	clk := &clock{now: time.Unix(1767225600, 0)}
	st := newMemStore()
	st.follows = true
	ctx := context.Background()
	st.Notify(ctx, record(t, "n1", "hooks", api.NotifyFailed, clk.Now()),
		record(t, "n1", "gone", api.NotifyFailed, clk.Now()), record(t, "n2", "gone", api.NotifyFailed, clk.Now()))
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL, Secret: testSecret}
	wake := make(chan struct{})
	counts := NewCounts([]Target{target})
	logs := runLoop(t, st, []Target{target}, Options{Now: clk.Now, Wake: wake, Interval: time.Hour, Counts: counts})
	// Woken, as a follower: it looks, and sends nothing. (The wake is
	// taken only when the loop waits, so after the first pass.)
	wake <- struct{}{}
	wake <- struct{}{}
	if n := len(r.deliveries()); n != 0 || st.len() != 3 {
		t.Fatalf("a follower sent %d, left %d of 3 records", n, st.len())
	}
	st.mu.Lock()
	st.follows = false
	st.mu.Unlock()
	wake <- struct{}{}
	testkit.WaitFor(t, "the records to go", func() bool { return st.len() == 0 })
	if n := len(r.deliveries()); n != 1 {
		t.Errorf("the receiver got %d, want 1", n)
	}
	if c := counts.ByTarget(); c["gone"]["dropped"] != 2 || c["hooks"]["delivered"] != 1 {
		t.Errorf("counts %v, want 2 dropped for gone, 1 delivered to hooks", c)
	}
	if n := strings.Count(logs.String(), "target no longer configured"); n != 1 {
		t.Errorf("%d warnings for the unknown target, want 1:\n%s", n, logs)
	}
}

// Deliveries run a few at a time, and a hanging one ends at the
// send timeout without holding the others.
func TestHangingTargetDoesNotHoldOthers(t *testing.T) {
	release := make(chan struct{})
	hang := newReceiver(t)
	hang.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	fine := newReceiver(t)
	clk := &clock{now: time.Unix(1767225600, 0)}
	st := newMemStore()
	st.Notify(context.Background(), record(t, "n1", "slow", api.NotifyFailed, clk.Now()), record(t, "n1", "fine", api.NotifyFailed, clk.Now()))
	targets := []Target{{Name: "slow", Kind: Webhook, URL: hang.URL, Secret: testSecret}, {Name: "fine", Kind: Webhook, URL: fine.URL, Secret: testSecret}}
	runLoop(t, st, targets, Options{Now: clk.Now, SendTimeout: 200 * time.Millisecond})
	testkit.WaitFor(t, "the slow target's timeout", func() bool { n, ok := st.get("n1", "slow"); return ok && n.Attempts == 1 })
	if _, ok := st.get("n1", "fine"); ok {
		t.Error("the fine target's record is still there")
	}
	n, _ := st.get("n1", "slow")
	if !strings.Contains(n.LastError, "no answer within the timeout") {
		t.Errorf("last error %q", n.LastError)
	}
}
