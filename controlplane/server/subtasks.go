package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/state"
)

// createSubtask submits a subtask of task parentID, under the delegation
// rules (delegate.go): the parent keeps the child's id (in the same
// transaction that counts its children), then the child is stored. A
// parent that has ended or is being cancelled submits none.
func (rl *rules) createSubtask(ctx context.Context, parentID string, req api.CreateTaskRequest) (api.TaskView, error) {
	if err := ownTask(ctx, parentID); err != nil {
		return api.TaskView{}, err
	}
	parent, err := rl.store.Task(ctx, parentID)
	if err != nil {
		return api.TaskView{}, storeErr("submit a subtask", err)
	}
	if parent == nil {
		return api.TaskView{}, errNoTask(parentID)
	}
	if err := bindToParent(parent, &req); err != nil {
		return api.TaskView{}, err
	}
	now := rl.opts.Now()
	tree, err := rl.treeOf(ctx, parent, now)
	if err != nil {
		return api.TaskView{}, err
	}
	if err := tree.bind(&req, now); err != nil {
		return api.TaskView{}, err
	}
	child, err := rl.newTask(ctx, req)
	if err != nil {
		return api.TaskView{}, err
	}
	child.Root, child.TreeDeadline = tree.root, tree.deadline
	err = rl.update(ctx, []string{parentID}, func(tx store.Tx) error {
		p := tx.Task(parentID)
		switch {
		case p == nil:
			return errNoTask(parentID)
		case p.Phase.Terminal():
			return &ruleError{errConflict, fmt.Sprintf("task %s has ended (%s): it submits no more subtasks", parentID, p.Phase)}
		case p.CancelRequested:
			return &ruleError{errConflict, fmt.Sprintf("task %s is being cancelled: it submits no more subtasks", parentID)}
		case p.BudgetStop != "":
			return &ruleError{errForbidden, fmt.Sprintf("delegation refused: task %s is being stopped: %s", parentID, p.BudgetStop)}
		}
		if err := rl.delegation(p, child); err != nil {
			return err
		}
		child.Parent, child.Depth = p.ID, p.Depth+1
		p.Children = append(p.Children, child.ID)
		tx.Save(p)
		return nil
	})
	if err != nil {
		return api.TaskView{}, storeErr("submit a subtask", err)
	}
	if err := rl.store.Create(ctx, child); err != nil {
		// Not stored: the parent forgets it, so that it does not count.
		if uerr := rl.update(ctx, []string{parentID}, func(tx store.Tx) error {
			if p := tx.Task(parentID); p != nil {
				p.Children = slices.DeleteFunc(p.Children, func(id string) bool { return id == child.ID })
				tx.Save(p)
			}
			return nil
		}); uerr != nil {
			rl.log.Warn("a subtask that was not stored still counts against its parent", "parent", parentID, "task", child.ID, "err", uerr)
		}
		return api.TaskView{}, storeErr("submit a subtask", err)
	}
	rl.dispatch.wakeClaims(1)
	rl.log.Info("subtask submitted", "task", child.ID, "parent", parentID, "depth", child.Depth)
	// A cancel of the parent that came between the two steps did not see
	// the child: it goes the parent's way.
	if p, err := rl.store.Task(ctx, parentID); err == nil && p != nil && (p.CancelRequested || p.Phase == state.PhaseCancelled) {
		if v, err := rl.cancelTree(ctx, child.ID, "cancelled with its parent "+parentID); err == nil {
			return v, nil
		}
	}
	return api.ViewOf(child), nil
}

