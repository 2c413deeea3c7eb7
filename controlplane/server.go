package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gofrs/flock"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"

	"github.com/edgeagent/agent/internal/private"
	"github.com/edgeagent/agent/internal/utc"
)

// ServerOptions configure the reference control plane. Zero fields take
// the defaults their comments give.
type ServerOptions struct {
	// Dir holds the server's files: tasks/ (one JSON file per task) and
	// events/ (accepted events, one JSONL file per task). Required.
	Dir string
	// Token is the registration secret: it enrols agents (POST
	// /v1/agents/register) and does nothing else. Required, at least
	// MinTokenLen characters.
	Token string
	// OperatorTokens are the people's tokens (one per person): they
	// submit, read, cancel, retry, answer approvals and manage agents.
	// At least one is required, each at least MinTokenLen characters and
	// none the registration secret.
	OperatorTokens []string
	// Lease is how long a claim lasts without renewal. Default 60 s.
	Lease time.Duration
	// HeartbeatInterval is what agents are told to use. An agent silent for
	// three intervals is offline and its leases lapse. Default 10 s.
	HeartbeatInterval time.Duration
	// Limits are the watchdog's queued and stall limits.
	Limits state.Limits
	// MaxAttemptOutput caps the log output stored for one attempt: its
	// log events' bytes in the events file. Past it, log events are
	// accepted and counted, their lines not stored; one stored event marks
	// the cut. Default DefaultMaxAttemptOutput (8 MiB).
	MaxAttemptOutput int64
	Logger           *slog.Logger
	Now              func() time.Time
}

// Server is the reference control plane. It keeps every task in memory and
// on disk, and serializes all changes under one lock: it is a reference,
// not a fleet server. Events are on disk only, read a page at a time
// outside the lock; a task's output is capped per attempt; the keys of
// ended tasks leave memory (keys.go).
type Server struct {
	opts ServerOptions
	log  *slog.Logger

	started time.Time // leases do not lapse until agents had time to report

	mu     sync.Mutex
	store  *state.Store
	events events
	tasks  map[string]*state.Task
	order  []taskRef // the tasks, oldest first: the lists' order
	// keys holds, by task, the idempotency keys of the tasks that have
	// not ended, or ended lately (see keys.go).
	keys   map[string]map[string]struct{}
	agents map[string]*agentState
	// batches counts events batches, for the fault suite's crash points.
	batches  int
	lock     *flock.Flock
	registry *registry

	// operators are the SHA-256 of the operator tokens; throttle counts
	// failed authentications per address.
	operators map[[sha256.Size]byte]bool
	throttle  throttle

	// eventResults counts the events answered, by status, for metrics.
	eventResults map[api.EventStatus]uint64
}

// Close releases the server's directory.
func (s *Server) Close() error { return s.lock.Unlock() }

