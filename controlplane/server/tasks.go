package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/state"
)

func (rl *rules) createTask(ctx context.Context, req api.CreateTaskRequest) (api.TaskView, error) {
	t, err := rl.newTask(ctx, req)
	if err != nil {
		return api.TaskView{}, err
	}
	if err := rl.store.Create(ctx, t); err != nil {
		return api.TaskView{}, storeErr("submit", err)
	}
	rl.dispatch.wakeClaims(1)
	return api.ViewOf(t), nil
}

// newTask is the task req asks for, not yet stored; a bad request is
// refused in one line.
func (rl *rules) newTask(ctx context.Context, req api.CreateTaskRequest) (*state.Task, error) {
	switch {
	case strings.TrimSpace(req.Prompt) == "":
		return nil, invalidRequest("prompt is required")
	case len(req.Prompt) > api.MaxPromptBytes:
		return nil, invalidRequest("prompt is longer than %s", bytesize.Text(api.MaxPromptBytes))
	case req.Prefer != "" && req.Prefer != api.PreferAny && req.Prefer != api.PreferGUI:
		return nil, invalidRequest("prefer %q: want gui or any", req.Prefer)
	case req.MaxAttempts < 0 || req.MaxAttempts > 20:
		return nil, invalidRequest("max_attempts %d: want 0 (the agent's default) to 20", req.MaxAttempts)
	case req.MaxTokens < 0:
		return nil, invalidRequest("max_tokens %d: want 0 (the agent's default) or more", req.MaxTokens)
	case req.MaxTime < 0:
		return nil, invalidRequest("max_time %s: want 0 (the agent's default) or more", req.MaxTime.D())
	}
	if err := api.CheckLabels(req.Labels); err != nil {
		return nil, invalidRequest("labels: %v", err)
	}
	if err := api.CheckEgressAllow(req.EgressAllow); err != nil {
		return nil, invalidRequest("egress_allow: %v", err)
	}
	if err := req.OnSideEffect.Check(); err != nil {
		return nil, invalidRequest("%v", err)
	}
	if err := checkRepo(req.Repo, req.Base); err != nil {
		return nil, err
	}
	if req.NoCommit && req.Repo == "" {
		return nil, invalidRequest("no_commit: only a task that names a repository (repo) has commits to leave out")
	}
	if err := rl.served(ctx, req.Repo); err != nil {
		return nil, err
	}
	// Routing by capability: refused when malformed; said when no online
	// agent has them.
	if err := checkRequires(req.Requires); err != nil {
		return nil, err
	}
	unroutable := ""
	if len(req.Requires) > 0 {
		offers, err := rl.offers(ctx, rl.opts.Now())
		if err != nil {
			return nil, storeErr("submit", err)
		}
		unroutable = api.Unroutable(req.Requires, offers)
	}
	now := rl.opts.Now()
	t := state.NewTask(newID("t-", 5), req.Prompt, now)
	t.Title, t.Prefer, t.MaxAttempts = req.Title, req.Prefer, req.MaxAttempts
	t.Repo, t.Base, t.NoCommit = req.Repo, req.Base, req.NoCommit
	t.Requires, t.Unroutable = slices.Clone(req.Requires), unroutable
	t.Labels = maps.Clone(req.Labels)
	t.MaxTokens, t.MaxTime = req.MaxTokens, req.MaxTime // budgets
	t.EgressAllow = slices.Clone(req.EgressAllow)
	t.OnSideEffect = req.OnSideEffect
	if utf8.RuneCountInString(t.Title) > api.MaxTitleRunes {
		t.Title = state.Ellipsize(t.Title, api.MaxTitleRunes)
	}
	if t.Title == "" {
		t.Title = firstLine(req.Prompt)
	}
	t.Delegation = rl.delegationOf(t)
	return t, nil
}

