package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// Admission control: each kind of request has a bound on how many are in
// flight at once in a replica. Past it, a request is answered at once,
// 503 with Retry-After, instead of queueing (for the store's connections,
// for the CPU) until its client gives up: an overloaded control plane
// answers "later", and its agents come back later (the outbox, claims and
// the CLI's submit wait as told, with jitter). Nothing of a request shed
// was done: it is safe to send again, whatever it was.
//
// The bounds are fixed, per kind, rather than adaptive (Envoy's adaptive
// concurrency moves one limit by the latency it measures; gRPC sheds by
// CPU): what starves first here is the pool of database connections and
// the queue in front of it, which a fixed bound a few times the pool
// holds short; and a fixed bound is one an operator can read and set.
// Heartbeats have a bound of their own, high, and a share of the pool
// kept for them (pgstore): they are answered ahead of everything else.
//
// A batch of events that ends a task (it holds the task's completion)
// has a reserve past the events' bound (endingReserve): it frees the
// agent and finishes work accepted already, where every other batch
// waits for it behind new work. The agent says so in the request's
// query (api.EndsTaskQuery), since admission reads no body; what the
// batch holds is checked once the handler decoded it (takeReserve), and
// a batch on the reserve that ends no task is shed then, before anything
// is done. One reserve slot per agent at once: an agent that lies, or
// sends completions of tasks not its own, holds one slot at most, and
// every other batch keeps the whole of its own bound.

// RequestKind is a kind of API request, as admission control counts and
// bounds them.
type RequestKind string

// The kinds of requests.
const (
	KindHeartbeat RequestKind = "heartbeat" // POST /v1/agents/heartbeat
	KindClaim     RequestKind = "claim"     // POST /v1/tasks/claim, while it selects (not while it waits for work)
	KindEvents    RequestKind = "events"    // POST /v1/events
	KindSubmit    RequestKind = "submit"    // POST /v1/tasks, POST /v1/tasks/{id}/subtasks
	KindRead      RequestKind = "read"      // every GET of the API
	KindOther     RequestKind = "other"     // the rest: release, cancel, retry, reply, registration, labels
)

// RequestKinds are the kinds, in the order metrics list them.
var RequestKinds = []RequestKind{KindHeartbeat, KindClaim, KindEvents, KindSubmit, KindRead, KindOther}

// DefaultMaxInFlight are the bounds of Options.MaxInFlight a kind left
// out takes: several times the store's pool of connections (16 on 2
// CPUs) for agents' traffic, fewer for people's, and heartbeats' high
// (they are cheap and go first). Event batches' is 256: at 64, 1,000
// agents past capacity on 2 CPUs completed 0.73x the tasks they did
// just below it, and 0.88x at 256, heartbeats answered as fast
// (BENCHMARKS.md, issue 44).
var DefaultMaxInFlight = map[RequestKind]int{
	KindHeartbeat: 1024,
	KindClaim:     64,
	KindEvents:    256,
	KindSubmit:    32,
	KindRead:      32,
	KindOther:     32,
}

// endingReserve is how many batches that end a task may be in flight
// past the events' bound: a quarter of it (64 by default; none below a
// bound of 4).
func endingReserve(eventsBound int64) int64 { return eventsBound / 4 }

// ShedRetryAfter is the wait a shed request is told (Retry-After, whole
// seconds); clients add jitter.
const ShedRetryAfter = time.Second

// kindOf is the kind of the route pattern.
func kindOf(pattern string) RequestKind {
	method, path, _ := strings.Cut(pattern, " ")
	switch {
	case path == "/v1/agents/heartbeat":
		return KindHeartbeat
	case path == "/v1/tasks/claim":
		return KindClaim
	case path == "/v1/events":
		return KindEvents
	case method == http.MethodPost && (path == "/v1/tasks" || path == "/v1/tasks/{id}/subtasks"):
		return KindSubmit
	case method == http.MethodGet:
		return KindRead
	}
	return KindOther
}

