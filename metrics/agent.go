package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// AgentSources are where the agent's gauges are read, at scrape time.
// Each is required.
type AgentSources struct {
	// Outbox returns the outbox's figures.
	Outbox func() outbox.Stats
	// Tasks returns the tasks in the data directory. Those it could read
	// are counted even when it also returns an error.
	Tasks func() ([]*state.Task, error)
	// Grade returns the executor's health grade.
	Grade func() health.Grade
}

// Agent holds the agent's metrics: gauges read from its sources at scrape
// time, and counters and histograms of what happens between scrapes, fed
// by its methods. Its methods are safe for concurrent use.
type Agent struct {
	reg      *prometheus.Registry
	sends    *prometheus.CounterVec
	attempts *prometheus.CounterVec
	beats    *prometheus.HistogramVec
	syncs    prometheus.Histogram
	commits  prometheus.Histogram
}

// NewAgent makes the agent's metrics, reading its gauges from src.
func NewAgent(src AgentSources) *Agent {
	m := &Agent{
		reg: prometheus.NewRegistry(),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agent_sends_total",
			Help: "Records by what a delivery try made of them: sent, duplicate (delivered before), dead (refused for good), failed (stays pending)."},
			[]string{"result"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agent_attempts_total",
			Help: "Attempts ended, by outcome (completed, failed, cancelled) and error code (none when completed, other when unknown)."},
			[]string{"outcome", "code"}),
		beats: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agent_heartbeat_duration_seconds",
			Help: "Heartbeat round trips to the control plane, by result (ok, failed).", Buckets: latencyBuckets},
			[]string{"result"}),
		syncs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agent_outbox_sync_duration_seconds",
			Help: "fdatasync latency of each outbox group commit.", Buckets: syncBuckets}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agent_outbox_commit_records",
			Help: "Records per outbox group commit (one write and one sync).", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
	}
	for _, r := range sendResults {
		m.sends.WithLabelValues(string(r))
	}
	for _, r := range []string{beatOK, beatFailed} {
		m.beats.WithLabelValues(r)
	}
	m.reg.MustRegister(m.sends, m.attempts, m.beats, m.syncs, m.commits, agentGauges{src},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Gatherer is what a Server serves.
func (m *Agent) Gatherer() prometheus.Gatherer { return m.reg }

// Sent counts n records a delivery try made result of.
func (m *Agent) Sent(result SendResult, n int) {
	if n > 0 {
		m.sends.WithLabelValues(string(result)).Add(float64(n))
	}
}

// Attempt counts an attempt that ended; reports of an attempt not yet
// final (pending, running) are not counted, so each attempt counts once.
func (m *Agent) Attempt(a state.Attempt) {
	if a.Status.Final() {
		m.attempts.WithLabelValues(string(a.Status), codeLabel(a.Error)).Inc()
	}
}

// Heartbeat observes one heartbeat's round trip.
func (m *Agent) Heartbeat(took time.Duration, ok bool) {
	r := beatOK
	if !ok {
		r = beatFailed
	}
	m.beats.WithLabelValues(r).Observe(took.Seconds())
}

// Committed observes an outbox group commit; it is outbox.Options.OnCommit.
func (m *Agent) Committed(records int, _ int64, sync time.Duration) {
	m.syncs.Observe(sync.Seconds())
	m.commits.Observe(float64(records))
}

// The results of a heartbeat.
const (
	beatOK     = "ok"
	beatFailed = "failed"
)

// Buckets: an fdatasync takes from tens of microseconds (NVMe) to tens of
// milliseconds (a spinning disk, a busy VM); a request, from a millisecond
// on loopback to the client's 30 s timeout.
var (
	syncBuckets    = prometheus.ExponentialBuckets(0.0001, 2, 14) // 100 µs … 0.8 s
	latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// agentGauges reads the agent's gauges at scrape time.
type agentGauges struct{ src AgentSources }

var (
	descPending = prometheus.NewDesc("agent_outbox_pending_records", "Outbox records not yet delivered.", nil, nil)
	descDead    = prometheus.NewDesc("agent_outbox_dead_records", "Outbox records the control plane refused for good.", nil, nil)
	descBytes   = prometheus.NewDesc("agent_outbox_file_bytes", "Size of the outbox file.", nil, nil)
	descOldest  = prometheus.NewDesc("agent_outbox_oldest_pending_age_seconds", "Age of the oldest pending record; 0 when none.", nil, nil)
	descAppends = prometheus.NewDesc("agent_outbox_appends_total", "Records appended, durably, by this process.", nil, nil)
	descDropped = prometheus.NewDesc("agent_outbox_dropped_logs_total", "Log records refused because the outbox was full.", nil, nil)
	descWErrors = prometheus.NewDesc("agent_outbox_write_errors_total", "Outbox group commits whose write or sync failed.", nil, nil)
	descTasks   = prometheus.NewDesc("agent_tasks", "Tasks in the data directory, by phase.", []string{"phase"}, nil)
	descHealth  = prometheus.NewDesc("agent_executor_health", "1 for the executor's health grade, 0 for the others.", []string{"grade"}, nil)
)

// Describe implements prometheus.Collector.
func (agentGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPending, descDead, descBytes, descOldest, descAppends, descDropped, descWErrors, descTasks, descHealth} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g agentGauges) Collect(ch chan<- prometheus.Metric) {
	st := g.src.Outbox()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(descPending, float64(st.Pending))
	gauge(descDead, float64(st.Dead))
	gauge(descBytes, float64(st.FileBytes))
	gauge(descOldest, st.OldestPendingAge)
	counter(descAppends, st.Appends)
	counter(descDropped, st.DroppedLogs)
	counter(descWErrors, st.WriteErrors)

	tasks, _ := g.src.Tasks() // a file that cannot be read costs only itself
	collectPhases(ch, descTasks, phasesOf(tasks))

	grade := g.src.Grade()
	for _, gr := range []health.Grade{health.Available, health.Degraded, health.Unavailable} {
		v := 0.0
		if gr == grade {
			v = 1
		}
		gauge(descHealth, v, string(gr))
	}
}

// phasesOf counts tasks by phase.
func phasesOf(tasks []*state.Task) map[state.Phase]int {
	n := map[state.Phase]int{}
	for _, t := range tasks {
		n[t.Phase]++
	}
	return n
}

// collectPhases sends one gauge per phase, every phase of the closed set
// (0 when none), and "other" for phases it does not know, if any.
func collectPhases(ch chan<- prometheus.Metric, d *prometheus.Desc, counts map[state.Phase]int) {
	other := 0
	for p, n := range counts {
		if phaseLabel(p) == "other" {
			other += n
		}
	}
	for _, p := range state.Phases {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(counts[p]), string(p))
	}
	if other > 0 {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(other), "other")
	}
}
