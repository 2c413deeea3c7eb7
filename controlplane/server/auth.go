package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
)

// Principals: who a credential speaks for, and so what it may do. Each
// route of the API names the principals it serves (see routes in
// routes.go); every other credential gets 403 with a one-line reason.
//
//   - An operator is a person: submit, list, show, events, cancel, retry,
//     answer approvals, list, label and revoke agents. Operator tokens come from
//     --operator-token-file (one per person) or DIR/operator-token.
//   - An agent holds the token it got when it registered: heartbeat,
//     claim, release and events, only as itself, and reading the tasks it
//     holds a lease on.
//   - The registration secret (--token-file, DIR/token: every agent host
//     has it) only enrols an agent id nobody holds.
//   - A task is a running task's executor, holding the task token its
//     grant carried (tasktoken.go): it submits, lists, reads and cancels
//     children of its own task, and nothing else.
type principal uint8

const (
	principalOperator principal = 1 << iota
	principalAgent
	principalRegistration
	principalTask
)

func (p principal) String() string {
	var names []string
	for _, n := range []struct {
		p    principal
		name api.Principal
	}{{principalOperator, api.PrincipalOperator}, {principalAgent, api.PrincipalAgent}, {principalRegistration, api.PrincipalRegistration}, {principalTask, api.PrincipalTask}} {
		if p&n.p != 0 {
			names = append(names, string(n.name))
		}
	}
	return strings.Join(names, "|")
}

// wire is a caller's principal (one of them) as GET /v1/whoami says it.
func (p principal) wire() api.Principal { return api.Principal(p.String()) }

// caller is who made a request.
type caller struct {
	principal principal
	agentID   string // an agent's id
	taskID    string // a task token's task
}

type callerKey struct{}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// identify says whose token tok is, if anyone's. The registration secret
// is compared in constant time; operator and agent tokens are looked up
// by their SHA-256.
func (s *Server) identify(ctx context.Context, tok string) (caller, bool, error) {
	if tok == "" {
		return caller{}, false, nil
	}
	if strings.HasPrefix(tok, api.TaskTokenPrefix) {
		return s.identifyTask(ctx, tok)
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.Token)) == 1 {
		return caller{principal: principalRegistration}, true, nil
	}
	if s.operators[sha256.Sum256([]byte(tok))] {
		return caller{principal: principalOperator}, true, nil
	}
	id, err := s.store.AgentByToken(ctx, hashToken(tok))
	if err != nil || id == "" {
		return caller{}, false, err
	}
	return caller{principal: principalAgent, agentID: id}, true, nil
}

// authorize finds who makes the request: a request with no token, or one
// nobody holds, is 401, logged (address and path, never the token), and
// counted against its address; an address with too many such failures in
// a minute gets 429 for its failures until the minute is over.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		who, ok, err := s.identify(r.Context(), tok)
		var dead *ruleError
		if errors.As(err, &dead) {
			writeJSON(w, statusFor(dead.kind), api.ErrorBody{Error: dead.msg})
			return
		}
		if err != nil {
			s.log.Error("authentication: the store did not answer", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, api.ErrorBody{Error: "the control plane's store is unavailable; try again"})
			return
		}
		if !ok {
			addr := remoteHost(r)
			if wait := s.failedAuth(addr, r.URL.Path); wait > 0 {
				secs := int(wait.Seconds() + 0.999)
				w.Header().Set("Retry-After", strconv.Itoa(secs))
				writeJSON(w, http.StatusTooManyRequests, api.ErrorBody{Error: fmt.Sprintf("too many failed authentications from %s; try again in %ds", addr, secs)})
				return
			}
			writeJSON(w, http.StatusUnauthorized, api.ErrorBody{Error: "unauthorized: missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, who)))
	})
}

// remoteHost is the request's remote address without its port.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// route is one endpoint of the API and the principals it serves. Every
// route names at least one: Handler refuses to build a route that names
// none.
type route struct {
	pattern string
	allow   principal
	handler http.HandlerFunc
}

// guard answers 403, with the reason, to a caller the route does not
// serve.
func guard(rt route) http.Handler {
	if rt.allow == 0 {
		panic("controlplane: route " + rt.pattern + " names no principal")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := callerOf(r.Context()).principal; p&rt.allow == 0 {
			writeJSON(w, http.StatusForbidden, api.ErrorBody{Error: refusal(p, rt.allow)})
			return
		}
		rt.handler(w, r)
	})
}