// checkRepo refuses a task's repository and base that are not well
// formed, or a base without a repository.
func checkRepo(repo, base string) error {
	switch {
	case repo == "" && base != "":
		return invalidRequest("base %q without repo: a base is a ref of the task's repository", base)
	case repo == "":
		return nil
	}
	if err := api.CheckRepoName(repo); err != nil {
		return invalidRequest("repo: %v", err)
	}
	if err := api.CheckBase(base); err != nil {
		return invalidRequest("%v", err)
	}
	return nil
}

// served refuses (422) a repository no agent known to the control plane
// has announced: a task naming it would wait in the queue until it
// expired. Agents announce their repositories in every heartbeat and
// claim; the control plane keeps what it heard.
func (rl *rules) served(ctx context.Context, repo string) error {
	if repo == "" {
		return nil
	}
	if ok, err := rl.store.Serves(ctx, repo); ok || err != nil {
		return storeErr("submit", err)
	}
	agents, err := rl.store.Agents(ctx)
	if err != nil {
		return storeErr("submit", err)
	}
	var all []string
	for _, a := range agents {
		all = append(all, a.View.Repos...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	list := "none"
	if len(all) > 0 {
		list = strings.Join(all, ", ")
	}
	return &ruleError{errUnserved, fmt.Sprintf("no agent serves repository %q (served: %s)", repo, list)}
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "@") {
			return state.Ellipsize(l, 80)
		}
	}
	return "untitled"
}

// errNoTask is a request naming a task there is none of.
func errNoTask(id string) error {
	return &ruleError{errNotFound, fmt.Sprintf("no task %q", id)}
}

func (rl *rules) getTask(ctx context.Context, id string) (api.TaskView, error) {
	rl.watchdog.pass(ctx)
	t, err := rl.store.Task(ctx, id)
	if err != nil {
		return api.TaskView{}, storeErr("read task", err)
	}
	if err := readable(ctx, id, t); err != nil {
		return api.TaskView{}, err
	}
	return api.ViewOf(t), nil
}

// readable refuses a task the caller may not read: an operator reads any;
// an agent, one it holds the lease on (lapsed or not); a task token, its
// own task and its subtasks. A task there is none of is 404 for an
// operator.
func readable(ctx context.Context, id string, t *state.Task) error {
	c := callerOf(ctx)
	if c.principal == principalTask && (t == nil || t.ID != c.taskID && t.Parent != c.taskID) {
		return &ruleError{errForbidden, fmt.Sprintf("forbidden: task %q is not a subtask of task %s, whose token this is", id, c.taskID)}
	}
	if c.principal == principalAgent && (t == nil || t.Lease == nil || t.Lease.AgentID != c.agentID) {
		return &ruleError{errForbidden, fmt.Sprintf("forbidden: agent %s holds no lease on task %q; an agent reads only the tasks it holds", c.agentID, id)}
	}
	if t == nil {
		return errNoTask(id)
	}
	return nil
}

// change runs fn on task id in a store transaction and saves it, unless
// fn fails; it answers the task as saved. A task saved queued may be
// claimable: the claims waiting for work look again.
func (rl *rules) change(ctx context.Context, id string, fn func(t *state.Task) error) (api.TaskView, error) {
	var v api.TaskView
	err := rl.update(ctx, []string{id}, func(tx store.Tx) error {
		t := tx.Task(id)
		if t == nil {
			return errNoTask(id)
		}
		if err := fn(t); err != nil {
			return err
		}
		tx.Save(t)
		v = api.ViewOf(t.Clone())
		return nil
	})
	if err != nil {
		return api.TaskView{}, storeErr("change task "+id, err)
	}
	if v.Phase == state.PhaseQueued {
		rl.dispatch.wakeClaims(1)
	}
	return v, nil
}

