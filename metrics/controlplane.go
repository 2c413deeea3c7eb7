package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/edgeagent/agent/controlplane"
)

// ControlPlane holds the reference control plane's metrics: agents, tasks
// and events read from the server at scrape time, and the latency of the
// requests its Instrument handler serves.
type ControlPlane struct {
	reg      *prometheus.Registry
	requests *prometheus.HistogramVec
}

// NewControlPlane makes the metrics of srv.
func NewControlPlane(srv *controlplane.Server) *ControlPlane {
	m := &ControlPlane{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agent_controlplane_request_duration_seconds",
			Help: "API requests by route pattern (unmatched for any other path) and response status.", Buckets: latencyBuckets},
			[]string{"route", "code"}),
	}
	m.reg.MustRegister(m.requests, cpGauges{srv},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Gatherer is what a Server serves.
func (m *ControlPlane) Gatherer() prometheus.Gatherer { return m.reg }

// Instrument wraps the server's handler (srv.Handler()) and times each
// request by its route pattern, never its path: a task id in the path
// does not become a label.
func (m *ControlPlane) Instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r, route := controlplane.TrackRoute(r)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		pattern := route()
		if pattern == "" {
			pattern = "unmatched"
		}
		m.requests.WithLabelValues(pattern, strconv.Itoa(sw.status)).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// cpGauges reads the control plane's figures at scrape time.
type cpGauges struct{ srv *controlplane.Server }

var (
	descCPAgents = prometheus.NewDesc("agent_controlplane_agents", "Agents known, by state (running, draining, offline).", []string{"state"}, nil)
	descCPTasks  = prometheus.NewDesc("agent_controlplane_tasks", "Tasks by phase.", []string{"phase"}, nil)
	descCPEvents = prometheus.NewDesc("agent_controlplane_events_total", "Events answered since the start, by result (accepted, duplicate, rejected).", []string{"result"}, nil)
)

// Describe implements prometheus.Collector.
func (cpGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCPAgents
	ch <- descCPTasks
	ch <- descCPEvents
}

// Collect implements prometheus.Collector.
func (g cpGauges) Collect(ch chan<- prometheus.Metric) {
	st := g.srv.Stats()
	for _, s := range []string{controlplane.AgentRunning, controlplane.AgentDraining, controlplane.AgentOffline} {
		ch <- prometheus.MustNewConstMetric(descCPAgents, prometheus.GaugeValue, float64(st.Agents[s]), s)
	}
	collectPhases(ch, descCPTasks, st.Tasks)
	for _, r := range []string{controlplane.StatusAccepted, controlplane.StatusDuplicate, controlplane.StatusRejected} {
		ch <- prometheus.MustNewConstMetric(descCPEvents, prometheus.CounterValue, float64(st.Events[r]), r)
	}
}
