package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/edgeagent/agent/runner/cli"
)

// checkLogin asks the executor's CLI whether it has a credential, in the
// environment an attempt's CLI gets: without one the first task ends with
// code auth. It is skipped for an executor without a CLI login (exec,
// sample) and when the executor check failed.
func checkLogin(ctx context.Context, o Options, exe Check) Check {
	if exe.Result == CheckFail {
		return skip(CheckLogin, "no executor to ask")
	}
	lc, ok := o.Executor.(cli.LoginChecker)
	if !ok {
		return skip(CheckLogin, fmt.Sprintf("the %s executor has no CLI login to check", o.ExecutorKind))
	}
	lctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	l, err := lc.CheckLogin(lctx)
	switch {
	case err != nil:
		return Check{Name: CheckLogin, Result: CheckWarn, Detail: fmt.Sprintf("cannot tell whether %s is logged in: %v", o.ExecutorKind, err),
			Fix: loginFix[o.ExecutorKind]}
	case !l.OK:
		return failed(CheckLogin, l.Detail, l.Fix)
	}
	return pass(CheckLogin, "%s", l.Detail)
}

// loginFix is what to run when the CLI's login cannot be told.
var loginFix = map[string]string{
	"codex":  "run codex login status as the agent's user to see why; codex login logs in",
	"claude": "run claude auth status as the agent's user to see why; claude auth login logs in",
	"acp":    "run the agent by hand as the agent's user to see why it does not open a session",
}

// checkModels checks --models against the models the CLI knows, where it
// can tell without a request (codex's bundled catalog, for its openai
// provider); ok is false when there is nothing it can check. A model the
// catalog lacks is a warning, not a failure: a release newer than the
// binary may serve it.
func checkModels(ctx context.Context, o Options, exe Check) (c Check, ok bool) {
	ml, isLister := o.Executor.(cli.ModelLister)
	if len(o.Models) == 0 || !isLister || exe.Result == CheckFail {
		return Check{}, false
	}
	mctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	known, can, err := ml.KnownModels(mctx)
	switch {
	case err != nil:
		return Check{Name: CheckModels, Result: CheckWarn, Detail: fmt.Sprintf("cannot list the models %s knows: %v", o.ExecutorKind, err),
			Fix: "check --models by hand against the provider's models"}, true
	case !can:
		return Check{}, false
	}
	var unknown []string
	for _, m := range o.Models {
		if !slices.Contains(known, m) {
			unknown = append(unknown, m)
		}
	}
	if len(unknown) > 0 {
		return Check{Name: CheckModels, Result: CheckWarn,
			Detail: fmt.Sprintf("%s is not in %s's model catalog (%s): an attempt asking for it fails unless the API serves it anyway", strings.Join(unknown, ", "), o.ExecutorKind, strings.Join(known, ", ")),
			Fix:    "correct --models (models in the config) to models of the catalog"}, true
	}
	return pass(CheckModels, "%s in %s's model catalog", strings.Join(o.Models, ", "), o.ExecutorKind), true
}

// checkAgent starts an agent that says what it supports (an ACP agent)
// and initializes it, without a prompt: who it is, and a warning for what
// it does not support (no session load means no continue). ok is false
// for an executor whose agent does not say.
func checkAgent(ctx context.Context, o Options, exe Check) (c Check, ok bool) {
	h, isAgent := o.Executor.(cli.Handshaker)
	if !isAgent || exe.Result == CheckFail {
		return Check{}, false
	}
	hctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	line, lacks, err := h.AgentHandshake(hctx)
	switch {
	case err != nil:
		return failed(CheckAgent, fmt.Sprintf("the %s agent does not start as an ACP agent: %v", o.ExecutorKind, err),
			"check --executor-bin and --executor-arg: the command must speak ACP on stdin and stdout (e.g. gemini --acp, opencode acp, codex-acp)"), true
	case lacks:
		return Check{Name: CheckAgent, Result: CheckWarn, Detail: line,
			Fix: "tasks run, without what it lacks; an agent release that supports it lifts this"}, true
	}
	return pass(CheckAgent, "%s", line), true
}