// NewServer opens (creating) the server's directory and loads its tasks,
// brings each up to date with the events a crash left unapplied, and
// reads the keys of those that have not ended. Task files that cannot be
// read are logged and left alone; the others load.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Dir == "" || opts.Token == "" {
		return nil, errors.New("controlplane: a directory and a registration secret are required")
	}
	operators, err := checkTokens(opts.Token, opts.OperatorTokens)
	if err != nil {
		return nil, err
	}
	if opts.Lease <= 0 {
		opts.Lease = 60 * time.Second
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 10 * time.Second
	}
	if opts.MaxAttemptOutput <= 0 {
		opts.MaxAttemptOutput = DefaultMaxAttemptOutput
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = utc.Now
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	// What is in the directory decides what agents are handed: nobody
	// else may write there.
	if err := private.Dir("state directory", opts.Dir); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	// One control plane per directory: two would each believe their own
	// copy of the tasks.
	lock := flock.New(filepath.Join(opts.Dir, "lock"), flock.SetPermissions(0o600))
	if ok, err := lock.TryLock(); err != nil {
		return nil, fmt.Errorf("controlplane: lock %s: %w", lock.Path(), err)
	} else if !ok {
		return nil, fmt.Errorf("controlplane: %s is held: another control plane uses %s", lock.Path(), opts.Dir)
	}
	started := false
	defer func() {
		if !started {
			lock.Unlock()
		}
	}()
	st, err := state.OpenStore(filepath.Join(opts.Dir, "tasks"))
	if err != nil {
		return nil, err
	}
	ev := events{dir: filepath.Join(opts.Dir, "events")}
	if err := os.MkdirAll(ev.dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	for _, sub := range []string{"tasks", "events"} {
		if err := private.Dir("state directory", filepath.Join(opts.Dir, sub)); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	}
	tasks, err := loadTasks(st)
	if err != nil {
		opts.Logger.Error("some task files could not be read; they are left alone", "err", err)
	}
	reg, err := openRegistry(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	s := &Server{opts: opts, log: opts.Logger, started: opts.Now(), store: st, events: ev, tasks: tasks, keys: map[string]map[string]struct{}{}, agents: map[string]*agentState{}, lock: lock, registry: reg, operators: operators}
	s.orderTasks()
	for _, ref := range s.order {
		t := s.tasks[ref.id]
		if err := s.recover(t); err != nil {
			return nil, err
		}
		if !t.Phase.Terminal() {
			if s.keys[t.ID], err = ev.keys(t.ID, t.EventsBytes); err != nil {
				return nil, fmt.Errorf("controlplane: keys of task %s: %w", t.ID, err)
			}
		}
	}
	started = true
	return s, nil
}

// recover brings a task file up to date with its stored events: a crash
// between storing a batch's events and saving the task leaves the file
// behind, and the events past the size it records (EventsBytes) say what
// it missed. They are applied again as they were then (same agent, same
// time). Only those are read. A torn last line is cut first.
func (s *Server) recover(t *state.Task) error {
	size, err := s.events.repair(t.ID)
	if err != nil {
		return fmt.Errorf("controlplane: repair the events of task %s: %w", t.ID, err)
	}
	if t.EventsApplied == nil {
		// A file from before events were counted: all are taken as
		// applied, as they were then.
		_, n, err := s.events.skipLines(t.ID, math.MaxInt, size)
		if err != nil {
			return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
		t.EventsApplied, t.EventsBytes = &n, size
		return nil
	}
	from := t.EventsBytes
	if from == 0 && *t.EventsApplied > 0 {
		// A file from before the size was kept: count the lines.
		if from, _, err = s.events.skipLines(t.ID, *t.EventsApplied, size); err != nil {
			return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
	}
	switch {
	case size == from:
		t.EventsBytes = size
		return nil
	case size < from:
		s.log.Error("a task's events file is shorter than its task file says; events were lost", "task", t.ID, "file_bytes", size, "task_says", from)
		t.EventsBytes = size
		return nil
	}
	missed, err := s.events.read(t.ID, from, size)
	if err != nil {
		return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
	}
	applied := *t.EventsApplied
	for i, e := range missed {
		if reason := s.apply(e.AgentID, e.Event, e.ReceivedAt); reason != "" {
			s.log.Warn("replaying a stored event after a crash: not applied", "task", t.ID, "key", e.Key, "reason", reason)
		} else if e.Kind == state.EventLog {
			if l, err := decodeLog(e.Payload); err == nil {
				replayLog(t, e, l, applied+i+1)
			}
		}
	}
	n := applied + len(missed)
	t.EventsApplied, t.EventsBytes = &n, size
	if err := s.save(t); err != nil {
		return fmt.Errorf("controlplane: bring task %s up to date: %w", t.ID, err)
	}
	s.log.Info("task brought up to date with its stored events after a crash", "task", t.ID, "events", len(missed))
	return nil
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	api := http.NewServeMux()
	for _, rt := range s.routes() {
		api.Handle(rt.pattern, guard(rt))
	}
	mux.Handle("/v1/", s.authorize(notePattern(api)))
	return mux
}

// routes are the API's endpoints, each with the principals it serves (see
// auth.go): the one place that says who may do what.
func (s *Server) routes() []route {
	const (
		operator     = principalOperator
		agent        = principalAgent
		registration = principalRegistration
	)
	return []route{
		{"POST /v1/agents/register", registration | agent, func(w http.ResponseWriter, r *http.Request) {
			handle(func(req api.RegisterRequest) (api.RegisterResponse, error) { return s.register(r.Context(), req) })(w, r)
		}},
		{"POST /v1/agents/{id}/revoke", operator, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.revoke(r.PathValue("id"))
			reply(w, v, err)
		}},
		{"POST /v1/agents/heartbeat", agent, agentOnly(s.heartbeat, func(r api.HeartbeatRequest) string { return r.AgentID })},
		{"POST /v1/tasks/claim", agent, agentOnly(s.claim, func(r api.ClaimRequest) string { return r.AgentID })},
		{"POST /v1/tasks/release", agent, agentOnly(s.release, func(r api.ReleaseRequest) string { return r.AgentID })},
		{"POST /v1/events", agent, agentOnly(s.acceptEvents, func(r api.EventsRequest) string { return r.AgentID })},
		{"POST /v1/tasks", operator, handle(s.createTask)},
		{"GET /v1/tasks", operator, s.serveTasks},
		{"GET /v1/tasks/{id}", operator | agent, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.getTask(r.Context(), r.PathValue("id"))
			reply(w, v, err)
		}},
		{"GET /v1/tasks/{id}/events", operator | agent, s.serveEvents},
		{"POST /v1/tasks/{id}/cancel", operator, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.cancelTask(r.PathValue("id"))
			reply(w, v, err)
		}},
		{"POST /v1/tasks/{id}/retry", operator, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.retryTask(r.PathValue("id"))
			reply(w, v, err)
		}},
		{"POST /v1/tasks/{id}/reply", operator, func(w http.ResponseWriter, r *http.Request) {
			handle(func(req api.ReplyRequest) (api.TaskView, error) { return s.replyTask(r.PathValue("id"), req) })(w, r)
		}},
		{"GET /v1/agents", operator, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.listAgents()) }},
		{"GET /v1/whoami", operator | agent | registration, func(w http.ResponseWriter, r *http.Request) {
			c := callerOf(r.Context())
			writeJSON(w, http.StatusOK, api.WhoAmI{Principal: c.principal.wire(), AgentID: c.agentID})
		}},
	}
}