// admission is the requests in flight by kind, their bounds, and the
// requests shed.
type admission struct {
	bound    map[RequestKind]int64
	inFlight map[RequestKind]*atomic.Int64
	shed     map[RequestKind]*atomic.Uint64

	// ending counts the batches in flight on the reserve of batches that
	// end a task, at most endingBound; endingAgents are the agents whose
	// batch holds one of its slots.
	ending       atomic.Int64
	endingBound  int64
	endingMu     sync.Mutex
	endingAgents map[string]bool
}

func newAdmission(bounds map[RequestKind]int) *admission {
	a := &admission{bound: map[RequestKind]int64{}, inFlight: map[RequestKind]*atomic.Int64{}, shed: map[RequestKind]*atomic.Uint64{},
		endingAgents: map[string]bool{}}
	for _, k := range RequestKinds {
		b, ok := bounds[k]
		if !ok || b == 0 {
			b = DefaultMaxInFlight[k]
		}
		a.bound[k], a.inFlight[k], a.shed[k] = int64(b), new(atomic.Int64), new(atomic.Uint64)
	}
	a.endingBound = endingReserve(a.bound[KindEvents])
	return a
}

// checkMaxInFlight refuses a bound of a kind that is not one, or below 0
// (0 takes the default).
func checkMaxInFlight(bounds map[RequestKind]int) error {
	for k, b := range bounds {
		if _, ok := DefaultMaxInFlight[k]; !ok {
			return fmt.Errorf("controlplane: max in flight: %q is not a kind of request (want one of heartbeat, claim, events, submit, read, other)", k)
		}
		if b < 0 {
			return fmt.Errorf("controlplane: max in flight of %s is %d: want 1 or more (0: the default, %d)", k, b, DefaultMaxInFlight[k])
		}
	}
	return nil
}

// reserveKey marks the context of a batch admitted on the reserve of
// batches that end a task; its value is the agent that holds the slot,
// once takeReserve checked the batch.
type reserveKey struct{}

// reserveSlot is an admitted batch's hold on the reserve.
type reserveSlot struct{ agentID string }

// idleKey carries a function through an admitted request's context that
// ends its count in flight early: a claim about to wait for work.
type idleKey struct{}

// admit serves r with next if fewer than the kind's bound are in flight;
// else it sheds it: 503 with Retry-After, at once.
func (s *Server) admit(kind RequestKind, next http.Handler) http.Handler {
	n, bound, shed := s.admission.inFlight[kind], s.admission.bound[kind], s.admission.shed[kind]
	// Agents' requests shed may make an agent late; people's (reads,
	// submits) do not, and a script polling the API must not hold every
	// lease from lapsing.
	agents := kind == KindHeartbeat || kind == KindClaim || kind == KindEvents
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > bound {
			n.Add(-1)
			if agents {
				s.watchdog.strained()
			}
			if kind == KindEvents && r.URL.Query().Get(api.EndsTaskQuery) == "1" && s.serveOnReserve(w, r, next) {
				return
			}
			shed.Add(1)
			writeShed(w, fmt.Sprintf("the control plane is busy: %d %s requests in flight, its bound; nothing was done, send it again in %s", bound, kind, ShedRetryAfter))
			return
		}
		var once sync.Once
		leave := func() { once.Do(func() { n.Add(-1) }) }
		defer leave()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), idleKey{}, leave)))
	})
}

// shedError is a request shed once its handler read it: answered as
// admission sheds, 503 with Retry-After.
type shedError struct{ why string }

func (e *shedError) Error() string { return e.why }

// writeShed answers a request shed: 503 with Retry-After, and why.
func writeShed(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(ShedRetryAfter/time.Second)))
	writeJSON(w, http.StatusServiceUnavailable, api.ErrorBody{Error: why})
}

// serveOnReserve serves a batch that says it ends a task on the reserve
// past the events' bound, when a slot is free; false when none is.
func (s *Server) serveOnReserve(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
	a := s.admission
	if a.ending.Add(1) > a.endingBound {
		a.ending.Add(-1)
		return false
	}
	slot := &reserveSlot{}
	defer func() {
		if slot.agentID != "" {
			a.endingMu.Lock()
			delete(a.endingAgents, slot.agentID)
			a.endingMu.Unlock()
		}
		a.ending.Add(-1)
	}()
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), reserveKey{}, slot)))
	return true
}

