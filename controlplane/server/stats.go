package server

import (
	"context"
	"net/http"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Stats are the control plane's figures at one moment, for its metrics.
// Every key is from a closed set: agent states, phases, event statuses.
type Stats struct {
	// Agents counts the agents it knows by state: running, draining or
	// offline (an agent silent for three heartbeat intervals is offline,
	// whatever it last said).
	Agents map[api.AgentState]int
	// Tasks counts the tasks by phase.
	Tasks map[state.Phase]int
	// Events counts, since the server started, the events it answered by
	// status: accepted, duplicate or rejected.
	Events map[api.EventStatus]uint64
}

// Stats returns the server's figures.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	st := Stats{Agents: map[api.AgentState]int{}, Tasks: map[state.Phase]int{}, Events: map[api.EventStatus]uint64{}}
	for _, a := range s.agents {
		switch {
		case !a.online(now, s.opts.HeartbeatInterval):
			st.Agents[api.AgentOffline]++
		case a.view.State == api.AgentDraining:
			st.Agents[api.AgentDraining]++
		default: // running, or an agent too old to say
			st.Agents[api.AgentRunning]++
		}
	}
	for _, t := range s.tasks {
		st.Tasks[t.Phase]++
	}
	for k, n := range s.eventResults {
		st.Events[k] = n
	}
	return st
}

// countResults adds a batch's answers to the events counted by status. mu
// is held.
func (s *Server) countResults(results []api.EventResult) {
	if s.eventResults == nil {
		s.eventResults = map[api.EventStatus]uint64{}
	}
	for _, r := range results {
		s.eventResults[r.Status]++
	}
}

// routeKey carries a *string through a request's context: the pattern of
// the route that served it, which the API's inner mux sets on a request
// the outer handlers never see.
type routeKey struct{}

// TrackRoute returns r carrying room for its route, and a function that
// returns, once the request was served, the pattern of the route that
// served it (e.g. "POST /v1/tasks/{id}/cancel"), or "" when none matched.
// Request metrics label by it, so that task ids never become labels.
func TrackRoute(r *http.Request) (*http.Request, func() string) {
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