// register gives an agent its own token: with the registration secret for
// an id nobody holds, with the agent's own token to replace it.
func (s *Server) register(ctx context.Context, req api.RegisterRequest) (api.RegisterResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.RegisterResponse{}, err
	}
	c := callerOf(ctx)
	if c.principal == principalAgent && c.agentID != req.AgentID {
		return api.RegisterResponse{}, &httpError{http.StatusForbidden, fmt.Sprintf("forbidden: this token is agent %s's; it renews only its own registration", c.agentID)}
	}
	tok, err := s.registry.register(req.AgentID, c.principal == principalAgent)
	if errors.Is(err, errRegistered) {
		s.log.Warn("registration refused: the agent id is held", "agent", req.AgentID)
		return api.RegisterResponse{}, &httpError{http.StatusConflict, fmt.Sprintf(
			"agent %s is registered already, with another token: the registration secret does not take over an id; renew with the agent's own token, or have an operator free the id (agent agents revoke %s)", req.AgentID, req.AgentID)}
	}
	if err != nil {
		return api.RegisterResponse{}, fmt.Errorf("register %s: %w", req.AgentID, err)
	}
	s.log.Info("agent registered", "agent", req.AgentID, "renewed", c.principal == principalAgent)
	return api.RegisterResponse{AgentID: req.AgentID, Token: tok}, nil
}

// revoke forgets an agent's token, at an operator's request: the agent's
// requests are refused (401) from now on, and its id can be registered
// again with the registration secret.
func (s *Server) revoke(id string) (api.RevokeResponse, error) {
	if err := checkAgentID(id); err != nil {
		return api.RevokeResponse{}, err
	}
	ok, err := s.registry.revoke(id)
	if err != nil {
		return api.RevokeResponse{}, fmt.Errorf("revoke %s: %w", id, err)
	}
	if !ok {
		return api.RevokeResponse{}, &httpError{http.StatusNotFound, fmt.Sprintf("agent %s is not registered", id)}
	}
	s.log.Info("agent's token revoked by an operator", "agent", id)
	return api.RevokeResponse{AgentID: id, Revoked: true}, nil
}

// agentOnly wraps an agent endpoint: its body's agent_id must be the
// caller's own.
func agentOnly[In, Out any](fn func(In) (Out, error), agentID func(In) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		handle(func(in In) (Out, error) {
			if err := asAgent(r.Context(), agentID(in)); err != nil {
				var zero Out
				return zero, err
			}
			return fn(in)
		})(w, r)
	}
}

