package server

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// wantPrincipals is who may use each route: the table docs/security.md shows.
// A route added without a line here fails TestEveryRouteServesOnlyItsPrincipals.
var wantPrincipals = map[string]principal{
	"POST /v1/agents/register":     principalRegistration | principalAgent,
	"POST /v1/agents/{id}/revoke":  principalOperator,
	"POST /v1/agents/{id}/labels":  principalOperator,
	"POST /v1/agents/heartbeat":    principalAgent,
	"POST /v1/tasks/claim":         principalAgent,
	"POST /v1/tasks/release":       principalAgent,
	"POST /v1/events":              principalAgent,
	"POST /v1/tasks":               principalOperator,
	"GET /v1/tasks":                principalOperator,
	"GET /v1/tasks/{id}":           principalOperator | principalAgent | principalTask,
	"GET /v1/tasks/{id}/events":    principalOperator | principalAgent | principalTask,
	"GET /v1/tasks/{id}/diff":      principalOperator | principalAgent | principalTask,
	"POST /v1/tasks/{id}/subtasks": principalOperator | principalTask,
	"GET /v1/tasks/{id}/subtasks":  principalOperator | principalTask,
	"POST /v1/tasks/{id}/cancel":   principalOperator | principalTask,
	"POST /v1/tasks/{id}/retry":    principalOperator,
	"POST /v1/tasks/{id}/continue": principalOperator,
	"POST /v1/tasks/{id}/budget":   principalOperator,
	"POST /v1/tasks/{id}/reply":    principalOperator,
	"GET /v1/agents":               principalOperator,
	"GET /v1/whoami":               principalOperator | principalAgent | principalRegistration | principalTask,
}

// Every route answers each kind of credential as the table says: 403 with
// a reason to a principal it does not serve, an answer other than 401 and
// 403 to one it serves, 401 to a token nobody holds.
func TestEveryRouteServesOnlyItsPrincipals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	task := e.submit("x", "any")
	granted := e.claim("a", "available", 1)
	tokens := map[principal]string{principalOperator: opToken, principalRegistration: regToken, principalAgent: e.tokens.get("a"),
		principalTask: granted[0].TaskToken}

	do := func(method, path, tok, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.http.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	routes := e.srv.routes()
	var patterns []string
	for _, rt := range routes {
		patterns = append(patterns, rt.pattern)
		want, ok := wantPrincipals[rt.pattern]
		if !ok {
			t.Errorf("route %s is not in wantPrincipals: say who may use it", rt.pattern)
			continue
		}
		if rt.allow != want {
			t.Errorf("route %s serves %s, want %s", rt.pattern, rt.allow, want)
		}
		method, path, _ := strings.Cut(rt.pattern, " ")
		path = strings.ReplaceAll(path, "{id}", task.ID)
		if strings.HasPrefix(rt.pattern, "POST /v1/agents/{id}") {
			path = strings.ReplaceAll(rt.pattern[len("POST "):], "{id}", "nobody")
		}
		for _, p := range []principal{principalOperator, principalAgent, principalRegistration, principalTask} {
			body := `{"agent_id":"a"}`
			if p == principalRegistration {
				body = `{"agent_id":"b-` + strings.ReplaceAll(p.String(), "|", "") + `"}`
			}
			code, answer := do(method, path, tokens[p], body)
			if p == principalTask && rt.pattern == "POST /v1/tasks/{id}/cancel" {
				// Served for its subtasks; its own task (the path's) is not one.
				if code != http.StatusForbidden || !strings.Contains(answer, "subtask") {
					t.Errorf("%s with the task's own token: %d %s, want 403 naming subtasks", rt.pattern, code, answer)
				}
				continue
			}
			switch {
			case want&p == 0 && (code != http.StatusForbidden || !strings.Contains(answer, "forbidden")):
				t.Errorf("%s with a %s token: %d %s, want 403 with the reason", rt.pattern, p, code, answer)
			case want&p != 0 && (code == http.StatusForbidden || code == http.StatusUnauthorized):
				t.Errorf("%s with a %s token: %d %s, want it served", rt.pattern, p, code, answer)
			}
			if rt.pattern == "POST /v1/agents/register" && p == principalAgent && code == http.StatusOK {
				var r api.RegisterResponse // the agent renewed its token: the old one is gone
				if err := json.Unmarshal([]byte(answer), &r); err != nil || r.Token == "" {
					t.Fatalf("renewal answer %s", answer)
				}
				tokens[principalAgent] = r.Token
			}
		}
		// One unknown token per route: more routes than the failures a
		// window allows an address. Each route starts a window of its own.
		e.srv.throttle.mu.Lock()
		e.srv.throttle.by = nil
		e.srv.throttle.mu.Unlock()
		if code, _ := do(method, path, "nobody-holds-this-token-0123456789abcdef", `{}`); code != http.StatusUnauthorized {
			t.Errorf("%s with an unknown token: %d, want 401", rt.pattern, code)
		}
	}
	if missing := slices.DeleteFunc(slices.Sorted(maps.Keys(wantPrincipals)), func(p string) bool { return slices.Contains(patterns, p) }); len(missing) > 0 {
		t.Errorf("wantPrincipals names routes the server does not have: %v", missing)
	}
}

