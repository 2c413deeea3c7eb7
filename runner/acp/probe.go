package acp

import (
	"context"
	"fmt"
	"os"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
)

// sessionProbe is what an agent says when asked for a session and
// nothing more: whether it refused it for want of a credential, and the
// models the session offers.
type sessionProbe struct {
	// name is who the agent says it is.
	name string
	// refused is the agent's refusal (auth_required), "" when it opened
	// the session.
	refused string
	// authMethods are the ways it says it can be logged in (their names).
	authMethods []string
	// signIn, when it refused, names the variables set in its
	// environment that an attempt signs it in with (envSignIn).
	signIn []string
	// models are the models the session offers (its model option, or its
	// models), nil when it offers none.
	models []string
}

// probeSession starts the agent as an attempt's would be (not confined),
// initializes it and asks for a session in an empty temporary directory,
// then ends it: a session needs a credential with the agents tested, and
// says the models it offers, and no prompt is sent, so the model is asked
// nothing. What it says is kept: agent doctor's login and models checks
// ask once. ctx bounds it.
func (x *Executor) probeSession(ctx context.Context) (sessionProbe, error) {
	x.probe.Lock()
	defer x.probe.Unlock()
	if !x.probe.done {
		x.probe.result, x.probe.err = x.askSession(ctx)
		x.probe.done = true
	}
	return x.probe.result, x.probe.err
}

func (x *Executor) askSession(ctx context.Context) (sessionProbe, error) {
	dir, err := os.MkdirTemp("", "agent-doctor-")
	if err != nil {
		return sessionProbe{}, err
	}
	defer os.RemoveAll(dir)
	conn, path, stop, err := x.startIdle()
	if err != nil {
		return sessionProbe{}, err
	}
	defer stop()
	init, err := conn.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber,
		ClientInfo: &sdk.Implementation{Name: "edge-agent", Version: "1"}})
	switch {
	case ctx.Err() != nil:
		return sessionProbe{}, fmt.Errorf("%s did not answer initialize: %w", path, ctx.Err())
	case err != nil:
		return sessionProbe{}, fmt.Errorf("%s did not initialize: %s", path, errorText(err))
	}
	p := sessionProbe{name: x.agent.Name}
	if p.name == "" && init.AgentInfo != nil {
		p.name = init.AgentInfo.Name
	}
	if p.name == "" {
		p.name = "the agent"
	}
	for _, m := range init.AuthMethods {
		if a := m.Agent; a != nil && a.Name != "" {
			p.authMethods = append(p.authMethods, a.Name)
		} else if e := m.EnvVar; e != nil && e.Name != "" {
			p.authMethods = append(p.authMethods, e.Name)
		} else if t := m.Terminal; t != nil && t.Name != "" {
			p.authMethods = append(p.authMethods, t.Name)
		}
	}
	resp, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: dir, McpServers: []sdk.McpServer{}})
	switch {
	case ctx.Err() != nil:
		return sessionProbe{}, fmt.Errorf("%s did not answer session/new: %w", p.name, ctx.Err())
	case authRequired(err):
		// Not signed in here: the agent would keep the key as its login.
		p.refused = errorText(err)
		_, p.signIn, _ = envSignIn(init.AuthMethods, x.Env(runner.AttemptSpec{}))
		return p, nil
	case err != nil:
		return sessionProbe{}, fmt.Errorf("%s did not open a session: %s", p.name, errorText(err))
	}
	for _, o := range resp.ConfigOptions {
		sel := o.Select
		if sel == nil || !(sel.Category != nil && *sel.Category == sdk.SessionConfigOptionCategoryModel || sel.Id == "model") {
			continue
		}
		if u := sel.Options.Ungrouped; u != nil {
			for _, v := range *u {
				p.models = append(p.models, string(v.Value))
			}
		}
		if g := sel.Options.Grouped; g != nil {
			for _, grp := range *g {
				for _, v := range grp.Options {
					p.models = append(p.models, string(v.Value))
				}
			}
		}
	}
	if p.models == nil && resp.Models != nil {
		for _, m := range resp.Models.AvailableModels {
			p.models = append(p.models, string(m.ModelId))
		}
	}
	return p, nil
}

var (
	_ cli.LoginChecker = (*Executor)(nil)
	_ cli.ModelLister  = (*Executor)(nil)
)

// CheckLogin implements cli.LoginChecker: the agent is asked for a
// session (probeSession), which it refuses without a credential. A
// credential it has is not tried against the model's API: that takes a
// request.
func (x *Executor) CheckLogin(ctx context.Context) (cli.Login, error) {
	p, err := x.probeSession(ctx)
	if err != nil {
		return cli.Login{}, err
	}
	switch {
	case p.refused == "":
		return cli.Login{OK: true, Detail: p.name + " opened a session: it has a credential (session/new, no prompt; not tried against the model's API)"}, nil
	case len(p.signIn) > 0:
		return cli.Login{OK: true, Detail: p.name + " is not logged in, and an attempt signs it in with " + strings.Join(p.signIn, ", ") +
			" (set in its environment; the agent then keeps the key as its login)"}, nil
	}
	fix := x.agent.LoginFix
	if fix == "" {
		fix = "log the agent in as the user agent run runs as, or set its key in agent run's environment (--executor-env passes a variable of another name)"
		if len(p.authMethods) > 0 {
			fix += "; it says it takes: " + strings.Join(p.authMethods, ", ")
		}
	}
	return cli.Login{Detail: p.name + " refused a session for want of a credential: " + p.refused, Fix: fix}, nil
}

// KnownModels implements cli.ModelLister: the models a session offers
// (probeSession); ok is false when it offers none, or refused the
// session.
func (x *Executor) KnownModels(ctx context.Context) ([]string, bool, error) {
	p, err := x.probeSession(ctx)
	if err != nil {
		return nil, false, err
	}
	return p.models, len(p.models) > 0, nil
}
