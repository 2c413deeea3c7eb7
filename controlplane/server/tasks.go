package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/state"
)

func (s *Server) createTask(req api.CreateTaskRequest) (api.TaskView, error) {
	switch {
	case strings.TrimSpace(req.Prompt) == "":
		return api.TaskView{}, badRequest("prompt is required")
	case len(req.Prompt) > api.MaxPromptBytes:
		return api.TaskView{}, badRequest("prompt is longer than %s", bytesize.Text(api.MaxPromptBytes))
	case req.Prefer != "" && req.Prefer != api.PreferAny && req.Prefer != api.PreferGUI:
		return api.TaskView{}, badRequest("prefer %q: want gui or any", req.Prefer)
	case req.MaxAttempts < 0 || req.MaxAttempts > 20:
		return api.TaskView{}, badRequest("max_attempts %d: want 0 (the agent's default) to 20", req.MaxAttempts)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	t := state.NewTask(newID("t-", 5), req.Prompt, now)
	t.Title, t.Prefer, t.MaxAttempts = req.Title, req.Prefer, req.MaxAttempts
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
func view(t *state.Task) api.TaskView { return api.ViewOf(t.Clone()) }

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
	case t.Reply != nil && t.Reply.Decision != req.Decision:
		return api.TaskView{}, &httpError{http.StatusConflict, fmt.Sprintf("request %s was already answered: %s", t.AwaitingReply.ID, t.Reply.Decision)}
	}
	now := s.opts.Now()
	t.Reply = &state.Reply{RequestID: t.AwaitingReply.ID, Decision: req.Decision, At: now}
	t.UpdatedAt = now
	if err := s.save(t); err != nil {
		return api.TaskView{}, err
	}
	return view(t), nil
}
