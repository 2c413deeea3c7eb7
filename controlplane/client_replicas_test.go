package controlplane_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
)

// replica is a stand-in control plane replica that counts what it was
// asked and answers with status (200 with an empty object by default).
type replica struct {
	srv    *httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	paths  []string
}

func newReplica(t *testing.T) *replica {
	t.Helper()
	r := &replica{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.mu.Unlock()
		if s := r.status.Load(); s != 0 {
			http.Error(w, `{"error":"down for the test"}`, int(s))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// asked is how many requests the replica took, and forgets them.
func (r *replica) asked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.paths)
	r.paths = nil
	return n
}

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// With several replicas the client talks to the first until it fails to
// answer (refused, 5xx), then to the next, and stays there while it
// answers (the first back meanwhile or not); a 4xx or a 429 moves
// nothing; a claim is not sent twice, but the next goes to the next
// replica.
func TestClientFailsOverBetweenReplicasAndSticks(t *testing.T) {
	a, b := newReplica(t), newReplica(t)
	var moves []string
	c, err := controlplane.NewClient(a.srv.URL+" , "+b.srv.URL, "operator-token-operator-token-0123", controlplane.ClientOptions{Tries: 1,
		Moved: func(from, to string, why error) { moves = append(moves, from+" -> "+to) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Task(ctx, "t-1"); err != nil || a.asked() != 1 || b.asked() != 0 || c.URL() != a.srv.URL {
		t.Fatalf("the first replica was not the one asked: %v", err)
	}

	a.status.Store(http.StatusBadGateway)
	if _, err := c.Task(ctx, "t-1"); err != nil {
		t.Fatalf("a read with the first replica answering 502: %v", err)
	}
	if a.asked() != 1 || b.asked() != 1 || c.URL() != b.srv.URL || len(moves) != 1 || moves[0] != a.srv.URL+" -> "+b.srv.URL {
		t.Fatalf("after a 502 the client talks to %s, moves %v", c.URL(), moves)
	}
	a.status.Store(0) // back: the client stays where it is
	for range 3 {
		if _, err := c.Task(ctx, "t-1"); err != nil {
			t.Fatal(err)
		}
	}
	if a.asked() != 0 || b.asked() != 3 {
		t.Fatal("the client did not stay with the replica that answers")
	}

	for _, s := range []int{http.StatusNotFound, http.StatusTooManyRequests} {
		b.status.Store(int32(s))
		if _, err := c.Task(ctx, "t-1"); statusOf(err) != s {
			t.Fatalf("answer %d: %v", s, err)
		}
		if a.asked() != 0 || b.asked() != 1 || c.URL() != b.srv.URL {
			t.Fatalf("answer %d moved the client to %s", s, c.URL())
		}
	}

	b.status.Store(http.StatusServiceUnavailable)
	_, err = c.Claim(ctx, api.ClaimRequest{AgentID: "a", Max: 1, RequestID: "r-1"})
	if statusOf(err) != http.StatusServiceUnavailable || a.asked() != 0 || b.asked() != 1 {
		t.Fatalf("a claim at a replica answering 503 was sent on (%v)", err)
	}
	if c.URL() != a.srv.URL {
		t.Fatalf("after a claim failed, the client talks to %s, want the next replica", c.URL())
	}
	if _, err := c.Claim(ctx, api.ClaimRequest{AgentID: "a", Max: 1, RequestID: "r-1"}); err != nil || a.asked() != 1 || b.asked() != 0 {
		t.Fatalf("the claim asked again did not go to the next replica: %v", err)
	}
}

// A replica that does not answer at all (nothing listens) is moved past
// at once; when none answers, the error is the last replica's.
func TestClientMovesPastAReplicaThatDoesNotAnswer(t *testing.T) {
	b := newReplica(t)
	dead := deadURL(t)
	c, err := controlplane.NewClient(dead+","+b.srv.URL, "operator-token-operator-token-0123", controlplane.ClientOptions{Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Task(context.Background(), "t-1"); err != nil || b.asked() != 1 || c.URL() != b.srv.URL {
		t.Fatalf("with the first replica down: %v, talking to %s", err, c.URL())
	}
	b.srv.Close()
	_, err = c.Task(context.Background(), "t-1")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("with every replica down: %v", err)
	}
	if got := c.URLs(); len(got) != 2 || got[0] != dead || got[1] != b.srv.URL {
		t.Errorf("URLs %v", got)
	}
}

// A list of URLs is checked as each one is, and refuses an empty one and
// a repeated one.
func TestClientRefusesABadListOfURLs(t *testing.T) {
	for _, c := range []struct{ list, want string }{
		{"http://127.0.0.1:1,", "an empty one between commas"},
		{"http://127.0.0.1:1,http://127.0.0.1:1/", "given twice"},
		{"http://127.0.0.1:1,http://cp.example.com", "not https"},
	} {
		if _, err := controlplane.NewClient(c.list, "operator-token-operator-token-0123", controlplane.ClientOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.list, err, c.want)
		}
	}
}