// refusal says in one line why principal p may not use a route that
// serves allow, and what would.
func refusal(p, allow principal) string {
	switch {
	case p == principalRegistration:
		return "forbidden: the registration secret only registers agents (POST /v1/agents/register); people use an operator token (the control plane's --operator-token-file, or its DIR/operator-token)"
	case p == principalAgent && allow&principalOperator != 0:
		return "forbidden: an agent's token does its own work only (heartbeat, claim, release, events, its leased tasks); this endpoint takes an operator token"
	case p == principalOperator && allow&principalRegistration != 0:
		return "forbidden: registering an agent takes the registration secret (the control plane's --token-file, or its DIR/token), not an operator token"
	case p == principalOperator:
		return "forbidden: an operator token does not act as an agent; heartbeat, claim, release and events take the agent's own token"
	case p == principalTask:
		return "forbidden: a task token only submits, lists, reads and cancels its own task's subtasks (/v1/tasks/{its id}/subtasks)"
	}
	return fmt.Sprintf("forbidden: this endpoint serves %s tokens, not %s tokens", allow, p)
}

// asAgent refuses a request for agent agentID that the agent did not make
// with its own token.
func asAgent(ctx context.Context, agentID string) error {
	c := callerOf(ctx)
	switch {
	case c.agentID == "":
		return &ruleError{errForbidden, "forbidden: this endpoint needs the agent's own token: register first (POST /v1/agents/register)"}
	case c.agentID != agentID:
		return &ruleError{errForbidden, fmt.Sprintf("forbidden: this token is agent %s's, not %s's", c.agentID, agentID)}
	}
	return nil
}

// Failed authentication is throttled per remote address: after
// authFailuresPerWindow failures in a window, the address's failures are
// answered 429 until the window ends. Requests with a valid token are
// never throttled. At most authAddrsTracked addresses are kept; beyond
// them, new addresses share one count.
const (
	authFailuresPerWindow = 20
	authWindow            = time.Minute
	authAddrsTracked      = 10000
)

// throttle counts authentication failures per address in fixed windows.
type throttle struct {
	mu       sync.Mutex
	by       map[string]*failures
	overflow failures
}

type failures struct {
	since time.Time
	n     int
}

// fail counts a failure from addr at now. It returns how long the address
// must wait when it is over the limit (zero when it is not), and whether
// this failure is the one that crossed it.
func (t *throttle) fail(addr string, now time.Time) (wait time.Duration, crossed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]*failures{}
	}
	f := t.by[addr]
	if f == nil {
		if len(t.by) >= authAddrsTracked {
			for a, g := range t.by {
				if now.Sub(g.since) >= authWindow {
					delete(t.by, a)
				}
			}
		}
		if len(t.by) >= authAddrsTracked {
			f = &t.overflow
		} else {
			f = &failures{since: now}
			t.by[addr] = f
		}
	}
	if now.Sub(f.since) >= authWindow {
		f.since, f.n = now, 0
	}
	f.n++
	if f.n <= authFailuresPerWindow {
		return 0, false
	}
	return f.since.Add(authWindow).Sub(now), f.n == authFailuresPerWindow+1
}

// checkTokens refuses a registration secret or operator token that is too
// short or not one word, an operator token that is the registration
// secret, and no operator token at all. It returns the operator tokens'
// SHA-256. Errors never hold a token.
func checkTokens(registration string, operators []string) (map[[sha256.Size]byte]bool, error) {
	if err := api.CheckToken(registration); err != nil {
		return nil, fmt.Errorf("controlplane: the registration secret: %w", err)
	}
	if len(operators) == 0 {
		return nil, fmt.Errorf("controlplane: no operator token: people need one to submit and read tasks")
	}
	set := map[[sha256.Size]byte]bool{}
	for i, tok := range operators {
		if err := api.CheckToken(tok); err != nil {
			return nil, fmt.Errorf("controlplane: operator token %d: %w", i+1, err)
		}
		if subtle.ConstantTimeCompare([]byte(tok), []byte(registration)) == 1 {
			return nil, fmt.Errorf("controlplane: operator token %d is the registration secret, which every agent host holds; give people tokens of their own", i+1)
		}
		set[sha256.Sum256([]byte(tok))] = true
	}
	return set, nil
}