// takeReserve checks a batch admitted on the reserve of batches that end
// a task, once decoded and its caller known: it must hold a task's
// completion, and its agent no other slot of the reserve. Else it is
// shed, nothing of it done. A batch admitted within the events' bound
// passes as it is.
func (a *admission) takeReserve(ctx context.Context, req api.EventsRequest) error {
	slot, ok := ctx.Value(reserveKey{}).(*reserveSlot)
	if !ok {
		return nil
	}
	shed := func(why string) error {
		a.shed[KindEvents].Add(1)
		return &shedError{why: fmt.Sprintf(
			"the control plane is busy: %d events requests in flight, its bound, and %s; nothing was done, send it again in %s", a.bound[KindEvents], why, ShedRetryAfter)}
	}
	if !slices.ContainsFunc(req.Events, func(ev api.Event) bool { return ev.Kind == state.EventComplete }) {
		return shed("the batch ends no task (its reserve is for batches that hold a task's completion)")
	}
	a.endingMu.Lock()
	defer a.endingMu.Unlock()
	if a.endingAgents[req.AgentID] {
		return shed("agent " + req.AgentID + " has a batch on the reserve of batches that end a task already")
	}
	a.endingAgents[req.AgentID] = true
	slot.agentID = req.AgentID
	return nil
}

// idle ends ctx's request's count in flight: it waits, and holds nothing.
func idle(ctx context.Context) {
	if leave, ok := ctx.Value(idleKey{}).(func()); ok {
		leave()
	}
}

// InFlightByKind counts the requests in flight now, by kind (event
// batches on the reserve of those that end a task among the events).
func (s *Server) InFlightByKind() map[string]int {
	out := make(map[string]int, len(RequestKinds))
	for _, k := range RequestKinds {
		out[string(k)] = int(s.admission.inFlight[k].Load())
	}
	out[string(KindEvents)] += int(s.admission.ending.Load())
	return out
}

// ShedByKind counts the requests shed since the start, by kind.
func (s *Server) ShedByKind() map[string]uint64 {
	out := make(map[string]uint64, len(RequestKinds))
	for _, k := range RequestKinds {
		out[string(k)] = s.admission.shed[k].Load()
	}
	return out
}

// Pool reports the store's pool of connections, when it has one.
func (s *Server) Pool() (store.PoolFigures, bool) {
	if p, ok := s.store.(store.PoolReporter); ok {
		return p.Pool(), true
	}
	return store.PoolFigures{}, false
}

// The control plane itself may be what makes agents late: while it sheds
// agents' requests (heartbeats, claims, event batches), or answers
// heartbeats slowly, an agent whose heartbeat did
// not come may be one whose heartbeat waited here. Then no lease lapses:
// not while it is strained, nor for three heartbeat intervals after, so
// that every agent had its chance to be heard again (as at the start).
//
// slowHeartbeat is how long a heartbeat takes to answer that counts as
// the control plane strained.
const slowHeartbeat = time.Second

// strained records that the control plane is the bottleneck now.
func (w *watchdog) strained() {
	now := w.opts.Now()
	w.mu.Lock()
	if now.After(w.strainedAt) {
		w.strainedAt = now
	}
	w.mu.Unlock()
}

// calmSince is when leases may begin to lapse from: the start, or the
// last moment the control plane was strained, whichever came last.
func (w *watchdog) calmSince() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.strainedAt.After(w.started) {
		return w.strainedAt
	}
	return w.started
}

// LapsesHeld reports whether leases are kept from lapsing now because the
// control plane was strained within three heartbeat intervals.
func (s *Server) LapsesHeld() bool { return s.watchdog.lapsesHeld() }

func (w *watchdog) lapsesHeld() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.strainedAt.IsZero() && w.opts.Now().Sub(w.strainedAt) <= 3*w.opts.HeartbeatInterval
}
