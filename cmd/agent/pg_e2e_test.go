package main

// End-to-end tests of the control plane over PostgreSQL: real control
// plane processes (agent controlplane serve --store postgres://…), real
// agents and the sample executor, against a throwaway cluster (pgtest).
// Where PostgreSQL is not installed they are skipped in one line (failed
// under CI).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// rrProxy is a round-robin reverse proxy in front of control plane
// replicas, as a load balancer would be: each request goes to the next
// replica; one that refuses the connection (nothing reached it) is
// skipped for the one after. A request a replica took and never answered
// (it died with the request) is answered 502, and the agent retries it.
type rrProxy struct {
	backends []string // host:port
	next     atomic.Uint64
	tr       *http.Transport

	mu       sync.Mutex
	inFlight map[string]int // requests sent and not answered, by backend
	served   map[string]int // answers, by backend
	skipped  int            // tries a refused connection passed on
	failed   int            // requests answered 502
}

func (p *rrProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	start := p.next.Add(1)
	var err error
	for i := range len(p.backends) {
		host := p.backends[(start+uint64(i))%uint64(len(p.backends))]
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.Host = "http", host, host
		if r.Body != nil {
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		p.mu.Lock()
		p.inFlight[host]++
		p.mu.Unlock()
		var resp *http.Response
		resp, err = p.tr.RoundTrip(out)
		p.mu.Lock()
		p.inFlight[host]--
		switch {
		case err == nil:
			p.served[host]++
		case refused(err):
			p.skipped++
		default:
			p.failed++
		}
		p.mu.Unlock()
		if err == nil || !refused(err) {
			return resp, err
		}
	}
	p.mu.Lock()
	p.failed++
	p.mu.Unlock()
	return nil, err
}

// refused reports whether err is a connection that was never made: the
// request reached nobody, and another replica may take it.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// busy reports whether backend has a request in flight.
func (p *rrProxy) busy(backend string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight[backend] > 0
}

func (p *rrProxy) figures() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var per []string
	for _, b := range p.backends {
		per = append(per, fmt.Sprint(p.served[b]))
	}
	return fmt.Sprintf("%s answered per replica, %d refused connections passed on, %d answered 502", strings.Join(per, "/"), p.skipped, p.failed)
}

// startProxy serves a round-robin proxy over the replicas' addresses on
// loopback, closed when the test ends.
func startProxy(t *testing.T, backends ...string) (*rrProxy, string) {
	t.Helper()
	p := &rrProxy{backends: backends, served: map[string]int{}, inFlight: map[string]int{},
		tr: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) {}, // RoundTrip picks the replica
		Transport: p,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	hs := httptest.NewServer(rp)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		p.tr.CloseIdleConnections()
	})
	return p, strings.TrimPrefix(hs.URL, "http://")
}