// An agent reads only the tasks it holds a lease on.
func TestAgentReadsOnlyItsLeasedTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	mine := e.submit("mine", "any")
	e.claim("a", "available", 1)
	theirs := e.submit("theirs", "any")
	e.claim("b", "available", 1)
	a := e.as(e.tokens.get("a"))
	if v, err := a.Task(ctx, mine.ID); err != nil || v.Prompt != "mine" {
		t.Errorf("agent a reading its own task: %v", err)
	}
	if _, err := a.TaskEvents(ctx, mine.ID); err != nil {
		t.Errorf("agent a reading its own task's events: %v", err)
	}
	for _, id := range []string{theirs.ID, "t-nope"} {
		if _, err := a.Task(ctx, id); statusOf(err) != http.StatusForbidden {
			t.Errorf("agent a reading task %s: %v, want 403", id, err)
		}
	}
}

// An operator frees an agent id: the old token is refused from then on,
// and the id registers again with the registration secret. Only an
// operator revokes.
func TestRevokeFreesAnAgentID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	old := e.tokenOfAgent("a")
	if _, err := e.as(old).RevokeAgent(ctx, "a"); statusOf(err) != http.StatusForbidden {
		t.Fatalf("an agent revoking itself: %v, want 403", err)
	}
	if _, err := e.as(regToken).RevokeAgent(ctx, "a"); statusOf(err) != http.StatusForbidden {
		t.Fatalf("the registration secret revoking: %v, want 403", err)
	}
	if v, err := e.client.RevokeAgent(ctx, "a"); err != nil || !v.Revoked {
		t.Fatalf("an operator revoking a: %+v %v", v, err)
	}
	if _, err := e.client.RevokeAgent(ctx, "a"); statusOf(err) != http.StatusNotFound {
		t.Fatalf("revoking it again: %v, want 404", err)
	}
	if _, err := e.as(old).Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"}); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %v, want 401", err)
	}
	saved := ""
	c, _ := controlplane.NewClient(e.http.URL, regToken, controlplane.ClientOptions{Tries: 1, AgentID: "a", AgentToken: old, SaveAgentToken: func(tok string) error { saved = tok; return nil }})
	if _, err := c.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "a"}); err != nil || saved == "" || saved == old {
		t.Fatalf("the agent after the revocation: %v (new token saved: %v)", err, saved != "" && saved != old)
	}
}

// The control plane refuses credentials under 128 bits, an operator token
// that is the registration secret, none at all, and a state directory
// others can write to; no error holds a token.
func TestServerRefusesWeakCredentialsAndAnOpenDirectory(t *testing.T) {
	t.Parallel()
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	openTasks := filepath.Join(t.TempDir(), "cp")
	if err := os.MkdirAll(filepath.Join(openTasks, "tasks"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(openTasks, "tasks"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		dir       string
		reg       string
		operators []string
		want      string
	}{
		{"a 2-character registration secret", "", "ab", []string{opToken}, "at least 32"},
		{"a short operator token", "", regToken, []string{opToken, "short-one"}, "operator token 2: the token is 9 characters"},
		{"no operator token", "", regToken, nil, "no operator token"},
		{"the registration secret as an operator token", "", regToken, []string{regToken}, "is the registration secret"},
		{"a token with a space", "", regToken, []string{strings.Repeat("x", 20) + " " + strings.Repeat("y", 20)}, "one word"},
		{"a state directory others can write to", open, regToken, []string{opToken}, "writable by others"},
		{"a tasks directory others can write to", openTasks, regToken, []string{opToken}, "writable by others"},
	} {
		dir := c.dir
		if dir == "" {
			dir = t.TempDir()
		}
		st, err := openDirStore(t, dir, nil)
		var srv *Server
		if err == nil {
			srv, err = New(Options{Store: st, Token: c.reg, OperatorTokens: c.operators})
			st.Close()
		}
		if err == nil {
			srv.Close()
			t.Errorf("%s: the control plane started", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "short-one") || strings.Contains(err.Error(), opToken) {
			t.Errorf("%s: %v, want %q and no token", c.name, err, c.want)
		}
	}
}

// A lease that lapses while only claimed sends the task back to the queue
// (as before); one that lapses after the executor started stays bound.
func TestLapsedClaimGoesBackToTheQueue(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	task := e.submit("x", "any")
	e.claim("a", "available", 1)
	clk.advance(2 * time.Minute)
	v, _ := e.client.Task(context.Background(), task.ID)
	if v.Phase != state.PhaseQueued || v.Lease != nil {
		t.Fatalf("a lapsed claim: %s %+v, want queued without a lease", v.Phase, v.Lease)
	}
}
