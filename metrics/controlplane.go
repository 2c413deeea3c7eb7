package metrics

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
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

// OverloadSource is a control plane that bounds its requests in flight
// (controlplane/server.Server is one): how busy it is, read at scrape
// time.
type OverloadSource interface {
	// InFlightByKind counts the requests in flight now, by kind
	// (heartbeat, claim, events, submit, read, other).
	InFlightByKind() map[string]int
	// ShedByKind counts the requests answered 503 with Retry-After since
	// the start, by kind.
	ShedByKind() map[string]uint64
	// LapsesHeld reports whether leases are kept from lapsing now, the
	// control plane having been the bottleneck lately.
	LapsesHeld() bool
	// Pool reports the store's pool of connections, ok false when the
	// store has none (the file store).
	Pool() (store.PoolFigures, bool)
}

// Overload adds the figures of admission control and of the store's
// pool, read from src at scrape time.
func (m *ControlPlane) Overload(src OverloadSource) {
	m.reg.add(func(s *scrape) {
		inFlight, shed := src.InFlightByKind(), src.ShedByKind()
		kinds := make([]string, 0, len(inFlight))
		for k := range inFlight {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		s.family("agent_controlplane_requests_in_flight", "gauge", "API requests being served now, by kind (heartbeat, claim, events, submit, read, other); a claim waiting for work is not counted.")
		for _, k := range kinds {
			s.sample("", float64(inFlight[k]), "kind", k)
		}
		s.family("agent_controlplane_requests_shed_total", "counter", "API requests answered 503 with Retry-After since the start, their kind's bound in flight reached, by kind.")
		for _, k := range kinds {
			s.sample("", float64(shed[k]), "kind", k)
		}
		held := 0.0
		if src.LapsesHeld() {
			held = 1
		}
		s.family("agent_controlplane_lapses_held", "gauge", "1 while no lease lapses: the control plane shed agents' requests or answered a heartbeat slowly within three heartbeat intervals.")
		s.sample("", held)
		p, ok := src.Pool()
		if !ok {
			return
		}
		s.family("agent_controlplane_store_connections", "gauge", "The store's pool of database connections: max, in_use, reserved (kept for heartbeats).")
		s.sample("", float64(p.Max), "state", "max")
		s.sample("", float64(p.InUse), "state", "in_use")
		s.sample("", float64(p.Reserved), "state", "reserved")
		s.family("agent_controlplane_store_waiting", "gauge", "Store calls waiting for a connection of the pool now, by kind of work (heartbeat, other): the queue in front of the database.")
		for _, w := range p.Waiting {
			s.sample("", float64(w.Now), "kind", w.Kind)
		}
		s.family("agent_controlplane_store_wait_seconds_total", "counter", "Time store calls spent waiting for a connection of the pool since the start, by kind of work.")
		for _, w := range p.Waiting {
			s.sample("", w.Seconds, "kind", w.Kind)
		}
		s.family("agent_controlplane_store_acquires_total", "counter", "Connections of the pool taken since the start, by kind of work.")
		for _, w := range p.Waiting {
			s.sample("", float64(w.Count), "kind", w.Kind)
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
