package acp

import (
	"context"
	"errors"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/state"
)

// codeAuthRequired is ACP's auth_required error: the agent has no
// credential to open a session with (Gemini CLI 0.61.0: "Gemini API key
// is missing or not configured."; codex-acp 0.16.0: "Authentication
// required").
const codeAuthRequired = -32000

// authRequired reports whether err is the agent's auth_required.
func authRequired(err error) bool {
	var re *sdk.RequestError
	return errors.As(err, &re) && re.Code == codeAuthRequired
}

// envSignIn is the first of the agent's sign-in methods that takes its
// key from variables (ACP's env_var methods) whose every required
// variable is set in env, and the variables' names. codex-acp 0.16.0
// offers OPENAI_API_KEY and CODEX_API_KEY so, and refuses a session
// until it is asked to sign in with one (authenticate), though the
// variable is set: it then keeps the key as its login (CODEX_HOME's
// auth.json), as codex login --with-api-key does.
func envSignIn(methods []sdk.AuthMethod, env []string) (id string, vars []string, ok bool) {
	for _, m := range methods {
		e := m.EnvVar
		if e == nil || e.Id == "" || len(e.Vars) == 0 {
			continue
		}
		all := true
		vars = vars[:0]
		for _, v := range e.Vars {
			if cli.EnvValue(env, v.Name) == "" {
				if !v.Optional {
					all = false
					break
				}
				continue
			}
			vars = append(vars, v.Name)
		}
		if all && len(vars) > 0 {
			return e.Id, vars, true
		}
	}
	return "", nil, false
}

// signIn answers the agent's refusal of a session for want of a
// credential (err, auth_required) the way ACP's clients do: when a key
// it takes from a variable is set in the attempt's environment, it is
// asked to sign in with it (authenticate), once; ok says whether to ask
// for the session again.
func (s *session) signIn(ctx context.Context, conn *sdk.ClientSideConnection, methods []sdk.AuthMethod, err error) (ok bool) {
	if !authRequired(err) || s.signedIn {
		return false
	}
	s.signedIn = true
	id, vars, found := envSignIn(methods, s.env)
	if !found {
		return false
	}
	if _, aerr := conn.Authenticate(ctx, sdk.AuthenticateRequest{MethodId: id}); aerr != nil {
		s.send(runner.Event{Type: runner.EventLines, Stream: state.LogExecutor, Notice: true,
			Lines: []string{s.agentName() + " refused to sign in with " + strings.Join(vars, ", ") + " (authenticate " + id + "): " + errorText(aerr)}})
		return false
	}
	s.send(runner.Event{Type: runner.EventLines, Stream: state.LogExecutor, Notice: true,
		Lines: []string{s.agentName() + " asked for a login: signed in with " + strings.Join(vars, ", ") + " (authenticate " + id + ")"}})
	return true
}
