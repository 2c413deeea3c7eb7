package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/console"
	"github.com/edgeagent/agent/controlplane/store"
)

// consoleBackend is the console's backend (console.Backend): the web
// console reads and acts through the rules, with their errors as
// *console.Error, never on the store itself. Only signing in (Identify,
// SessionKey) is the HTTP layer's: the operator tokens and the throttle
// of failed authentications are auth's, the Server's.
type consoleBackend struct {
	rules *rules
	auth  *Server
	// stopping is closed when the server stops waits (StopWaits).
	stopping <-chan struct{}
}

// ConsoleBackend is what the web console reads and acts through: the
// rules, as package console asks for them.
func (s *Server) ConsoleBackend() console.Backend {
	return consoleBackend{rules: s.rules, auth: s, stopping: s.dispatch.stopWaits}
}

// console is the web console, served beside the API.
func (s *Server) console() http.Handler {
	return console.New(console.Options{Backend: s.ConsoleBackend(), PublicURL: s.opts.PublicURL, Logger: s.log, Now: s.opts.Now})
}

// consoleErr is err as the console shows it: the API's status and
// message.
func consoleErr(err error) error {
	var he *ruleError
	if errors.As(err, &he) {
		return &console.Error{Status: statusFor(he.kind), Msg: he.msg}
	}
	return err
}

// Identify says whose token tok is; a token nobody holds counts against
// addr as the API's failed authentications do.
func (b consoleBackend) Identify(ctx context.Context, tok, addr string) (console.Identity, error) {
	who, ok, err := b.auth.identify(ctx, tok)
	var dead *ruleError
	if errors.As(err, &dead) {
		err = nil // a task token that is no longer good: nobody's
	}
	if err != nil {
		return console.Identity{}, err
	}
	if !ok {
		return console.Identity{Wait: b.auth.failedAuth(addr, "/signin")}, nil
	}
	id := console.Identity{Principal: who.principal.wire()}
	if who.principal == principalOperator {
		id.Operator = console.OperatorID(tok)
	}
	return id, nil
}

// SessionKey is the session key of the operator token whose id is
// operator, nil when none has it.
func (b consoleBackend) SessionKey(operator string) []byte {
	return b.auth.sessionKeys[operator]
}

// RevokeSession keeps a console session signed out in the store until
// expires: every replica, and this one after a restart, refuses it.
func (b consoleBackend) RevokeSession(ctx context.Context, nonce string, expires time.Time) error {
	return b.rules.store.RevokeSession(ctx, nonce, expires, b.rules.opts.Now())
}

// SessionRevoked reports whether a console session was signed out, as
// the store keeps it.
func (b consoleBackend) SessionRevoked(ctx context.Context, nonce string) (bool, error) {
	return b.rules.store.SessionRevoked(ctx, nonce)
}

// TaskPage is a page of the tasks q selects, as GET /v1/tasks answers it.
func (b consoleBackend) TaskPage(ctx context.Context, q store.Query) ([]api.TaskView, string, error) {
	views, next, err := b.rules.tasksPage(ctx, q)
	return views, next, consoleErr(err)
}

// TaskView is a task, as GET /v1/tasks/{id} answers it to an operator.
func (b consoleBackend) TaskView(ctx context.Context, id string) (api.TaskView, error) {
	v, err := b.rules.getTask(ctx, id)
	return v, consoleErr(err)
}

// TaskDiff is a task's last diff, as GET /v1/tasks/{id}/diff answers it.
func (b consoleBackend) TaskDiff(ctx context.Context, id string) (api.Diff, error) {
	d, err := b.rules.taskDiff(ctx, id)
	return d, consoleErr(err)
}

// TaskEvents are a page of a task's events after seq after.
func (b consoleBackend) TaskEvents(ctx context.Context, id string, after, limit int) ([]api.StoredEvent, bool, error) {
	lines, more, err := b.rules.store.Events(ctx, id, after, limit, api.MaxEventsPageBytes)
	if err != nil {
		return nil, false, consoleErr(storeErr("read events", err))
	}
	out := make([]api.StoredEvent, 0, len(lines))
	for _, l := range lines {
		var e api.StoredEvent
		if err := json.Unmarshal(l.Line, &e); err != nil {
			return nil, false, fmt.Errorf("task %s: event %d: %w", id, l.Seq, err)
		}
		e.Seq = l.Seq
		out = append(out, e)
	}
	return out, more, nil
}

// AgentViews are every agent, as GET /v1/agents answers them.
func (b consoleBackend) AgentViews(ctx context.Context) ([]api.AgentView, error) {
	var all []api.AgentView
	after := ""
	for {
		page, next, err := b.rules.listAgents(ctx, after, api.MaxAgentsPage)
		if err != nil {
			return nil, consoleErr(err)
		}
		all = append(all, page...)
		if next == "" {
			return all, nil
		}
		after = next
	}
}

// CancelTask is POST /v1/tasks/{id}/cancel.
func (b consoleBackend) CancelTask(ctx context.Context, id string) (api.TaskView, error) {
	v, err := b.rules.cancelTask(ctx, id)
	return v, consoleErr(err)
}

// RetryTask is POST /v1/tasks/{id}/retry.
func (b consoleBackend) RetryTask(ctx context.Context, id string) (api.TaskView, error) {
	v, err := b.rules.retryTask(ctx, id)
	return v, consoleErr(err)
}

// ContinueTask is POST /v1/tasks/{id}/continue.
func (b consoleBackend) ContinueTask(ctx context.Context, id string) (api.TaskView, error) {
	v, err := b.rules.continueTask(ctx, id)
	return v, consoleErr(err)
}

// BudgetTask is POST /v1/tasks/{id}/budget.
func (b consoleBackend) BudgetTask(ctx context.Context, id string, req api.BudgetRequest) (api.TaskView, error) {
	v, err := b.rules.budgetTask(ctx, id, req)
	return v, consoleErr(err)
}

// CreateTask is POST /v1/tasks: the console's new-task form.
func (b consoleBackend) CreateTask(ctx context.Context, req api.CreateTaskRequest) (api.TaskView, error) {
	v, err := b.rules.createTask(ctx, req)
	return v, consoleErr(err)
}

// ReplyTask is POST /v1/tasks/{id}/reply.
func (b consoleBackend) ReplyTask(ctx context.Context, id string, req api.ReplyRequest) (api.TaskView, error) {
	v, err := b.rules.replyTask(ctx, id, req)
	return v, consoleErr(err)
}

// Stopping is closed when the server stops (StopWaits): the console's
// live streams end.
func (b consoleBackend) Stopping() <-chan struct{} { return b.stopping }

// failedAuth counts a failed authentication from addr (at path, for the
// log: never the token) and returns how long the address must wait when
// it is over the limit, zero when it is not.
func (s *Server) failedAuth(addr, path string) time.Duration {
	wait, crossed := s.throttle.fail(addr, s.opts.Now())
	if wait > 0 {
		if crossed {
			s.log.Warn("authentication failures throttled", "addr", addr, "path", path, "limit_per_minute", authFailuresPerWindow, "for", wait.Round(time.Second).String())
		}
		return wait
	}
	s.log.Warn("authentication failed", "addr", addr, "path", path)
	return 0
}
