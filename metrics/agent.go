package metrics

import (
	"time"

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
	// Workspaces, if set, returns what the tasks' workspaces take, as
	// the agent last measured them (it does so on its retention tick,
	// not per scrape); ok is false before the first measure. Unset, the
	// workspace gauges are not exported.
	Workspaces func() (w WorkspaceFigures, ok bool)
}

// WorkspaceFigures are what the tasks' workspaces take: how many are
// clean (retention may remove them), how many are kept because removing
// them would lose work, and their bytes on disk.
type WorkspaceFigures struct {
	Clean, Kept int
	Bytes       int64
}

// Agent holds the agent's metrics: gauges read from its sources at scrape
// time, and counters and histograms of what happens between scrapes, fed
// by its methods. Its methods are safe for concurrent use.
type Agent struct {
	reg      Registry
	sends    *counterVec
	attempts *counterVec
	tokens   *counterVec
	beats    *histogramVec
	syncs    *histogramFamily
	commits  *histogramFamily
}

// NewAgent makes the agent's metrics, reading its gauges from src.
func NewAgent(src AgentSources) *Agent {
	m := &Agent{
		sends: newCounterVec("agent_sends_total",
			"Records by what a delivery try made of them: sent, duplicate (delivered before), dead (refused for good), failed (stays pending).",
			"result"),
		attempts: newCounterVec("agent_attempts_total",
			"Attempts ended, by outcome (completed, failed, cancelled) and error code (none when completed, other when unknown).",
			"outcome", "code"),
		tokens: newCounterVec("agent_tokens_total",
			"Tokens the attempts that ended used, as their executors' CLIs reported them, by executor and kind (input, output).",
			"executor", "kind"),
		beats: newHistogramVec("agent_heartbeat_duration_seconds",
			"Heartbeat round trips to the control plane, by result (ok, failed).", latencyBuckets, "result"),
		syncs: &histogramFamily{"agent_outbox_sync_duration_seconds",
			"fdatasync latency of each outbox group commit.", newHistogram(syncBuckets)},
		commits: &histogramFamily{"agent_outbox_commit_records",
			"Records per outbox group commit (one write and one sync).", newHistogram(exponential(1, 2, 10))},
	}
	for _, r := range sendResults {
		m.sends.with(string(r))
	}
	for _, r := range []string{beatOK, beatFailed} {
		m.beats.with(r)
	}
	for _, c := range []func(*scrape){m.sends.collect, m.attempts.collect, m.tokens.collect, m.beats.collect, m.syncs.collect, m.commits.collect,
		agentGauges{src}.collect, collectRuntime} {
		m.reg.add(c)
	}
	return m
}

// Registry is what a Server serves.
func (m *Agent) Registry() *Registry { return &m.reg }

// Sent counts n records a delivery try made result of.
func (m *Agent) Sent(result SendResult, n int) {
	if n > 0 {
		m.sends.with(string(result)).Add(uint64(n))
	}
}

// Attempt counts an attempt that ended; reports of an attempt not yet
// final (pending, running) are not counted, so each attempt counts once.
func (m *Agent) Attempt(a state.Attempt) {
	if a.Status.Final() {
		m.attempts.with(string(a.Status), codeLabel(a.Error)).Add(1)
	}
}

// Tokens counts the tokens attempt a used, run by executor, once it has
// ended (as Attempt counts it).
func (m *Agent) Tokens(executor string, a state.Attempt) {
	if !a.Status.Final() || a.Usage == (state.Usage{}) {
		return
	}
	m.tokens.with(executor, "input").Add(uint64(max(a.Usage.InputTokens, 0)))
	m.tokens.with(executor, "output").Add(uint64(max(a.Usage.OutputTokens, 0)))
}

// Heartbeat observes one heartbeat's round trip.
func (m *Agent) Heartbeat(took time.Duration, ok bool) {
	r := beatOK
	if !ok {
		r = beatFailed
	}
	m.beats.with(r).observe(took.Seconds())
}

// Committed observes an outbox group commit; it is outbox.Options.OnCommit.
func (m *Agent) Committed(records int, _ int64, sync time.Duration) {
	m.syncs.observe(sync.Seconds())
	m.commits.observe(float64(records))
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
	syncBuckets    = exponential(0.0001, 2, 14) // 100 µs … 0.8 s
	latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// agentGauges reads the agent's gauges at scrape time.
type agentGauges struct{ src AgentSources }

func (g agentGauges) collect(s *scrape) {
	st := g.src.Outbox()
	s.single("agent_outbox_pending_records", "gauge", "Outbox records not yet delivered.", float64(st.Pending))
	s.single("agent_outbox_dead_records", "gauge", "Outbox records the control plane refused for good.", float64(st.Dead))
	s.single("agent_outbox_file_bytes", "gauge", "Bytes of records in the outbox file (the file runs up to 1 MiB further, zeroed ahead of them).", float64(st.FileBytes))
	s.single("agent_outbox_oldest_pending_age_seconds", "gauge", "Age of the oldest pending record; 0 when none.", st.OldestPendingAge)
	s.single("agent_outbox_appends_total", "counter", "Records appended, durably, by this process.", float64(st.Appends))
	s.single("agent_outbox_dropped_logs_total", "counter", "Log records refused because the outbox was full.", float64(st.DroppedLogs))
	s.single("agent_outbox_write_errors_total", "counter", "Outbox group commits whose write or sync failed.", float64(st.WriteErrors))

	tasks, _ := g.src.Tasks() // a file that cannot be read costs only itself
	s.family("agent_tasks", "gauge", "Tasks in the data directory, by phase.")
	samplePhases(s, phasesOf(tasks))

	if g.src.Workspaces != nil {
		if w, ok := g.src.Workspaces(); ok {
			s.family("agent_workspaces", "gauge", "Tasks' workspaces (clones), by state: clean (retention removes them with their task) or kept (removing them would lose work).")
			s.sample("", float64(w.Clean), "state", "clean")
			s.sample("", float64(w.Kept), "state", "kept")
			s.single("agent_workspaces_bytes", "gauge", "Bytes the tasks' clones take on disk, as last measured (on the retention tick).", float64(w.Bytes))
		}
	}

	grade := g.src.Grade()
	s.family("agent_executor_health", "gauge", "1 for the executor's health grade, 0 for the others.")
	for _, gr := range []health.Grade{health.Available, health.Degraded, health.Unavailable} {
		v := 0.0
		if gr == grade {
			v = 1
		}
		s.sample("", v, "grade", string(gr))
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

// samplePhases writes one sample per phase, every phase of the closed set
// (0 when none), and "other" for phases it does not know, if any.
func samplePhases(s *scrape, counts map[state.Phase]int) {
	other := 0
	for p, n := range counts {
		if phaseLabel(p) == "other" {
			other += n
		}
	}
	for _, p := range state.Phases {
		s.sample("", float64(counts[p]), "phase", string(p))
	}
	if other > 0 {
		s.sample("", float64(other), "phase", "other")
	}
}