// behind is the control plane as seen through addr (a proxy in front of
// replicas), with the tokens of c.
func behind(t *testing.T, c *cp, addr string) *cp {
	t.Helper()
	tok, err := os.ReadFile(c.operatorFile)
	if err != nil {
		t.Fatal(err)
	}
	client, err := controlplane.NewClient("http://"+addr, strings.TrimSpace(string(tok)), controlplane.ClientOptions{Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &cp{addr: addr, dir: c.dir, tokenFile: c.tokenFile, operatorFile: c.operatorFile, client: client}
}

// markedPrompt is a task that writes "start" and "end" lines to its
// marker file around a little progress, output and a sleep: the file
// counts the task's runs, and shows two that overlapped.
func markedPrompt(i int, mark string) string {
	return fmt.Sprintf("Task %d\n@sh echo start >> %s\n@progress 3\n@output half way %d\n@sleep 300ms\n@progress 2\n@sh echo end >> %s\n@output done %d",
		i, mark, i, mark, i)
}

// submitMarked submits n marked tasks through c and returns their ids and
// marker files.
func submitMarked(t *testing.T, c *cp, markDir string, n int) (ids, marks []string) {
	t.Helper()
	for i := range n {
		mark := filepath.Join(markDir, fmt.Sprintf("task-%d", i))
		ids = append(ids, submit(t, c, markedPrompt(i, mark)))
		marks = append(marks, mark)
	}
	return ids, marks
}

// countEnded counts the tasks in a terminal phase, -1 when c did not
// answer.
func countEnded(c *cp, ids []string) int {
	n := 0
	for _, id := range ids {
		v, err := c.client.Task(context.Background(), id)
		if err != nil {
			return -1
		}
		if v.Phase.Terminal() {
			n++
		}
	}
	return n
}

// checkRanOnce checks what is guaranteed once every task has ended and
// the agents' outboxes drained: each task completed in one attempt, run
// once (its marker), by one agent (its events and the agents' data
// directories), its events stored once each and exactly those its agent
// wrote; no outbox holds a dead record.
func checkRanOnce(t *testing.T, c *cp, ids, marks, agentDirs []string) (events int) {
	t.Helper()
	for _, d := range agentDirs {
		testkit.WaitFor(t, "the outbox of "+d+" to drain", func() bool {
			s, err := outbox.Inspect(outboxview.Dir(d))
			return err == nil && s.Stats.Pending == 0
		})
	}
	written := map[string]int{} // records, by task, of every agent
	ranBy := map[string][]int{} // the agents that hold the task
	for n, d := range agentDirs {
		snap, err := outbox.Inspect(outboxview.Dir(d))
		if err != nil {
			t.Fatal(err)
		}
		if snap.Stats.Dead != 0 {
			for _, it := range snap.Items {
				if it.State == outbox.StateDead {
					t.Errorf("agent %d: dead record %d %s of task %s: %s", n, it.Seq, it.Kind, it.TaskID, it.Reason)
				}
			}
		}
		for _, it := range snap.Items {
			written[it.TaskID]++
		}
		tasks, err := datadir.LoadTasks(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			ranBy[task.ID] = append(ranBy[task.ID], n)
		}
	}
	for i, id := range ids {
		v := c.task(t, id)
		if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 || v.Attempts[0].Status != state.AttemptCompleted {
			t.Errorf("task %s: %s (%s), %d attempts", id, v.Phase, v.PhaseReason, len(v.Attempts))
		}
		if b, err := os.ReadFile(marks[i]); err != nil || string(b) != "start\nend\n" {
			t.Errorf("task %s ran other than once: its marker holds %q (%v)", id, b, err)
		}
		if len(ranBy[id]) != 1 {
			t.Errorf("task %s is in the data directories of agents %v", id, ranBy[id])
		}
		evs := c.events(t, id) // fails on a key stored twice
		agents := map[string]bool{}
		for _, e := range evs {
			agents[e.AgentID] = true
		}
		if len(agents) != 1 {
			t.Errorf("task %s: events from %d agents %v", id, len(agents), agents)
		}
		if len(evs) != written[id] {
			t.Errorf("task %s: the agents wrote %d records, the control plane holds %d events", id, written[id], len(evs))
		}
		events += len(evs)
	}
	return events
}

// TestE2EReplicasOnPostgres runs two control plane replicas on one
// database behind a round-robin proxy, three agents through it, and kills
// the replica that leads (runs the watchdog) with SIGKILL mid-load. The
// agents go on with the other; every task completes in one attempt, run
// once by one agent, its events stored once; the lead moves to the
// survivor; the killed replica, started again, serves.
//
// What is guaranteed: the agents heartbeat through the survivor all
// along, so no lease lapses (the watchdog lapses only an expired lease of
// an offline agent), and no task runs twice. A request the killed replica
// had taken is either committed (the agent's retry is a duplicate by its
// key, or the same claim's grant again by its request id) or not (the
// retry applies it): none is lost, none applied twice.
func TestE2EReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	addrA, dirA := freeAddr(t), t.TempDir()
	a := startCP(t, addrA, dirA, "--store", dsn)
	// The same secrets on both: agents and people hold one of each.
	shared := []string{"--store", dsn, "--token-file", a.tokenFile, "--operator-token-file", a.operatorFile}
	b := startCP(t, freeAddr(t), t.TempDir(), shared...)
	proxy, front := startProxy(t, a.addr, b.addr)
	c := behind(t, a, front)

	markDir := t.TempDir()
	var (
		agentDirs []string
		agents    []*proc
	)
	for range 3 {
		d := t.TempDir()
		agentDirs = append(agentDirs, d)
		agents = append(agents, startAgentProc(t, c, d, "--isolation-write", markDir))
	}
	const tasks = 30
	ids, marks := submitMarked(t, c, markDir, tasks)

	// The lead is A's, which took it first; unless it moved already.
	testkit.WaitFor(t, "a replica to take the lead", func() bool {
		return strings.Contains(a.output(), "took the lead") || strings.Contains(b.output(), "took the lead")
	})
	leader, other := a, b
	if !strings.Contains(a.output(), "took the lead") {
		leader, other = b, a
	}
	testkit.WaitFor(t, "a third of the tasks to end", func() bool { return countEnded(c, ids) >= tasks/3 })
	endedAtKill := countEnded(c, ids)
	// Killed with requests in flight, if it has any within a few
	// seconds: their answers are lost, and the agents ask again.
	testkit.Until(5*time.Second, func() bool { return proxy.busy(leader.addr) })
	leader.kill()
	killed := time.Now()

	for _, id := range ids {
		c.waitDone(t, id)
	}
	drained := time.Since(killed)
	testkit.WaitFor(t, "the survivor to take the lead", func() bool { return strings.Contains(other.output(), "took the lead") })
	events := checkRanOnce(t, c, ids, marks, agentDirs)

	// Started again on its directory, the killed replica serves: the
	// tasks as the other replica has them, and a new one run to the end.
	again := startCP(t, leader.addr, leader.dir, shared...)
	all, err := again.client.Tasks(context.Background())
	if err != nil || len(all) != tasks {
		t.Fatalf("the restarted replica lists %d tasks (%v), want %d", len(all), err, tasks)
	}
	for _, v := range all {
		if v.Phase != state.PhaseCompleted {
			t.Errorf("the restarted replica shows task %s %s", v.ID, v.Phase)
		}
	}
	last := submit(t, again, markedPrompt(tasks, filepath.Join(markDir, "last")))
	if v := again.waitDone(t, last); v.Phase != state.PhaseCompleted {
		t.Errorf("a task submitted to the restarted replica ended %s", v.Phase)
	}
	// One replica leads, the survivor: the restarted one does not take
	// the lead while it is held.
	if n := leadHolders(t, dsn); n != 1 {
		t.Errorf("%d sessions hold the lead, want 1", n)
	}
	if strings.Contains(again.output(), "took the lead") {
		t.Errorf("the restarted replica took the lead the survivor holds:\n%s", tail(again.output(), 2000))
	}
	reclaims := 0 // claims whose answer was lost, asked again with their id
	for _, ag := range agents {
		reclaims += strings.Count(ag.output(), "claim failed; it is asked again with the same id")
	}
	t.Logf("FAULT | 2 replicas on PostgreSQL behind a round-robin proxy, 3 agents, %d tasks; the leading replica SIGKILLed with %d ended | all completed in 1 attempt, run once by one agent, %d events stored once each, 0 dead, %d claims asked again; the rest done %s after the kill; lead moved; the killed replica restarted and served; proxy: %s |",
		tasks, endedAtKill, events, reclaims, drained.Round(100*time.Millisecond), proxy.figures())
}

// leadHolders counts the sessions that hold the watchdog's advisory lock
// (the lead) on dsn's database, as seen in pg_locks.
func leadHolders(t *testing.T, dsn string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'edgeagent-controlplane-lead'
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestE2EControlPlaneSurvivesPostgresRestart stops PostgreSQL (a clean
// restart, then a crash: SIGKILL) under a control plane whose agents are
// running tasks. Meanwhile the control plane answers 503 and the agents
// keep their records in their outboxes; once PostgreSQL is back every
// task completes in one attempt, nothing lost, nothing stored twice,
// nothing dead.
func TestE2EControlPlaneSurvivesPostgresRestart(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"restart", "kill"} {
		t.Run(how, func(t *testing.T) {
			cluster := pgtest.New(t)
			c := startCP(t, freeAddr(t), t.TempDir(), "--store", cluster.NewDB(t))
			markDir := t.TempDir()
			var agentDirs []string
			for range 2 {
				d := t.TempDir()
				agentDirs = append(agentDirs, d)
				startAgentProc(t, c, d, "--isolation-write", markDir)
			}
			const tasks = 12
			ids, marks := submitMarked(t, c, markDir, tasks)
			testkit.WaitFor(t, "a quarter of the tasks to end", func() bool { return countEnded(c, ids) >= tasks/4 })
			// What the agents had delivered before the outage.
			tried := func() int {
				n := 0
				for _, d := range agentDirs {
					if s, err := outbox.Inspect(outboxview.Dir(d)); err == nil {
						for _, it := range s.Items {
							if it.State == outbox.StatePending && it.Tries > 0 {
								n++
							}
						}
					}
				}
				return n
			}

			if how == "restart" {
				cluster.Stop(t)
			} else {
				cluster.Kill(t)
			}
			down := time.Now()
			status := func() int {
				req, _ := http.NewRequest(http.MethodGet, c.url()+"/v1/tasks/"+ids[0], nil)
				tok, _ := os.ReadFile(c.operatorFile)
				req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if code := status(); code != http.StatusServiceUnavailable {
				t.Errorf("with PostgreSQL down the control plane answers %d, want 503", code)
			}
			// The agents tried to deliver and keep what failed; the
			// outage lasts a few heartbeats more (their leases do not
			// run out: 10 s).
			held := 0
			testkit.WaitFor(t, "an agent to keep a record whose delivery failed", func() bool {
				held = max(held, tried())
				return held > 0 && time.Since(down) > 3*time.Second
			})
			if code := status(); code != http.StatusServiceUnavailable {
				t.Errorf("with PostgreSQL down for %s the control plane answers %d, want 503", time.Since(down).Round(time.Second), code)
			}
			cluster.Start(t)
			outage := time.Since(down)
			back := time.Now()

			for _, id := range ids {
				c.waitDone(t, id)
			}
			drained := time.Since(back)
			events := checkRanOnce(t, c, ids, marks, agentDirs)
			// The lead went with its session; the watchdog runs again
			// once the replica took it back.
			testkit.WaitFor(t, "the replica to take the lead again", func() bool {
				return strings.Count(c.output(), "took the lead") >= 2
			})
			t.Logf("FAULT | PostgreSQL %s under one replica, 2 agents, %d tasks | 503 meanwhile, %d records held in the outboxes, down %s; all completed in 1 attempt %s after it came back, %d events stored once each, 0 dead |",
				map[string]string{"restart": "stopped and started", "kill": "SIGKILLed and started"}[how], tasks, held,
				outage.Round(100*time.Millisecond), drained.Round(100*time.Millisecond), events)
		})
	}
}