// bindToParent keeps a subtask within what its parent may do: a task's
// run is hostile, and its token must not reach past its own task. The
// subtask works on the parent's repository (another is refused, and so
// is a repo= requirement naming another); it is routed no wider than its
// parent: it carries every one of the parent's requirements, which its
// own may only narrow (state.Narrow: one that would replace the parent's
// is refused); it takes at most the parent's attempts, and stays within
// the parent's budgets: a parent with a token or time budget gives each
// child at most that much (the whole budget when the child asks none),
// so delegating never lifts a bound. What the whole tree may spend is
// bound apart (treebudget.go).
func bindToParent(p *state.Task, req *api.CreateTaskRequest) error {
	refuse := func(format string, args ...any) error {
		return &ruleError{errForbidden, "delegation refused: " + fmt.Sprintf(format, args...)}
	}
	if err := checkRequires(req.Requires); err != nil {
		return err
	}
	switch {
	case req.Repo != "" && req.Repo != p.Repo:
		return refuse("a subtask works on its parent's repository (%q), not %q", p.Repo, req.Repo)
	case req.Base != "" && p.Repo == "":
		return refuse("the parent works on no repository, so its subtask takes no base")
	}
	req.Repo = p.Repo
	if req.Base == "" {
		req.Base = p.Base
	}
	if p.OnSideEffect == state.OnSideEffectAsk {
		// What a person asked to decide stays theirs down the tree.
		req.OnSideEffect = state.OnSideEffectAsk
	}
	for _, r := range req.Requires {
		if key, value, _ := strings.Cut(string(r), "="); key == "repo" && value != p.Repo {
			return refuse("a subtask works on its parent's repository (%q); it may not require repo=%s", p.Repo, value)
		}
	}
	requires, err := state.Narrow(p.Requires, req.Requires)
	if err != nil {
		return refuse("%v", err)
	}
	req.Requires = requires
	if p.MaxAttempts > 0 && (req.MaxAttempts == 0 || req.MaxAttempts > p.MaxAttempts) {
		req.MaxAttempts = p.MaxAttempts
	}
	if p.MaxTokens > 0 && (req.MaxTokens == 0 || req.MaxTokens > p.MaxTokens) {
		req.MaxTokens = p.MaxTokens
	}
	if p.MaxTime > 0 && (req.MaxTime == 0 || req.MaxTime > p.MaxTime) {
		req.MaxTime = p.MaxTime
	}
	if err := api.CheckEgressAllow(req.EgressAllow); err != nil {
		return invalidRequest("egress_allow: %v", err)
	}
	req.EgressAllow = narrowEgress(p.EgressAllow, req.EgressAllow)
	return nil
}

// narrowEgress is a subtask's own allow list: its parent's when it names
// none, else what of its own the parent's allows (never wider). An
// entry that does not parse was refused already.
func narrowEgress(parent, child []string) []string {
	switch {
	case parent == nil:
		return child
	case child == nil:
		return slices.Clone(parent)
	}
	p, _ := egress.ParseRules(parent)
	c, _ := egress.ParseRules(child)
	return append([]string{}, egress.Policy{Allow: p}.Narrow(c).Strings()...)
}

// subtasks lists task id's subtasks, in the order it submitted them.
func (rl *rules) subtasks(ctx context.Context, id string) ([]api.TaskView, error) {
	if err := ownTask(ctx, id); err != nil {
		return nil, err
	}
	p, err := rl.store.Task(ctx, id)
	if err != nil {
		return nil, storeErr("list subtasks", err)
	}
	if p == nil {
		return nil, errNoTask(id)
	}
	out := []api.TaskView{}
	for _, cid := range p.Children {
		c, err := rl.store.Task(ctx, cid)
		if err != nil {
			return nil, storeErr("list subtasks", err)
		}
		if c != nil { // pruned, or never stored
			out = append(out, api.ViewOf(c))
		}
	}
	return out, nil
}

// cancelTask cancels a task and its subtasks, theirs too, in one
// transaction (cancelTree). A task token cancels its own task's subtasks
// only.
func (rl *rules) cancelTask(ctx context.Context, id string) (api.TaskView, error) {
	if c := callerOf(ctx); c.principal == principalTask {
		t, err := rl.store.Task(ctx, id)
		if err != nil {
			return api.TaskView{}, storeErr("cancel", err)
		}
		if t == nil || t.Parent != c.taskID {
			return api.TaskView{}, &ruleError{errForbidden, fmt.Sprintf("forbidden: task %q is not a subtask of task %s, whose token this is; a task token cancels its own subtasks only", id, c.taskID)}
		}
		return rl.cancelTree(ctx, id, "cancelled by its parent task "+c.taskID)
	}
	return rl.cancelTree(ctx, id, state.CancelledByPerson)
}

