package server

import (
	"context"
	"maps"
	"net/http"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// The server's figures, for its metrics (package metrics reads them at
// scrape time). Every key is from a closed set: agent states, phases,
// event statuses.

// AgentsByState counts the agents the server knows by state: running,
// draining or offline (an agent silent for three heartbeat intervals is
// offline, whatever it last said).
func (s *Server) AgentsByState() map[api.AgentState]int {
	agents, err := s.store.Agents(context.Background())
	if err != nil {
		s.log.Warn("metrics: agents", "err", err)
	}
	now := s.opts.Now()
	n := map[api.AgentState]int{}
	for _, a := range agents {
		switch {
		case !a.Online(now, s.opts.HeartbeatInterval):
			n[api.AgentOffline]++
		case a.View.State == api.AgentDraining:
			n[api.AgentDraining]++
		default: // running, or an agent too old to say
			n[api.AgentRunning]++
		}
	}
	return n
}

// TasksByPhase counts the tasks by phase.
func (s *Server) TasksByPhase() map[state.Phase]int {
	n, err := s.store.Count(context.Background())
	if err != nil {
		s.log.Warn("metrics: tasks", "err", err)
	}
	return n
}

// EventsByStatus counts, since the server started, the events it
// answered by status: accepted, duplicate or rejected.
func (s *Server) EventsByStatus() map[api.EventStatus]uint64 { return s.rules.eventCounts() }

func (rl *rules) eventCounts() map[api.EventStatus]uint64 {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	n := make(map[api.EventStatus]uint64, len(rl.eventResults))
	maps.Copy(n, rl.eventResults)
	return n
}

// countResults adds a batch's answers to the events counted by status.
func (rl *rules) countResults(results []api.EventResult) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.eventResults == nil {
		rl.eventResults = map[api.EventStatus]uint64{}
	}
	for _, r := range results {
		rl.eventResults[r.Status]++
	}
}

// routeKey carries a *string through a request's context: the pattern of
// the route that served it, which the API's inner mux sets on a request
// the outer handlers never see.
type routeKey struct{}

// TrackRoute returns r carrying room for its route, and a function that
// returns, once the server's Handler served the request, the pattern of
// the route that served it (e.g. "POST /v1/tasks/{id}/cancel"), or "" when
// none matched. Request metrics label by it, so that task ids never become
// labels.
func (s *Server) TrackRoute(r *http.Request) (*http.Request, func() string) {
	var inner string
	r = r.WithContext(context.WithValue(r.Context(), routeKey{}, &inner))
	return r, func() string {
		if inner != "" {
			return inner
		}
		return r.Pattern
	}
}

// notePattern records the pattern next's mux matched where TrackRoute
// left room for it.
func notePattern(next *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if p, ok := r.Context().Value(routeKey{}).(*string); ok {
			*p = r.Pattern
		}
	})
}
