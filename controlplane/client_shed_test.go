package controlplane_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
)

// shedFirst answers the first n submits as a busy control plane does (503,
// Retry-After: 1, nothing done) and passes the rest to the control plane.
func shedFirst(n int64, seen *atomic.Int64) func(*server.Server, http.Handler) http.Handler {
	return func(_ *server.Server, real http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/v1/tasks" && seen.Add(1) <= n {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"error":"the control plane is busy: 32 submit requests in flight, its bound; nothing was done, send it again in 1s"}`))
				return
			}
			real.ServeHTTP(w, r)
		})
	}
}

// A submit the control plane shed was not done: the client sends it again
// (a submit is otherwise tried once), after the wait it was told, and the
// task is created once.
func TestASubmitShedIsSentAgainAfterRetryAfter(t *testing.T) {
	var seen atomic.Int64
	cp := servertest.Start(t, servertest.Options{Wrap: shedFirst(1, &seen)})
	c := cp.Operator // a person's client, the CLI's defaults
	start := time.Now()
	v, err := c.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "fix it"})
	if err != nil {
		t.Fatalf("a submit shed once: %v", err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("sent again after %v, before the second Retry-After asked", waited)
	}
	if n := seen.Load(); n != 2 {
		t.Errorf("%d submits sent, want 2", n)
	}
	tasks, err := c.Tasks(context.Background())
	if err != nil || len(tasks) != 1 || tasks[0].ID != v.ID {
		t.Fatalf("tasks %+v %v, want the one created", tasks, err)
	}
}

// Shed past its tries, a request fails with the wait the control plane
// asked, and jitter on it: at least the wait, at most half as much again.
func TestAShedSaysHowLongToWait(t *testing.T) {
	var seen atomic.Int64
	const op = "op-shed-0123456789abcdef0123456789abcdef"
	cp := servertest.Start(t, servertest.Options{Server: server.Options{OperatorTokens: []string{op}}, Wrap: shedFirst(10, &seen)})
	c, err := controlplane.NewClient(cp.URL, op, controlplane.ClientOptions{Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "fix it"})
	wait, ok := controlplane.Shed(err)
	if !ok || statusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("%v: not a shed", err)
	}
	if wait < time.Second || wait > 3*time.Second/2 {
		t.Errorf("wait %v, want 1 s to 1.5 s", wait)
	}
	if !controlplane.Transient(err) {
		t.Error("a shed is not transient")
	}
	if _, ok := controlplane.Shed(&controlplane.APIError{Status: http.StatusServiceUnavailable, Message: "the store failed"}); ok {
		t.Error("a 503 without Retry-After (the store failed, perhaps after committing) counts as shed")
	}
}
