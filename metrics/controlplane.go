package metrics

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// ControlPlaneSource is what the control plane's metrics read from the
// reference control plane (controlplane/server.Server is one): its figures
// at scrape time, and the route that served a request.
type ControlPlaneSource interface {
	// AgentsByState counts the agents known, by state.
	AgentsByState() map[api.AgentState]int
	// TasksByPhase counts the tasks, by phase.
	TasksByPhase() map[state.Phase]int
	// EventsByStatus counts the events answered since the start, by
	// status.
	EventsByStatus() map[api.EventStatus]uint64
	// TrackRoute returns r carrying room for its route, and a function
	// that returns, once the request was served, the pattern of the route
	// that served it, or "" when none matched.
	TrackRoute(r *http.Request) (*http.Request, func() string)
}

// NotificationSource is the control plane's notification deliveries
// (controlplane/notify.Counts is one).
type NotificationSource interface {
	// ByTarget counts the tries since the start, by target and result
	// (delivered, failed, given_up, dropped).
	ByTarget() map[string]map[string]uint64
}

// ControlPlane holds the reference control plane's metrics: agents, tasks
// and events read from the server at scrape time, and the latency of the
// requests its Instrument handler serves.
type ControlPlane struct {
	src      ControlPlaneSource
	reg      Registry
	requests *histogramVec
}

// NewControlPlane makes the metrics of the control plane src.
func NewControlPlane(src ControlPlaneSource) *ControlPlane {
	m := &ControlPlane{src: src,
		requests: newHistogramVec("agent_controlplane_request_duration_seconds",
			"API requests by route pattern (unmatched for any other path) and response status.", latencyBuckets, "route", "code"),
	}
	m.reg.add(m.requests.collect)
	m.reg.add(m.collect)
	m.reg.add(collectRuntime)
	return m
}

// Notifications adds the notification deliveries' counts, read from src
// at scrape time.
func (m *ControlPlane) Notifications(src NotificationSource) {
	m.reg.add(func(s *scrape) {
		counts := src.ByTarget()
		targets := make([]string, 0, len(counts))
		for t := range counts {
			targets = append(targets, t)
		}
		sort.Strings(targets)
		s.family("agent_controlplane_notifications_total", "counter",
			"Notification deliveries tried since the start, by target and result (delivered, failed, given_up, dropped).")
		for _, t := range targets {
			results := make([]string, 0, len(counts[t]))
			for r := range counts[t] {
				results = append(results, r)
			}
			sort.Strings(results)
			for _, r := range results {
				s.sample("", float64(counts[t][r]), "target", t, "result", r)
			}
		}
	})
}

// Registry is what a Server serves.
func (m *ControlPlane) Registry() *Registry { return &m.reg }

// Instrument wraps the server's handler and times each
// request by its route pattern, never its path: a task id in the path
// does not become a label.
func (m *ControlPlane) Instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r, route := m.src.TrackRoute(r)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		pattern := route()
		if pattern == "" {
			pattern = "unmatched"
		}
		m.requests.with(pattern, strconv.Itoa(sw.status)).observe(time.Since(start).Seconds())
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

// collect reads the control plane's figures at scrape time.
func (m *ControlPlane) collect(s *scrape) {
	agents, tasks, events := m.src.AgentsByState(), m.src.TasksByPhase(), m.src.EventsByStatus()
	s.family("agent_controlplane_agents", "gauge", "Agents known, by state (running, draining, offline).")
	for _, a := range api.AgentStates {
		s.sample("", float64(agents[a]), "state", string(a))
	}
	s.family("agent_controlplane_tasks", "gauge", "Tasks by phase.")
	samplePhases(s, tasks)
	s.family("agent_controlplane_events_total", "counter", "Events answered since the start, by result (accepted, duplicate, rejected).")
	for _, r := range api.EventStatuses {
		s.sample("", float64(events[r]), "result", string(r))
	}
}
