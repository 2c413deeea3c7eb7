package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	cpserver "github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/store/filestore"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// fixture holds what the open and drain sections start from, made once
// per run through the product's public API: a control plane directory
// with one task claimed by one registered agent, that agent's data
// directory (its id, its token, the task's lease) and outboxes of n
// pending records of that task. Each measured run works on a copy.
type fixture struct {
	base       string
	token      string // the control plane's registration secret
	opToken    string // a person's operator token
	agentID    string
	agentToken string
	taskID     string
	leaseID    string
	serverTmpl string
	agentTmpl  string
	backlogs   map[int]string
}

// backlogPayload is a progress report of about 200 bytes.
var backlogPayload = json.RawMessage(`{"message":"` + strings.Repeat("step of the benchmark backlog; ", 5) + `","percent":50,"step":"bench"}`)

// server is a reference control plane on loopback, in this process.
type server struct {
	url  string
	s    *cpserver.Server
	st   *filestore.Store
	http *http.Server
	done chan struct{}
}

// benchOperatorToken is the benchmark's person.
const benchOperatorToken = "bench-operator-token-0123456789abcdef"

func startServer(dir, token string, heartbeat time.Duration) (*server, error) {
	st, err := filestore.Open(dir, filestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	s, err := cpserver.New(cpserver.Options{Store: st, Token: token, OperatorTokens: []string{benchOperatorToken}, Lease: 1000 * time.Hour,
		HeartbeatInterval: heartbeat, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		st.Close()
		return nil, err
	}
	srv := &server{url: "http://" + ln.Addr().String(), s: s, st: st, http: &http.Server{Handler: s.Handler()}, done: make(chan struct{})}
	go func() { defer close(srv.done); srv.http.Serve(ln) }()
	return srv, nil
}

func (s *server) stop() {
	s.http.Close()
	<-s.done
	s.s.Close()
	s.st.Close()
}

func newFixture(base string) (*fixture, error) {
	fx := &fixture{base: base, token: "bench-registration-secret-0123456789", opToken: benchOperatorToken, agentID: "bench-agent",
		serverTmpl: filepath.Join(base, "cp-template"), agentTmpl: filepath.Join(base, "agent-template"), backlogs: map[int]string{}}
	layout := datadir.Layout{Dir: fx.agentTmpl}
	if err := os.MkdirAll(layout.Dir, 0o700); err != nil {
		return nil, err
	}
	srv, err := startServer(fx.serverTmpl, fx.token, 0)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	ctx := context.Background()
	client, err := controlplane.NewClient(srv.url, fx.token, controlplane.ClientOptions{AgentID: fx.agentID,
		SaveAgentToken: func(tok string) error {
			fx.agentToken = tok
			return os.WriteFile(layout.AgentToken(), []byte(tok+"\n"), 0o600)
		}})
	if err != nil {
		return nil, err
	}
	person, err := controlplane.NewClient(srv.url, fx.opToken, controlplane.ClientOptions{})
	if err != nil {
		return nil, err
	}
	if _, err := person.CreateTask(ctx, api.CreateTaskRequest{Prompt: "benchmark drain"}); err != nil {
		return nil, fmt.Errorf("create task: %w", err)
	}
	claim, err := client.Claim(ctx, api.ClaimRequest{AgentID: fx.agentID, Max: 1, HealthGrade: "available"})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if len(claim.Tasks) != 1 || fx.agentToken == "" {
		return nil, fmt.Errorf("claim: %d tasks granted, agent token saved: %v", len(claim.Tasks), fx.agentToken != "")
	}
	task := claim.Tasks[0].Task
	if task.Lease == nil {
		task.Lease = &claim.Tasks[0].Lease
	}
	fx.taskID, fx.leaseID = task.ID, task.Lease.ID
	store, err := state.OpenStore(layout.Tasks())
	if err != nil {
		return nil, err
	}
	if err := store.Save(&task); err != nil {
		return nil, err
	}
	return fx, os.WriteFile(layout.AgentID(), []byte(fx.agentID+"\n"), 0o600)
}

// backlog returns an outbox directory with n pending records of the
// fixture's task, appended by 256 writers (made once, then reused).
func (fx *fixture) backlog(n int) (string, error) {
	if dir, ok := fx.backlogs[n]; ok {
		return dir, nil
	}
	dir := filepath.Join(fx.base, fmt.Sprintf("backlog-%d", n))
	o, err := outbox.Open(dir, outbox.Options{CompactMinBytes: math.MaxInt64})
	if err != nil {
		return "", err
	}
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		first atomic.Pointer[error]
	)
	for range 256 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				r := outbox.Record{Kind: outbox.KindProgress, TaskID: fx.taskID, Attempt: 1, Payload: backlogPayload}
				if _, err := o.Append(r); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := o.Close(); err != nil {
		return "", err
	}
	if e := first.Load(); e != nil {
		return "", *e
	}
	fx.backlogs[n] = dir
	return dir, nil
}

// markSent marks the oldest n pending records of the outbox in dir sent,
// 500 at a time as the sender would, with compaction off so the file
// keeps them.
func markSent(dir string, n int) error {
	o, err := outbox.Open(dir, outbox.Options{CompactMinBytes: math.MaxInt64})
	if err != nil {
		return err
	}
	for done := 0; done < n; {
		recs, err := o.Pending(min(500, n-done), math.MaxInt)
		if err != nil || len(recs) == 0 {
			o.Close()
			return fmt.Errorf("mark sent: %d of %d: %v", done, n, err)
		}
		seqs := make([]uint64, len(recs))
		for i, r := range recs {
			seqs[i] = r.Seq
		}
		if err := o.MarkSent(seqs...); err != nil {
			o.Close()
			return err
		}
		done += len(recs)
	}
	return o.Close()
}

// events reads the pending records of an outbox as the control plane's
// events, for the raw POST loop.
func (fx *fixture) events(dir string) ([]api.Event, error) {
	o, err := outbox.Open(dir, outbox.Options{CompactMinBytes: math.MaxInt64})
	if err != nil {
		return nil, err
	}
	defer o.Close()
	recs, err := o.Pending(math.MaxInt, math.MaxInt)
	if err != nil {
		return nil, err
	}
	evs := make([]api.Event, len(recs))
	for i, r := range recs {
		evs[i] = api.Event{Key: r.Key, Kind: state.EventKind(r.Kind), TaskID: r.TaskID, Attempt: r.Attempt,
			LeaseID: fx.leaseID, CreatedAt: r.CreatedAt, Payload: r.Payload}
	}
	return evs, nil
}