// retryTask puts a recoverable_failed task back in the queue at a
// person's request: the agent that claims it runs the next attempt, the
// attempts before it kept. Any other phase is a conflict, said in one line.
func (rl *rules) retryTask(ctx context.Context, id string) (api.TaskView, error) {
	v, err := rl.change(ctx, id, func(t *state.Task) error {
		if t.Phase != state.PhaseRecoverableFailed {
			why := "only a recoverable_failed task can be retried"
			if !t.Phase.Terminal() {
				why = "it has not ended; " + why
			}
			return &ruleError{errConflict, fmt.Sprintf("task %s is %s: %s", id, t.Phase, why)}
		}
		if err := t.RetryByPerson(rl.opts.Now()); err != nil {
			return &ruleError{errConflict, err.Error()}
		}
		return nil
	})
	if err == nil {
		rl.log.Info("task retried by a person", "task", id, "attempts", len(v.Attempts))
	}
	return v, err
}

// continueTask puts a task that ended without completing back in the
// queue for the agent that keeps its latest session, at a person's
// request: that agent alone may claim it (state.Task.MayClaim), and its
// next attempt resumes the session rather than replaying the prompt. Until
// that agent claims it, the task waits like any queued task, and the
// queued limit, counted from the person's request, expires it. A parked
// task is continued early instead: its agent, which holds it, hears so
// in its next heartbeat and resumes it now. Any other case is a
// conflict, said in one line.
func (rl *rules) continueTask(ctx context.Context, id string) (api.TaskView, error) {
	var session *state.Attempt
	var keeper string
	v, err := rl.change(ctx, id, func(t *state.Task) error {
		conflict := func(why string, args ...any) error {
			return &ruleError{errConflict, fmt.Sprintf("task %s is %s: ", id, t.Phase) + fmt.Sprintf(why, args...)}
		}
		switch t.Phase {
		case state.PhaseParked:
			// Its agent holds it, waiting to continue its session: it
			// hears in its next heartbeat to go on now.
			if t.Parked == nil {
				return conflict("it says nothing of its park")
			}
			t.Parked.ContinueAsked, t.UpdatedAt = rl.opts.Now(), rl.opts.Now()
			return nil
		case state.PhaseFailed, state.PhaseRecoverableFailed, state.PhaseTimedOut, state.PhaseCancelled:
		case state.PhaseCompleted:
			return conflict("it completed; there is nothing to continue (submit a new task for more work)")
		default:
			why := "only a task that ended failed, recoverable_failed, timed_out or cancelled can be continued"
			if !t.Phase.Terminal() {
				why = "it has not ended; " + why
			}
			return conflict("%s", why)
		}
		if session = t.SessionAttempt(); session == nil {
			return conflict("no attempt has a session its executor can resume; a person can only retry it (agent tasks retry), from the start")
		}
		var err error
		if keeper, err = sessionKeeper(t, session); err != nil {
			return conflict("%v", err)
		}
		if err := t.ContinueByPerson(keeper, rl.opts.Now()); err != nil {
			return &ruleError{errConflict, err.Error()}
		}
		return nil
	})
	switch {
	case err == nil && session == nil:
		rl.log.Info("parked task continued early by a person", "task", id)
	case err == nil:
		rl.log.Info("task continued by a person", "task", id, "session_attempt", session.Number, "agent", keeper, "attempts", len(v.Attempts))
	}
	return v, err
}

