package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// The control plane grants a claim, and its answer is lost on the way (the
// connection drops after the server acted). The agent asks again with the
// same claim id, gets the same grant, and runs the task once: it is not
// stranded in claimed, and no second attempt is spent.
func TestLostClaimAnswerStrandsNothing(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		claimIDs []string
		dropped  bool
	)
	loseAnAnswer := func(_ *server.Server, real http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/tasks/claim" {
				real.ServeHTTP(w, r)
				return
			}
			body, _ := io.ReadAll(r.Body)
			var req api.ClaimRequest
			_ = json.Unmarshal(body, &req)
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := httptest.NewRecorder()
			real.ServeHTTP(rec, r) // the control plane acts
			var resp api.ClaimResponse
			_ = json.Unmarshal(rec.Body.Bytes(), &resp)
			mu.Lock()
			claimIDs = append(claimIDs, req.RequestID)
			drop := !dropped && len(resp.Tasks) > 0
			dropped = dropped || drop
			mu.Unlock()
			if drop {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close() // the answer is lost
				}
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})
	}
	// A long heartbeat interval: the control plane's own reconcile (which
	// would requeue the task after two heartbeats) stays out of this test.
	cp := servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: time.Hour}, Wrap: loseAnAnswer})
	client := cp.Operator
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_PKG_SAMPLE=1", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{ControlPlane: cp.URL, Token: servertest.RegistrationToken, DataDir: t.TempDir(), Executor: exe,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, Logger: quiet()}
	task, err := client.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "@output hello"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	v := waitTerminal(t, client, task.ID)
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
		t.Fatalf("task %s with %d attempts, want completed with one", v.Phase, len(v.Attempts))
	}
	mu.Lock()
	defer mu.Unlock()
	if !dropped || len(claimIDs) < 2 || claimIDs[0] != claimIDs[1] {
		t.Fatalf("claims %v: want the lost one asked again with the same id", claimIDs)
	}
}

// A control plane that grants more than asked: the agent runs what it
// asked for and releases the rest, which goes back to the queue and runs
// later; nothing is run twice or dropped.
func TestGrantLargerThanAskedIsReleased(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		released []string
	)
	growAndWatch := func(_ *server.Server, real http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/tasks/claim":
				var req api.ClaimRequest
				body, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(body, &req)
				req.Max++ // a control plane that grants one more than asked
				body, _ = json.Marshal(req)
				r.Body = io.NopCloser(bytes.NewReader(body))
			case "/v1/tasks/release":
				body, _ := io.ReadAll(r.Body)
				var req api.ReleaseRequest
				_ = json.Unmarshal(body, &req)
				mu.Lock()
				released = append(released, req.TaskIDs...)
				mu.Unlock()
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			real.ServeHTTP(w, r)
		})
	}
	cp := servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: 100 * time.Millisecond}, Wrap: growAndWatch})
	client := cp.Operator
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_PKG_SAMPLE=1", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		v, err := client.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "@output hello"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	a, err := New(Config{ControlPlane: cp.URL, Token: servertest.RegistrationToken, DataDir: t.TempDir(), Executor: exe, MaxConcurrent: 1,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	for _, id := range ids {
		if v := waitTerminal(t, client, id); v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
			t.Errorf("task %s: %s with %d attempts", id, v.Phase, len(v.Attempts))
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(released) == 0 {
		t.Fatal("nothing was released: the agent took more than it asked for")
	}
}

// An agent announces the repositories it serves, by name, in its claims
// and heartbeats: the control plane lists them with the agent and routes
// tasks that name one to it.
func TestClaimsAndHeartbeatsAnnounceTheRepositories(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		claims [][]string
	)
	watch := func(_ *server.Server, real http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/tasks/claim" {
				body, _ := io.ReadAll(r.Body)
				var req api.ClaimRequest
				_ = json.Unmarshal(body, &req)
				mu.Lock()
				claims = append(claims, req.Repos)
				mu.Unlock()
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			real.ServeHTTP(w, r)
		})
	}
	cp := servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: 100 * time.Millisecond}, Wrap: watch})
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_PKG_SAMPLE=1", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{ControlPlane: cp.URL, Token: servertest.RegistrationToken, DataDir: t.TempDir(), Executor: exe,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, Logger: quiet(),
		Repos: []workspace.Repo{{Name: "site", Path: gittest.NewRepo(t)}, {Name: "infra", Path: gittest.NewRepo(t)}}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()
	testkit.WaitFor(t, "the agent listed with repos site, infra, having claimed", func() bool {
		agents, err := cp.Operator.Agents(context.Background())
		mu.Lock()
		n := len(claims)
		mu.Unlock()
		return err == nil && len(agents) == 1 && slices.Equal(agents[0].Repos, []string{"site", "infra"}) && n > 0
	})
	mu.Lock()
	defer mu.Unlock()
	for _, repos := range claims {
		if !slices.Equal(repos, []string{"site", "infra"}) {
			t.Fatalf("a claim announced %v, want site, infra", repos)
		}
	}
}

// An agent that confines its tasks refuses to serve a repository they
// could write (in /tmp, or in an --isolation-write hierarchy): a task
// there could rewrite its config and hooks, which the agent and the
// person run. Unconfined, every repository is as writable, and said so.
func TestARepositoryTasksCanWriteIsNotServed(t *testing.T) {
	t.Parallel()
	if landlock.ABI() == 0 {
		t.Fatal("no Landlock on this kernel: these machines have it; the refusal cannot be checked without")
	}
	inTmp := filepath.Join(t.TempDir(), "repo")
	gittest.Git(t, t.TempDir(), "init", "-q", inTmp)
	cache := gittest.OutOfReach(t)
	inCache := filepath.Join(cache, "repo")
	gittest.Git(t, t.TempDir(), "init", "-q", inCache)
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_PKG_SAMPLE=1"}})
	if err != nil {
		t.Fatal(err)
	}
	base := Config{ControlPlane: "http://127.0.0.1:1", Token: "t", DataDir: t.TempDir(), Executor: exe, Logger: quiet()}
	for _, c := range []struct {
		repo  string
		iso   isolation.Config
		wants string
	}{
		{inTmp, isolation.Config{}, `repository "app": ` + inTmp + " is in /tmp, which every confined task may write"},
		{inCache, isolation.Config{Write: []string{cache}}, `repository "app": ` + inCache + " is in " + cache + ", which every confined task may write"},
		{inCache, isolation.Config{}, ""},
		{inTmp, isolation.Config{Mode: isolation.None}, ""},
	} {
		cfg := base
		cfg.Repos, cfg.Isolation = []workspace.Repo{{Name: "app", Path: c.repo}}, c.iso
		_, err := New(cfg)
		switch {
		case c.wants == "" && err != nil:
			t.Errorf("%s with %+v: %v", c.repo, c.iso, err)
		case c.wants != "" && (!errors.Is(err, ErrConfig) || !errors.Is(err, workspace.ErrBadRepo) || !strings.Contains(fmt.Sprint(err), c.wants)):
			t.Errorf("%s with %+v: %v; want a bad repository, saying %q", c.repo, c.iso, err, c.wants)
		}
	}
}