// maxTree bounds the tasks one cancel reaches: the delegation rules keep
// trees far smaller.
const maxTree = 10000

// errTreeGrew: a subtask was submitted between reading a tree and locking
// it; the cancel reads it again.
var errTreeGrew = errors.New("the tree grew")

// cancelTree cancels task id and every subtask under it that has not
// ended, in one transaction: a queued task is cancelled at once; a
// running one is marked, and its agent is told at once on the claim it
// holds open (else in its next heartbeat answer). why is the root's
// reason, who cancelled it.
func (rl *rules) cancelTree(ctx context.Context, id, why string) (api.TaskView, error) {
	for range 5 {
		ids, err := rl.tree(ctx, id)
		if err != nil {
			return api.TaskView{}, err
		}
		in := map[string]bool{}
		for _, x := range ids {
			in[x] = true
		}
		var v api.TaskView
		n := 0
		var agents []string // holding the tasks marked: told at once
		err = rl.update(ctx, ids, func(tx store.Tx) error {
			now := rl.opts.Now()
			agents = agents[:0]
			root := tx.Task(id)
			if root == nil {
				return errNoTask(id)
			}
			for _, x := range ids {
				t := tx.Task(x)
				if t == nil {
					continue
				}
				for _, c := range t.Children {
					if !in[c] {
						return errTreeGrew
					}
				}
				if t.Phase.Terminal() {
					continue
				}
				reason := why
				if x != id {
					reason = "cancelled with its parent " + t.Parent
				}
				if err := cancelOne(t, reason, now); err != nil {
					return err
				}
				if t.Lease != nil && !t.Phase.Terminal() {
					agents = append(agents, t.Lease.AgentID)
				}
				tx.Save(t)
				n++
				if x == id {
					v = api.ViewOf(t.Clone())
				}
			}
			return nil
		})
		if errors.Is(err, errTreeGrew) {
			continue
		}
		if err != nil {
			return api.TaskView{}, storeErr("cancel task "+id, err)
		}
		rl.dispatch.wakeAgents(agents...)
		if v.ID == "" {
			// The task itself had ended: its subtasks still running were
			// cancelled; with none, there was nothing to cancel.
			root, err := rl.store.Task(ctx, id)
			if err != nil || root == nil {
				return api.TaskView{}, storeErr("cancel task "+id, err)
			}
			if n == 0 {
				return api.TaskView{}, &ruleError{errConflict, fmt.Sprintf("task %s is already %s", id, root.Phase)}
			}
			v = api.ViewOf(root)
		}
		if n > 1 {
			rl.log.Info("task cancelled with its subtasks", "task", id, "cancelled", n)
		}
		return v, nil
	}
	return api.TaskView{}, &ruleError{errConflict, fmt.Sprintf("task %s: its subtasks keep changing; cancel it again", id)}
}

// cancelOne cancels t: at once when queued, else by marking it for its
// agent.
func cancelOne(t *state.Task, reason string, now time.Time) error {
	if t.Phase == state.PhaseQueued {
		if reason == "" {
			reason = "cancelled before it was claimed"
		}
		if err := t.Transition(state.PhaseCancelled, reason, now); err != nil {
			return err
		}
	} else {
		t.RequestCancel(reason, now)
	}
	t.UpdatedAt = now
	return nil
}

// tree is task id and every task under it, parents before children.
func (rl *rules) tree(ctx context.Context, id string) ([]string, error) {
	ids := []string{id}
	for i := 0; i < len(ids); i++ {
		t, err := rl.store.Task(ctx, ids[i])
		if err != nil {
			return nil, storeErr("cancel", err)
		}
		if t == nil {
			continue
		}
		for _, c := range t.Children {
			if len(ids) >= maxTree {
				return nil, &ruleError{errConflict, fmt.Sprintf("task %s has over %d tasks under it: cancel its subtasks first", id, maxTree)}
			}
			ids = append(ids, c)
		}
	}
	return ids, nil
}