// budgetTask raises the budget of a task parked at it, at a person's
// request: its token bound by req.AddTokens, its wall-time bound by
// req.AddTime, each from the budget it reached (its own, or its agent's
// default, as the park says). Its agent hears so in its next heartbeat,
// with the new bounds, and continues its session. Any other case is a
// conflict, said in one line; a bad request a 400.
func (rl *rules) budgetTask(ctx context.Context, id string, req api.BudgetRequest) (api.TaskView, error) {
	switch {
	case req.AddTokens < 0 || req.AddTime < 0:
		return api.TaskView{}, &ruleError{errInvalid, "add_tokens and add_time cannot be below zero"}
	case req.AddTokens == 0 && req.AddTime == 0:
		return api.TaskView{}, &ruleError{errInvalid, "say how much to add: add_tokens, add_time or both"}
	}
	v, err := rl.change(ctx, id, func(t *state.Task) error {
		p := t.Parked
		if t.Phase != state.PhaseParked || p == nil || p.Reason != state.ParkBudget {
			return &ruleError{errConflict, fmt.Sprintf("task %s is %s: only a task parked at its budget can have it raised", id, t.Phase)}
		}
		if req.AddTokens > 0 {
			if p.MaxTokens <= 0 {
				return &ruleError{errConflict, fmt.Sprintf("task %s has no token budget to raise; it reached its time budget (add_time)", id)}
			}
			p.MaxTokens += req.AddTokens
			t.MaxTokens = p.MaxTokens
		}
		if req.AddTime > 0 {
			if p.MaxTime <= 0 {
				return &ruleError{errConflict, fmt.Sprintf("task %s has no time budget to raise; it reached its token budget (add_tokens)", id)}
			}
			p.MaxTime += req.AddTime
			t.MaxTime = p.MaxTime
		}
		p.ContinueAsked, t.UpdatedAt = rl.opts.Now(), rl.opts.Now()
		return nil
	})
	if err == nil {
		rl.log.Info("task's budget raised by a person", "task", id, "max_tokens", v.MaxTokens, "max_time", v.MaxTime.D())
	}
	return v, err
}

// sessionKeeper is the agent that keeps the session of attempt a: the
// agent whose lease the task last had, or, for a task continued and then
// cancelled before anyone claimed it, the agent that continue was for. An
// attempt from before a person's replay (agent tasks retry) may have run
// on another agent than the one that ran the replay, and the task does
// not say which: then no agent is known to keep it.
func sessionKeeper(t *state.Task, a *state.Attempt) (string, error) {
	if r := t.PersonRetry; t.Lease == nil && r != nil && r.Continue && r.Agent != "" && len(t.Attempts) == r.After {
		return r.Agent, nil
	}
	if t.Lease == nil || t.Lease.AgentID == "" {
		return "", fmt.Errorf("no agent is known to keep attempt %d's session (the task holds no lease)", a.Number)
	}
	if r := t.PersonRetry; r != nil && !r.Continue && a.Number <= r.After {
		return "", fmt.Errorf("attempt %d's session is from before a person's retry, which another agent may have run: no agent is known to keep it", a.Number)
	}
	return t.Lease.AgentID, nil
}

// replyTask records a person's answer to the task's approval request; the
// agent holding the task gets it in its next heartbeat answer.
func (rl *rules) replyTask(ctx context.Context, id string, req api.ReplyRequest) (api.TaskView, error) {
	if req.Decision != api.DecisionAccept && req.Decision != api.DecisionDecline {
		return api.TaskView{}, invalidRequest("decision %q: want accept or decline", req.Decision)
	}
	return rl.change(ctx, id, func(t *state.Task) error {
		return rl.answer(t, req)
	})
}

// answer records a person's answer on t.
func (rl *rules) answer(t *state.Task, req api.ReplyRequest) error {
	id := t.ID
	switch {
	case t.Phase != state.PhaseAwaitingReply || t.AwaitingReply == nil:
		return &ruleError{errConflict, fmt.Sprintf("task %s is %s, not awaiting a reply", id, t.Phase)}
	case req.RequestID != "" && req.RequestID != t.AwaitingReply.ID:
		return &ruleError{errConflict, fmt.Sprintf("task %s awaits a reply to request %s, not %s", id, t.AwaitingReply.ID, req.RequestID)}
	case t.Reply != nil && t.Reply.Decision != req.Decision:
		return &ruleError{errConflict, fmt.Sprintf("request %s was already answered: %s", t.AwaitingReply.ID, t.Reply.Decision)}
	}
	now := rl.opts.Now()
	t.Reply = &state.Reply{RequestID: t.AwaitingReply.ID, Decision: req.Decision, At: now}
	t.UpdatedAt = now
	return nil
}
