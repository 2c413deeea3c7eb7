package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/metrics"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/sample"
	"github.com/edgeagent/agent/state"
)

// TestMain lets the test binary be the sample executor, and checks that no
// goroutine outlives the tests (the metrics servers included).
func TestMain(m *testing.M) {
	keeper.Main() // attempts run under a keeper: this test binary is it
	if os.Getenv("AGENT_METRICS_SAMPLE") == "1" {
		os.Exit(sample.Main(os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// scraper fetches /metrics without keeping connections (which goleak
// would see) and parses what it gets.
var scraper = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}

// scrape fetches and parses the metrics served at addr.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := scraper.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	return families
}

// value is the value of the series of family name whose labels include
// want (name=value pairs): a gauge's or counter's value, a histogram's
// count. It is -1 when there is no such series.
func value(families map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := families[name]
	if f == nil {
		return -1
	}
	sum, found := 0.0, false
	for _, m := range f.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		found = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	if !found {
		return -1
	}
	return sum
}

func hasLabels(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		ok := false
		for _, l := range m.GetLabel() {
			if l.GetName() == want[i] && l.GetValue() == want[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// system is a reference control plane on loopback, instrumented, with its
// metrics served, and an agent config running the sample executor with
// its metrics on.
type system struct {
	url       string // the control plane's API
	client    *controlplane.Client
	cpMetrics *metrics.Server
	cfg       agent.Config
}

func newSystem(t *testing.T) *system {
	t.Helper()
	var cpm *metrics.ControlPlane
	cp := servertest.Start(t, servertest.Options{Server: server.Options{HeartbeatInterval: 100 * time.Millisecond},
		Wrap: func(srv *server.Server, h http.Handler) http.Handler {
			cpm = metrics.NewControlPlane(srv)
			cpm.Overload(srv)
			return cpm.Instrument(h)
		}})
	ms, err := metrics.Listen("0", cpm.Registry()) // a free port on loopback
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	exe, err := exec.New(exec.Config{Argv: []string{os.Args[0]}, Env: []string{"AGENT_METRICS_SAMPLE=1", "GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		t.Fatal(err)
	}
	return &system{url: cp.URL, client: cp.Operator, cpMetrics: ms, cfg: agent.Config{ControlPlane: cp.URL, Token: servertest.RegistrationToken, DataDir: t.TempDir(), Executor: exe,
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, Logger: quiet(), MetricsAddr: "127.0.0.1:0"}}
}

// TestMetricsOfATaskRunToCompletion runs a task through a real agent and
// control plane, scrapes both over HTTP and checks what they say.
func TestMetricsOfATaskRunToCompletion(t *testing.T) {
	sys := newSystem(t)
	a, err := agent.New(sys.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	testkit.WaitFor(t, "the agent to serve its metrics", func() bool { return a.MetricsAddr() != "" })
	addr := a.MetricsAddr()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("metrics served on %s, want loopback", addr)
	}

	v, err := sys.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "fix it"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]*dto.MetricFamily
	testkit.WaitFor(t, "the task completed and delivered", func() bool {
		got = scrape(t, addr)
		return value(got, "agent_tasks", "phase", "completed") == 1 && value(got, "agent_outbox_pending_records") == 0
	})
	checkAll(t, got, []check{
		{"agent_tasks", []string{"phase", "completed"}, eq(1), "1"},
		{"agent_tasks", []string{"phase", "failed"}, eq(0), "0 (every phase is exported)"},
		{"agent_outbox_pending_records", nil, eq(0), "0"},
		{"agent_outbox_dead_records", nil, eq(0), "0"},
		{"agent_outbox_file_bytes", nil, gt(0), "> 0"},
		{"agent_outbox_appends_total", nil, gt(0), "> 0"},
		{"agent_outbox_sync_duration_seconds", nil, gt(0), "observations > 0"},
		{"agent_outbox_commit_records", nil, gt(0), "observations > 0"},
		{"agent_sends_total", []string{"result", "sent"}, gt(0), "> 0"},
		{"agent_sends_total", []string{"result", "dead"}, eq(0), "0"},
		{"agent_attempts_total", []string{"outcome", "completed", "code", "none"}, eq(1), "1"},
		{"agent_attempts_total", []string{"outcome", "failed"}, eq(-1), "no series"},
		{"agent_executor_health", []string{"grade", "available"}, eq(1), "1"},
		{"agent_executor_health", []string{"grade", "unavailable"}, eq(0), "0"},
		{"agent_heartbeat_duration_seconds", []string{"result", "ok"}, gt(0), "observations > 0"},
		{"go_goroutines", nil, gt(0), "> 0"},
	})
	noTaskIDs(t, got, v.ID)

	// The control plane's side, once the agent has been seen running.
	var cp map[string]*dto.MetricFamily
	testkit.WaitFor(t, "the control plane's figures", func() bool {
		cp = scrape(t, sys.cpMetrics.Addr())
		return value(cp, "agent_controlplane_tasks", "phase", "completed") == 1 && value(cp, "agent_controlplane_agents", "state", "running") == 1
	})
	checkAll(t, cp, []check{
		{"agent_controlplane_tasks", []string{"phase", "queued"}, eq(0), "0"},
		{"agent_controlplane_agents", []string{"state", "offline"}, eq(0), "0"},
		{"agent_controlplane_events_total", []string{"result", "accepted"}, gt(0), "> 0"},
		{"agent_controlplane_events_total", []string{"result", "rejected"}, eq(0), "0"},
		{"agent_controlplane_request_duration_seconds", []string{"route", "POST /v1/events", "code", "200"}, gt(0), "observations > 0"},
		{"agent_controlplane_request_duration_seconds", []string{"route", "POST /v1/agents/heartbeat", "code", "200"}, gt(0), "observations > 0"},
		{"agent_controlplane_request_duration_seconds", []string{"route", "POST /v1/tasks/claim"}, gt(0), "observations > 0"},
		{"agent_controlplane_requests_shed_total", []string{"kind", "events"}, eq(0), "0"},
		{"agent_controlplane_requests_shed_total", []string{"kind", "heartbeat"}, eq(0), "0 (every kind is exported)"},
		{"agent_controlplane_requests_in_flight", []string{"kind", "submit"}, eq(0), "0"},
		{"agent_controlplane_lapses_held", nil, eq(0), "0"},
		{"agent_controlplane_store_waiting", []string{"kind", "other"}, eq(-1), "no series (the file store has no pool)"},
	})
	// The agent's sends and the control plane's accepted events agree: no
	// record went twice.
	if s, e := value(got, "agent_sends_total", "result", "sent"), value(cp, "agent_controlplane_events_total", "result", "accepted"); s > e {
		t.Errorf("agent sent %v records, control plane accepted %v", s, e)
	}

	// A route with a task id in its path is labelled by its pattern.
	if _, err := sys.client.Task(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	// What no route served: a wrong token is refused before the API's
	// routes; a path outside the API matches nothing.
	for _, path := range []string{"/v1/tasks/" + v.ID, "/nowhere/" + v.ID} {
		req, _ := http.NewRequest("GET", sys.url+path, nil)
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := scraper.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	cp = scrape(t, sys.cpMetrics.Addr())
	checkAll(t, cp, []check{
		{"agent_controlplane_request_duration_seconds", []string{"route", "GET /v1/tasks/{id}", "code", "200"}, gt(0), "observations > 0"},
		{"agent_controlplane_request_duration_seconds", []string{"route", "/v1/", "code", "401"}, eq(1), "1 observation"},
		{"agent_controlplane_request_duration_seconds", []string{"route", "unmatched", "code", "404"}, eq(1), "1 observation"},
	})
	noTaskIDs(t, cp, v.ID)

	// The metrics stop with the agent.
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if resp, err := scraper.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("metrics still served after the agent stopped: %s", resp.Status)
	}
}

// check is what one series must show.
type check struct {
	name   string
	labels []string // name=value pairs the series has
	ok     func(float64) bool
	want   string
}

// checkAll runs each check on families as a subtest.
func checkAll(t *testing.T, families map[string]*dto.MetricFamily, checks []check) {
	t.Helper()
	for _, c := range checks {
		t.Run(series(c.name, c.labels), func(t *testing.T) {
			if v := value(families, c.name, c.labels...); !c.ok(v) {
				t.Errorf("%s = %v, want %s", series(c.name, c.labels), v, c.want)
			}
		})
	}
}

// series names a series as Prometheus writes it: name{k="v",...}.
func series(name string, labels []string) string {
	var kv []string
	for i := 0; i+1 < len(labels); i += 2 {
		kv = append(kv, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	if len(kv) == 0 {
		return name
	}
	return name + "{" + strings.Join(kv, ",") + "}"
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func gt(than float64) func(float64) bool { return func(v float64) bool { return v > than } }

// noTaskIDs fails if any label value names the task.
func noTaskIDs(t *testing.T, families map[string]*dto.MetricFamily, id string) {
	t.Helper()
	for name, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), id) {
					t.Errorf("%s has label %s=%q: a task id", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestAnUnreachableControlPlaneIsCounted runs an agent against a closed
// port: heartbeats are observed as failed, and the agent still serves its
// metrics.
func TestAnUnreachableControlPlaneIsCounted(t *testing.T) {
	sys := newSystem(t)
	ln := httptest.NewServer(http.NotFoundHandler())
	sys.cfg.ControlPlane = ln.URL
	ln.Close() // nothing listens there now
	a, err := agent.New(sys.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	testkit.WaitFor(t, "the agent to serve its metrics", func() bool { return a.MetricsAddr() != "" })
	testkit.WaitFor(t, "a failed heartbeat", func() bool {
		return value(scrape(t, a.MetricsAddr()), "agent_heartbeat_duration_seconds", "result", "failed") > 0
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestABadMetricsAddressIsAConfigError(t *testing.T) {
	sys := newSystem(t)
	for _, addr := range []string{"nine", "127.0.0.1:http-alt", "70000", "127.0.0.1:-1"} {
		t.Run(addr, func(t *testing.T) {
			cfg := sys.cfg
			cfg.MetricsAddr = addr
			_, err := agent.New(cfg)
			if !errors.Is(err, agent.ErrConfig) || !strings.Contains(err.Error(), addr) {
				t.Errorf("New with MetricsAddr %q: %v, want a configuration error naming it", addr, err)
			}
		})
	}
}

// TestAnAddressInUseStopsTheStart: the agent does not start without the
// metrics it was asked for, and says why.
func TestAnAddressInUseStopsTheStart(t *testing.T) {
	sys := newSystem(t)
	taken, err := metrics.Listen("0", metrics.NewAgent(fixedSources()).Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	sys.cfg.MetricsAddr = taken.Addr()
	a, err := agent.New(sys.cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), taken.Addr()) {
		t.Fatalf("Run on an address in use: %v, want an error naming it", err)
	}
}

func TestResolveAddr(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{"", "", ""},
		{"9464", "127.0.0.1:9464", ""},
		{":9464", "127.0.0.1:9464", ""},
		{"0", "127.0.0.1:0", ""},
		{"127.0.0.1:9464", "127.0.0.1:9464", ""},
		{"0.0.0.0:9464", "0.0.0.0:9464", ""},
		{"[::1]:9464", "[::1]:9464", ""},
		{"localhost:9464", "localhost:9464", ""},
		{"on", "", `metrics address "on"`},
		{"65536", "", "want a port"},
		{"host:", "", "want a port"},
		{"[::1]", "", "want a port"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := metrics.ResolveAddr(c.in)
			switch {
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("ResolveAddr(%q) = %q, %v; want an error with %q", c.in, got, err, c.err)
			case c.err == "" && (err != nil || got != c.want):
				t.Errorf("ResolveAddr(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
		})
	}
}

// TestOnlyMetricsIsServed: the metrics address answers /metrics and
// nothing else.
func TestOnlyMetricsIsServed(t *testing.T) {
	s, err := metrics.Listen("0", metrics.NewAgent(fixedSources()).Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cases := []struct {
		method, path string
		want         int
	}{
		{"GET", "/metrics", http.StatusOK},
		{"GET", "/", http.StatusNotFound},
		{"GET", "/debug/pprof/", http.StatusNotFound},
		{"POST", "/metrics", http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, "http://"+s.Addr()+c.path, nil)
			resp, err := scraper.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
			}
		})
	}
}

// TestLabelsAreBounded: an executor's made-up error code and a phase from
// a newer file do not become label values.
func TestLabelsAreBounded(t *testing.T) {
	m := metrics.NewAgent(fixedSources(&state.Task{Phase: "teleported"}, &state.Task{Phase: state.PhaseQueued}))
	for i := range 3 {
		m.Attempt(state.Attempt{Status: state.AttemptFailed, Error: &state.Error{Code: state.ErrorCode(fmt.Sprintf("made_up_%d", i))}})
	}
	m.Attempt(state.Attempt{Status: state.AttemptFailed, Error: &state.Error{Code: state.CodeRateLimit}})
	m.Attempt(state.Attempt{Status: state.AttemptRunning}) // not ended: not counted
	m.Sent(metrics.SendFailed, 3)
	m.Committed(4, 100, time.Millisecond)
	s, err := metrics.Listen("0", m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := scrape(t, s.Addr())
	checkAll(t, got, []check{
		{"agent_attempts_total", []string{"code", "other"}, eq(3), "3"},
		{"agent_attempts_total", []string{"code", "rate_limit"}, eq(1), "1"},
		{"agent_attempts_total", []string{"outcome", "running"}, eq(-1), "no series"},
		{"agent_tasks", []string{"phase", "other"}, eq(1), "1"},
		{"agent_tasks", []string{"phase", "queued"}, eq(1), "1"},
		{"agent_sends_total", []string{"result", "failed"}, eq(3), "3"},
		{"agent_sends_total", []string{"result", "sent"}, eq(0), "0"},
		{"agent_outbox_commit_records", nil, eq(1), "1 observation"},
		{"agent_executor_health", []string{"grade", "degraded"}, eq(1), "1"},
	})
	if f := got["agent_attempts_total"]; f == nil || len(f.GetMetric()) != 2 {
		t.Errorf("agent_attempts_total has %d series, want 2 (other, rate_limit)", len(f.GetMetric()))
	}
}

// fixedSources are figures for tests that need no agent: an empty outbox,
// the tasks given, and a degraded executor.
func fixedSources(tasks ...*state.Task) metrics.AgentSources {
	return metrics.AgentSources{
		Outbox: func() outbox.Stats { return outbox.Stats{} },
		Tasks:  func() ([]*state.Task, error) { return tasks, nil },
		Grade:  func() health.Grade { return health.Degraded },
	}
}

// The workspace gauges say what the agent last measured, and are not
// there before it measured or when it has no workspaces to measure.
func TestWorkspaceGauges(t *testing.T) {
	src := fixedSources()
	var measured atomic.Bool
	src.Workspaces = func() (metrics.WorkspaceFigures, bool) {
		return metrics.WorkspaceFigures{Clean: 2, Kept: 1, Bytes: 12345}, measured.Load()
	}
	s, err := metrics.Listen("0", metrics.NewAgent(src).Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := scrape(t, s.Addr()); got["agent_workspaces"] != nil || got["agent_workspaces_bytes"] != nil {
		t.Errorf("workspace gauges before a measure: %v, %v", got["agent_workspaces"], got["agent_workspaces_bytes"])
	}
	measured.Store(true)
	checkAll(t, scrape(t, s.Addr()), []check{
		{"agent_workspaces", []string{"state", "clean"}, eq(2), "2"},
		{"agent_workspaces", []string{"state", "kept"}, eq(1), "1"},
		{"agent_workspaces_bytes", nil, eq(12345), "12345"},
	})
}

// TestTokensByExecutor: the tokens of the attempts that ended, by executor
// and kind; an attempt still running counts nothing yet.
func TestTokensByExecutor(t *testing.T) {
	m := metrics.NewAgent(fixedSources())
	used := state.Usage{InputTokens: 900, OutputTokens: 100, TotalTokens: 1000}
	m.Tokens("codex", state.Attempt{Status: state.AttemptFailed, Usage: used})
	m.Tokens("codex", state.Attempt{Status: state.AttemptCompleted, Usage: used})
	m.Tokens("codex", state.Attempt{Status: state.AttemptRunning, Usage: used}) // not ended: not counted
	m.Tokens("claude", state.Attempt{Status: state.AttemptCompleted, Usage: state.Usage{InputTokens: 20, OutputTokens: 7, TotalTokens: 27}})
	m.Tokens("sample", state.Attempt{Status: state.AttemptCompleted}) // none reported: no series
	s, err := metrics.Listen("0", m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := scrape(t, s.Addr())
	checkAll(t, got, []check{
		{"agent_tokens_total", []string{"executor", "codex", "kind", "input"}, eq(1800), "1800"},
		{"agent_tokens_total", []string{"executor", "codex", "kind", "output"}, eq(200), "200"},
		{"agent_tokens_total", []string{"executor", "claude", "kind", "output"}, eq(7), "7"},
		{"agent_tokens_total", []string{"executor", "sample"}, eq(-1), "no series"},
	})
}
