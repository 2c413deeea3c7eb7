package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
)

// Handler is the HTTP API, and the web console (package console) on
// every path the API does not use.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	api := http.NewServeMux()
	for _, rt := range s.routes() {
		api.Handle(rt.pattern, s.admit(kindOf(rt.pattern), guard(rt)))
	}
	mux.Handle("/v1/", heartbeatsFirst(s.authorize(notePattern(api))))
	mux.Handle("/", s.console())
	return mux
}

// heartbeatsFirst marks a heartbeat's store calls, its caller's
// authentication first, to go ahead of other work (store.WithPriority):
// a control plane short of connections still hears its agents.
func heartbeatsFirst(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/agents/heartbeat" {
			r = r.WithContext(store.WithPriority(r.Context(), true))
		}
		next.ServeHTTP(w, r)
	})
}

// routes are the API's endpoints, each with the principals it serves (see
// auth.go): the one place that says who may do what.
func (s *Server) routes() []route {
	const (
		operator     = principalOperator
		agent        = principalAgent
		registration = principalRegistration
		task         = principalTask
	)
	return []route{
		{"POST /v1/agents/register", registration | agent, func(w http.ResponseWriter, r *http.Request) {
			handle(func(req api.RegisterRequest) (api.RegisterResponse, error) { return s.rules.register(r.Context(), req) })(w, r)
		}},
		{"POST /v1/agents/{id}/revoke", operator, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.rules.revoke(r.Context(), r.PathValue("id"))
			reply(w, v, err)
		}},
		{"POST /v1/agents/{id}/labels", operator, func(w http.ResponseWriter, r *http.Request) {
			handle(func(req api.LabelsRequest) (api.LabelsResponse, error) {
				return s.rules.labelAgent(r.Context(), r.PathValue("id"), req)
			})(w, r)
		}},
		{"POST /v1/agents/heartbeat", agent, agentOnly(s.rules.heartbeat, func(r api.HeartbeatRequest) string { return r.AgentID })},
		{"POST /v1/tasks/claim", agent, func(w http.ResponseWriter, r *http.Request) {
			// A claim may wait for work: until the agent hangs up at most.
			agentOnly(s.dispatch.claim, func(r api.ClaimRequest) string { return r.AgentID })(w, r)
		}},
		{"POST /v1/tasks/release", agent, agentOnly(s.rules.release, func(r api.ReleaseRequest) string { return r.AgentID })},
		{"POST /v1/events", agent, agentOnly(func(ctx context.Context, req api.EventsRequest) (api.EventsResponse, error) {
			if err := s.admission.takeReserve(ctx, req); err != nil {
				return api.EventsResponse{}, err
			}
			return s.rules.acceptEvents(ctx, req)
		}, func(r api.EventsRequest) string { return r.AgentID })},
		{"POST /v1/tasks", operator, func(w http.ResponseWriter, r *http.Request) {
			handle(func(req api.CreateTaskRequest) (api.TaskView, error) { return s.rules.createTask(r.Context(), req) })(w, r)
		}},
		{"GET /v1/tasks", operator, s.serveTasks},
		{"GET /v1/tasks/{id}", operator | agent | task, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.rules.getTask(r.Context(), r.PathValue("id"))
			reply(w, v, err)
		}},
		{"GET /v1/tasks/{id}/events", operator | agent | task, s.serveEvents},
		{"GET /v1/tasks/{id}/diff", operator | agent | task, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.rules.taskDiff(r.Context(), r.PathValue("id"))
			reply(w, v, err)
		}},
		// Subtasks: a task token's whole power, on its own task's subtasks.
		{"POST /v1/tasks/{id}/subtasks", operator | task, func(w http.ResponseWriter, r *http.Request) {
			handle(func(req api.CreateTaskRequest) (api.TaskView, error) {
				return s.rules.createSubtask(r.Context(), r.PathValue("id"), req)
			})(w, r)
		}},
		{"GET /v1/tasks/{id}/subtasks", operator | task, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.rules.subtasks(r.Context(), r.PathValue("id"))
			reply(w, v, err)
		}},
		{"POST /v1/tasks/{id}/cancel", operator | task, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.rules.cancelTask(r.Context(), r.PathValue("id"))
			reply(w, v, err)
		}},
		{"POST /v1/tasks/{id}/retry", operator, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.rules.retryTask(r.Context(), r.PathValue("id"))
			reply(w, v, err)
		}},
		{"POST /v1/tasks/{id}/continue", operator, func(w http.ResponseWriter, r *http.Request) {
			v, err := s.rules.continueTask(r.Context(), r.PathValue("id"))
			reply(w, v, err)
		}},
		{"POST /v1/tasks/{id}/budget", operator, func(w http.ResponseWriter, r *http.Request) {
			handle(func(req api.BudgetRequest) (api.TaskView, error) {
				return s.rules.budgetTask(r.Context(), r.PathValue("id"), req)
			})(w, r)
		}},
		{"POST /v1/tasks/{id}/reply", operator, func(w http.ResponseWriter, r *http.Request) {
			handle(func(req api.ReplyRequest) (api.TaskView, error) {
				return s.rules.replyTask(r.Context(), r.PathValue("id"), req)
			})(w, r)
		}},
		{"GET /v1/agents", operator, s.serveAgents},
		{"GET /v1/whoami", operator | agent | registration | task, func(w http.ResponseWriter, r *http.Request) {
			c := callerOf(r.Context())
			writeJSON(w, http.StatusOK, api.WhoAmI{Principal: c.principal.wire(), AgentID: c.agentID, TaskID: c.taskID})
		}},
	}
}

// agentOnly wraps an agent endpoint: its body's agent_id must be the
// caller's own.
func agentOnly[In, Out any](fn func(context.Context, In) (Out, error), agentID func(In) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		handle(func(in In) (Out, error) {
			if err := asAgent(r.Context(), agentID(in)); err != nil {
				var zero Out
				return zero, err
			}
			return fn(r.Context(), in)
		})(w, r)
	}
}

// statusFor is the HTTP status a refusal of kind k is answered with: the
// one place the rules' kinds of refusal become statuses (the API's and
// the console's).
func statusFor(k errKind) int {
	switch k {
	case errInvalid:
		return http.StatusBadRequest
	case errUnauthorized:
		return http.StatusUnauthorized
	case errForbidden:
		return http.StatusForbidden
	case errNotFound:
		return http.StatusNotFound
	case errConflict:
		return http.StatusConflict
	case errGone:
		return http.StatusGone
	case errUnserved:
		return http.StatusUnprocessableEntity
	case errUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// checkAgentID refuses a missing or overlong agent id.
func checkAgentID(id string) error {
	switch {
	case id == "":
		return invalidRequest("agent_id is required")
	case len(id) > api.MaxIDBytes:
		return invalidRequest("agent_id is over %d bytes", api.MaxIDBytes)
	}
	return nil
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
	var he *ruleError
	var sh *shedError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.As(err, &sh):
		writeShed(w, sh.why)
	case errors.As(err, &he):
		writeJSON(w, statusFor(he.kind), api.ErrorBody{Error: he.msg})
	default:
		writeJSON(w, http.StatusInternalServerError, api.ErrorBody{Error: err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