// httpError is an error with the status to answer it with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// checkAgentID refuses a missing or overlong agent id.
func checkAgentID(id string) error {
	switch {
	case id == "":
		return badRequest("agent_id is required")
	case len(id) > api.MaxIDBytes:
		return badRequest("agent_id is over %d bytes", api.MaxIDBytes)
	}
	return nil
}

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// handle decodes a JSON body of at most twice the batch limit, calls fn
// and writes its answer.
func handle[In, Out any](fn func(In) (Out, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in In
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 2*api.MaxBatchBytes))
		if err := dec.Decode(&in); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeJSON(w, http.StatusRequestEntityTooLarge, api.ErrorBody{Error: "request body too large"})
				return
			}
			writeJSON(w, http.StatusBadRequest, api.ErrorBody{Error: "bad JSON: " + err.Error()})
			return
		}
		out, err := fn(in)
		reply(w, out, err)
	}
}

func reply(w http.ResponseWriter, v any, err error) {
	var he *httpError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.As(err, &he):
		writeJSON(w, he.status, api.ErrorBody{Error: he.msg})
	default:
		writeJSON(w, http.StatusInternalServerError, api.ErrorBody{Error: err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// save writes a task, logging a failure: the in-memory state stays right
// and the next change tries again.
func (s *Server) save(t *state.Task) error {
	if err := s.store.Save(t); err != nil {
		s.log.Error("save task", "task", t.ID, "err", err)
		return err
	}
	return nil
}

func (s *Server) createTask(req api.CreateTaskRequest) (api.TaskView, error) {
	switch {
	case strings.TrimSpace(req.Prompt) == "":
		return api.TaskView{}, badRequest("prompt is required")
	case len(req.Prompt) > api.MaxPromptBytes:
		return api.TaskView{}, badRequest("prompt is longer than %s", sizeText(api.MaxPromptBytes))
	case req.Prefer != "" && req.Prefer != api.PreferAny && req.Prefer != api.PreferGUI:
		return api.TaskView{}, badRequest("prefer %q: want gui or any", req.Prefer)
	case req.MaxAttempts < 0 || req.MaxAttempts > 20:
		return api.TaskView{}, badRequest("max_attempts %d: want 0 (the agent's default) to 20", req.MaxAttempts)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	t := state.NewTask(newID("t-", 5), req.Prompt, now)
	t.Title, t.Prefer, t.MaxAttempts = req.Title, string(req.Prefer), req.MaxAttempts
	if utf8.RuneCountInString(t.Title) > api.MaxTitleRunes {
		t.Title = state.Ellipsize(t.Title, api.MaxTitleRunes)
	}
	none := 0
	t.EventsApplied = &none
	if t.Title == "" {
		t.Title = firstLine(req.Prompt)
	}
	if err := s.save(t); err != nil {
		return api.TaskView{}, err
	}
	s.tasks[t.ID] = t
	s.place(t)
	s.keys[t.ID] = map[string]struct{}{}
	return view(t), nil
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "@") {
			return state.Ellipsize(l, 80)
		}
	}
	return "untitled"
}

// view copies a task for an answer, deeply: the answer is encoded after
// the lock is released, while events go on changing the task.
func view(t *state.Task) api.TaskView {
	v := api.TaskView{Task: *t.Clone(), ProgressCard: state.ProgressCard(t)}
	v.OutputCutLines, v.OutputCutBytes = outputCut(t)
	return v
}

// sorted returns the tasks oldest first. mu is held.
func (s *Server) sorted() []*state.Task {
	list := make([]*state.Task, len(s.order))
	for i, ref := range s.order {
		list[i] = s.tasks[ref.id]
	}
	return list
}

func (s *Server) task(id string) (*state.Task, error) {
	t := s.tasks[id]
	if t == nil {
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("no task %q", id)}
	}
	return t, nil
}

func (s *Server) getTask(ctx context.Context, id string) (api.TaskView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchdog(s.opts.Now())
	t, err := s.readable(ctx, id)
	if err != nil {
		return api.TaskView{}, err
	}
	return view(t), nil
}

// readable returns a task the caller may read: any, for an operator; one
// it holds the lease on (lapsed or not), for an agent. mu is held.
func (s *Server) readable(ctx context.Context, id string) (*state.Task, error) {
	c := callerOf(ctx)
	t := s.tasks[id]
	if c.principal == principalAgent && (t == nil || t.Lease == nil || t.Lease.AgentID != c.agentID) {
		return nil, &httpError{http.StatusForbidden, fmt.Sprintf("forbidden: agent %s holds no lease on task %q; an agent reads only the tasks it holds", c.agentID, id)}
	}
	return s.task(id)
}

// cancelTask cancels a queued task at once; a running one is marked, and
// its agent is told in its next heartbeat answer.
func (s *Server) cancelTask(id string) (api.TaskView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.task(id)
	if err != nil {
		return api.TaskView{}, err
	}
	now := s.opts.Now()
	switch {
	case t.Phase.Terminal():
		return api.TaskView{}, &httpError{http.StatusConflict, fmt.Sprintf("task %s is already %s", id, t.Phase)}
	case t.Phase == state.PhaseQueued:
		if err := t.Transition(state.PhaseCancelled, "cancelled before it was claimed", now); err != nil {
			return api.TaskView{}, err
		}
	default:
		t.CancelRequested = true
	}
	t.UpdatedAt = now
	if err := s.save(t); err != nil {
		return api.TaskView{}, err
	}
	return view(t), nil
}

// retryTask puts a recoverable_failed task back in the queue at a
// person's request: the agent that claims it runs the next attempt, the
// attempts before it kept. Any other phase is a conflict, said in one line.
func (s *Server) retryTask(id string) (api.TaskView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.task(id)
	if err != nil {
		return api.TaskView{}, err
	}
	if t.Phase != state.PhaseRecoverableFailed {
		why := "only a recoverable_failed task can be retried"
		if !t.Phase.Terminal() {
			why = "it has not ended; " + why
		}
		return api.TaskView{}, &httpError{http.StatusConflict, fmt.Sprintf("task %s is %s: %s", id, t.Phase, why)}
	}
	before := t.Clone()
	if err := t.RetryByPerson(s.opts.Now()); err != nil {
		return api.TaskView{}, &httpError{http.StatusConflict, err.Error()}
	}
	if err := s.save(t); err != nil {
		s.tasks[id] = before // not retried after all: a restart would not know it
		return api.TaskView{}, err
	}
	s.log.Info("task retried by a person", "task", id, "attempts", len(t.Attempts))
	return view(t), nil
}

// replyTask records a person's answer to the task's approval request; the
// agent holding the task gets it in its next heartbeat answer.
func (s *Server) replyTask(id string, req api.ReplyRequest) (api.TaskView, error) {
	if req.Decision != api.DecisionAccept && req.Decision != api.DecisionDecline {
		return api.TaskView{}, badRequest("decision %q: want accept or decline", req.Decision)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.task(id)
	if err != nil {
		return api.TaskView{}, err
	}
	switch {
	case t.Phase != state.PhaseAwaitingReply || t.AwaitingReply == nil:
		return api.TaskView{}, &httpError{http.StatusConflict, fmt.Sprintf("task %s is %s, not awaiting a reply", id, t.Phase)}
	case req.RequestID != "" && req.RequestID != t.AwaitingReply.ID:
		return api.TaskView{}, &httpError{http.StatusConflict, fmt.Sprintf("task %s awaits a reply to request %s, not %s", id, t.AwaitingReply.ID, req.RequestID)}
	case t.Reply != nil && t.Reply.Decision != string(req.Decision):
		return api.TaskView{}, &httpError{http.StatusConflict, fmt.Sprintf("request %s was already answered: %s", t.AwaitingReply.ID, t.Reply.Decision)}
	}
	now := s.opts.Now()
	t.Reply = &state.Reply{RequestID: t.AwaitingReply.ID, Decision: string(req.Decision), At: now}
	t.UpdatedAt = now
	if err := s.save(t); err != nil {
		return api.TaskView{}, err
	}
	return view(t), nil
}

func (s *Server) listAgents() []api.AgentView {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	s.watchdog(now)
	out := []api.AgentView{}
	for _, a := range s.agents {
		v := a.view
		v.Online = a.online(now, s.opts.HeartbeatInterval)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b api.AgentView) int { return strings.Compare(a.AgentID, b.AgentID) })
	return out
}

func (s *Server) heartbeat(req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.HeartbeatResponse{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	a := s.agents[req.AgentID]
	if a == nil {
		a = &agentState{}
		s.agents[req.AgentID] = a
	}
	switch req.State {
	case "", api.AgentRunning, api.AgentDraining, api.AgentOffline:
	default:
		return api.HeartbeatResponse{}, badRequest("state %q: want running, draining or offline", req.State)
	}
	a.view = api.AgentView{AgentID: req.AgentID, Hostname: req.Hostname, Version: req.Version, StartedAt: req.StartedAt,
		LastHeartbeat: now, Health: req.Health, Capacity: req.Capacity, Running: req.Running, Outbox: req.Outbox, State: req.State}
	if req.State == api.AgentOffline {
		s.log.Info("agent went offline", "agent", req.AgentID)
	}
	resp := api.HeartbeatResponse{ServerTime: now, HeartbeatIntervalS: s.opts.HeartbeatInterval.Seconds(), Cancel: []string{}}
	running := map[string]bool{}
	for _, r := range req.Running {
		running[r.TaskID] = true
		t := s.tasks[r.TaskID]
		switch {
		case t == nil, t.Phase.Terminal(), t.Phase == state.PhaseQueued, t.Lease != nil && t.Lease.AgentID != req.AgentID:
			// Unknown here, over, back in the queue, or someone else's: the
			// agent must not go on with it.
			resp.Cancel = append(resp.Cancel, r.TaskID)
			continue
		case t.Lease == nil || t.Lease.Lapsed:
			// The lease lapsed while the agent was away and nobody took the
			// task: its next event, under its lease id, takes it back.
			continue
		}
		t.Lease.ExpiresAt = now.Add(s.opts.Lease)
		if t.CancelRequested {
			resp.Cancel = append(resp.Cancel, t.ID)
		}
		if t.Phase == state.PhaseAwaitingReply && t.Reply != nil {
			resp.Replies = append(resp.Replies, api.ReplyDelivery{TaskID: t.ID, RequestID: t.Reply.RequestID, Decision: api.Decision(t.Reply.Decision)})
		}
	}
	s.reconcile(req.AgentID, running, now)
	s.watchdog(now)
	return resp, nil
}

// reconcile compares what an agent says it runs with the tasks leased to
// it. A task it was granted but does not run (its claim answer was lost on
// the way) goes back to the queue once the agent has left it out of two
// heartbeats in a row and the grant is two intervals old, so a heartbeat
// that raced the claim does not count. No attempt is spent: none began.
// mu is held.
func (s *Server) reconcile(agentID string, running map[string]bool, now time.Time) {
	a := s.agents[agentID]
	if a.missing == nil {
		a.missing = map[string]int{}
	}
	for _, t := range s.tasks {
		if t.Lease == nil || t.Lease.AgentID != agentID || t.Phase != state.PhaseClaimed || running[t.ID] {
			delete(a.missing, t.ID)
			continue
		}
		a.missing[t.ID]++
		if a.missing[t.ID] < 2 || now.Sub(t.Lease.GrantedAt) < 2*s.opts.HeartbeatInterval {
			continue
		}
		delete(a.missing, t.ID)
		reason := fmt.Sprintf("lease revoked: agent %s does not run it (its claim answer was lost?)", agentID)
		t.Lease = nil
		if err := t.Transition(state.PhaseQueued, reason, now); err != nil {
			s.log.Error("requeue a task its agent does not run", "task", t.ID, "err", err)
			continue
		}
		s.log.Info("task back in the queue: its agent does not run it", "task", t.ID, "agent", agentID)
		s.save(t)
	}
}

// release gives claimed tasks an agent will not run back to the queue.
func (s *Server) release(req api.ReleaseRequest) (struct{}, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return struct{}{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	for _, id := range req.TaskIDs {
		t := s.tasks[id]
		if t == nil || t.Lease == nil || t.Lease.AgentID != req.AgentID || t.Phase != state.PhaseClaimed {
			continue
		}
		t.Lease = nil
		if err := t.Transition(state.PhaseQueued, "released by "+req.AgentID, now); err == nil {
			s.save(t)
		}
	}
	return struct{}{}, nil
}

func (s *Server) claim(req api.ClaimRequest) (api.ClaimResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.ClaimResponse{}, err
	}
	if len(req.RequestID) > api.MaxIDBytes {
		return api.ClaimResponse{}, badRequest("request_id is over %d bytes", api.MaxIDBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	s.watchdog(now)
	resp := api.ClaimResponse{Tasks: []api.Claimed{}}
	if req.RequestID != "" {
		// The same claim asked again (its answer was lost on the way):
		// the same grant, not a second one.
		for _, t := range s.sorted() {
			if l := t.Lease; l != nil && l.AgentID == req.AgentID && l.ClaimID == req.RequestID && !t.Phase.Terminal() {
				l.ExpiresAt, l.Lapsed = now.Add(s.opts.Lease), false
				resp.Tasks = append(resp.Tasks, claimed(t, *l))
			}
		}
		if len(resp.Tasks) > 0 {
			return resp, nil
		}
	}
	if req.HealthGrade == health.Unavailable || req.Max <= 0 {
		return resp, nil
	}
	for _, t := range s.sorted() {
		if len(resp.Tasks) >= min(req.Max, 50) {
			break
		}
		if t.Phase != state.PhaseQueued {
			continue
		}
		// A task that needs the executor's app server goes to an available
		// agent when one is online; a degraded one gets it otherwise.
		if api.Prefer(t.Prefer) == api.PreferGUI && req.HealthGrade == health.Degraded && s.availableAgentOnline(req.AgentID, now) {
			continue
		}
		lease := state.Lease{ID: newID("lease-", 6), AgentID: req.AgentID, ExpiresAt: now.Add(s.opts.Lease), ClaimID: req.RequestID, GrantedAt: now}
		if err := t.Transition(state.PhaseClaimed, "claimed by "+req.AgentID, now); err != nil {
			s.log.Error("claim", "task", t.ID, "err", err)
			continue
		}
		t.Lease = &lease
		if err := s.save(t); err != nil {
			// Not granted after all: a claim that is not on disk would be
			// forgotten by a restart while the agent runs the task.
			t.Lease = nil
			_ = t.Transition(state.PhaseQueued, "", now)
			return resp, fmt.Errorf("claim %s: %w", t.ID, err)
		}
		resp.Tasks = append(resp.Tasks, claimed(t, lease))
	}
	return resp, nil
}

// claimed is task t granted under lease. The lease goes once, beside the
// task: a copy in the task too would say the same twice (every agent reads
// this one and puts it in the task it keeps).
func claimed(t *state.Task, lease state.Lease) api.Claimed {
	c := api.Claimed{Task: *t.Clone(), Lease: lease}
	c.Task.Lease = nil
	return c
}

// availableAgentOnline reports whether an agent other than except is online
// and available. mu is held.
func (s *Server) availableAgentOnline(except string, now time.Time) bool {
	for id, a := range s.agents {
		if id != except && a.online(now, s.opts.HeartbeatInterval) && a.view.Health.Grade == health.Available {
			return true
		}
	}
	return false
}

// RunWatchdog runs the watchdog every period until ctx is done. The
// watchdog also runs on every claim, event batch and heartbeat.
func (s *Server) RunWatchdog(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			s.watchdog(s.opts.Now())
			s.mu.Unlock()
		}
	}
}

// watchdog applies the rules: tasks queued too long expire, stalled tasks
// end, and the leases of offline agents lapse (a task still only claimed
// goes back to the queue). mu is held.
func (s *Server) watchdog(now time.Time) {
	defer s.dropKeys(now)
	// Just started, the server knows no agent yet: give them three
	// heartbeat intervals to report before any lease lapses.
	settled := now.Sub(s.started) > 3*s.opts.HeartbeatInterval
	for _, t := range s.tasks {
		changed := false
		if settled && t.Lease != nil && !t.Lease.Lapsed && now.After(t.Lease.ExpiresAt) && !t.Phase.Terminal() {
			if a := s.agents[t.Lease.AgentID]; a == nil || !a.online(now, s.opts.HeartbeatInterval) {
				s.log.Info("lease lapsed", "task", t.ID, "agent", t.Lease.AgentID)
				if t.Phase == state.PhaseClaimed {
					t.Lease = nil
					t.Transition(state.PhaseQueued, "lease lapsed before the executor started", now)
				} else {
					// Still bound to its agent and lease id: only they
					// take it back (see apply).
					t.Lease.Lapsed = true
				}
				changed = true
			}
		}
		if v, ok := state.Watch(t, now, s.opts.Limits); ok {
			if err := t.Transition(v.Phase, v.Reason, now); err == nil {
				s.log.Info("watchdog", "task", t.ID, "phase", v.Phase, "reason", v.Reason)
				changed = true
			}
		}
		if changed {
			s.save(t)
		}
	}
}
