package server

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// A tree of subtasks shares its root's budgets (docs/subtasks.md): the
// tokens every task of the tree spends count against the root's
// max_tokens, and the tree's wall time, from the start of its root's
// first attempt, against the root's max_time. A subtask's own budget is
// at most what the tree has left when it is submitted (bindToTree).
// Each agent bounds the tasks it runs by their own budgets; the control
// plane, which sees every task's usage reports, bounds the tree: when a
// report takes the tree's tokens past the root's budget
// (stopSpentTrees), or the tree's time runs out (the watchdog,
// stopLateSubtasks), every task of the tree that has not ended is
// stopped: a queued one ends failed at once, a running one is marked
// (Task.BudgetStop) and its agent stops it, told in the answer to its
// next report or heartbeat (stopOrders). It ends budget_exceeded.

// treeBudget is what a tree may still spend when a subtask is submitted.
type treeBudget struct {
	root      string
	maxTokens int64 // the root's; 0: no token budget
	spent     int64 // the tokens the tree's tasks spent
	maxTime   time.Duration
	deadline  time.Time // when the tree's time runs out; zero: no time budget
}

// treeOf is the budget of the tree parent belongs to, as it stands at
// now.
func (rl *rules) treeOf(ctx context.Context, parent *state.Task, now time.Time) (treeBudget, error) {
	b := treeBudget{root: parent.Root, deadline: parent.TreeDeadline}
	if b.root == "" {
		b.root = parent.ID
	}
	tasks, err := rl.treeTasks(ctx, b.root)
	if err != nil {
		return b, err
	}
	root := tasks[0]
	if root == nil {
		return b, nil // pruned: what the parent carries bounds it still
	}
	b.maxTokens, b.maxTime = root.MaxTokens, root.MaxTime.D()
	for _, t := range tasks {
		if t != nil {
			b.spent += t.Usage(now).TotalTokens
		}
	}
	if b.deadline.IsZero() && b.maxTime > 0 {
		start := now // a person's subtask of a root not yet started
		if len(root.Attempts) > 0 && !root.Attempts[0].StartedAt.IsZero() {
			start = root.Attempts[0].StartedAt
		}
		b.deadline = start.Add(b.maxTime)
	}
	return b, nil
}

// bind keeps the budgets req asks within what the tree has left at now,
// or refuses the subtask when nothing is left.
func (b treeBudget) bind(req *api.CreateTaskRequest, now time.Time) error {
	refuse := func(format string, args ...any) error {
		return &ruleError{errForbidden, "delegation refused: " + fmt.Sprintf(format, args...)}
	}
	if b.maxTokens > 0 {
		left := b.maxTokens - b.spent
		if left <= 0 {
			return refuse("the tree of %s spent its token budget (%s tokens of %s)", b.root, state.Tokens(b.spent), state.Tokens(b.maxTokens))
		}
		if req.MaxTokens == 0 || req.MaxTokens > left {
			req.MaxTokens = left
		}
	}
	if !b.deadline.IsZero() {
		left := b.deadline.Sub(now)
		if left <= 0 {
			return refuse("the tree of %s ran out its time budget of %s", b.root, b.maxTime)
		}
		if req.MaxTime == 0 || req.MaxTime.D() > left {
			req.MaxTime = state.Duration(left)
		}
	}
	return nil
}

// treeTasks are task root and every task under it, parents before
// children; a task there is none of (pruned, or not yet stored) is nil.
func (rl *rules) treeTasks(ctx context.Context, root string) ([]*state.Task, error) {
	var tasks []*state.Task
	ids := []string{root}
	for i := 0; i < len(ids); i++ {
		t, err := rl.store.Task(ctx, ids[i])
		if err != nil {
			return nil, storeErr("read a tree of subtasks", err)
		}
		tasks = append(tasks, t)
		if t == nil {
			continue
		}
		for _, c := range t.Children {
			if len(ids) >= maxTree {
				return nil, &ruleError{errConflict, fmt.Sprintf("task %s has over %d tasks under it", root, maxTree)}
			}
			ids = append(ids, c)
		}
	}
	return tasks, nil
}

// treeRoot is the root of the tree t belongs to, "" when it is in none.
func treeRoot(t *state.Task) string {
	switch {
	case t.Root != "":
		return t.Root
	case len(t.Children) > 0:
		return t.ID
	}
	return ""
}

// stopSpentTrees stops each tree of roots whose tasks spent more tokens
// than its root's budget. It returns the running tasks it marked, with
// why.
func (rl *rules) stopSpentTrees(ctx context.Context, roots []string) (map[string]string, error) {
	stopped := map[string]string{}
	for _, id := range roots {
		// The root alone first: a tree whose root has no token budget is
		// read no further.
		if root, err := rl.store.Task(ctx, id); err != nil || root == nil || root.MaxTokens <= 0 {
			if err != nil {
				return stopped, storeErr("read a tree of subtasks", err)
			}
			continue
		}
		tasks, err := rl.treeTasks(ctx, id)
		if err != nil {
			return stopped, err
		}
		root := tasks[0]
		if root == nil || root.MaxTokens <= 0 {
			continue
		}
		now := rl.opts.Now()
		var spent int64
		var live []string
		for _, t := range tasks {
			if t == nil {
				continue
			}
			spent += t.Usage(now).TotalTokens
			if !t.Phase.Terminal() && t.BudgetStop == "" {
				live = append(live, t.ID)
			}
		}
		if spent <= root.MaxTokens || len(live) == 0 {
			continue
		}
		why := fmt.Sprintf("the tree of %s used %s tokens, over its budget of %s", root.ID, state.Tokens(spent), state.Tokens(root.MaxTokens))
		if err := rl.stopTasks(ctx, live, why, stopped); err != nil {
			return stopped, err
		}
	}
	return stopped, nil
}

// stopTasks stops the tasks ids of a tree over its budget, for why: a
// queued one ends failed at once, a running one is marked for its agent
// (and added to marked).
func (rl *rules) stopTasks(ctx context.Context, ids []string, why string, marked map[string]string) error {
	ended, running := 0, 0
	err := rl.update(ctx, ids, func(tx store.Tx) error {
		now := rl.opts.Now()
		ended, running = 0, 0
		for _, id := range ids {
			t := tx.Task(id)
			if t == nil || t.Phase.Terminal() || t.BudgetStop != "" {
				continue
			}
			if t.Phase == state.PhaseQueued {
				if err := t.Transition(state.PhaseFailed, string(state.CodeBudgetExceeded)+": "+why, now); err != nil {
					return err
				}
				ended++
			} else {
				t.BudgetStop = why
				marked[id] = why
				running++
			}
			t.UpdatedAt = now
			tx.Save(t)
		}
		return nil
	})
	if err != nil {
		return storeErr("stop a tree over its budget", err)
	}
	if ended+running > 0 {
		rl.log.Info("tree of subtasks stopped: over its root's budget", "why", why, "ended", ended, "stopping", running)
	}
	return nil
}

// stopOrder is the order that stops t, a task an agent runs, when its
// tree passed its budget.
func stopOrder(t *state.Task) (api.StopOrder, bool) {
	if t.BudgetStop == "" || t.Phase.Terminal() {
		return api.StopOrder{}, false
	}
	return api.StopOrder{TaskID: t.ID, Reason: t.BudgetStop}, true
}

// stopLateSubtasks stops the subtasks among late (seen by the watchdog's
// look past their tree's deadline), tree by tree.
func (rl *rules) stopLateSubtasks(ctx context.Context, late []*state.Task) error {
	byRoot := map[string][]string{}
	var roots []string
	for _, t := range late {
		if byRoot[t.Root] == nil {
			roots = append(roots, t.Root)
		}
		byRoot[t.Root] = append(byRoot[t.Root], t.ID)
	}
	for _, root := range roots {
		budget := "its time budget"
		if r, err := rl.store.Task(ctx, root); err == nil && r != nil && r.MaxTime > 0 {
			budget = "its time budget of " + r.MaxTime.D().String()
		}
		why := fmt.Sprintf("the tree of %s ran out %s", root, budget)
		if err := rl.stopTasks(ctx, byRoot[root], why, map[string]string{}); err != nil {
			return err
		}
	}
	return nil
}

// pastTreeDeadline reports whether t is a subtask the watchdog stops:
// its tree's time ran out, and it is neither ended nor stopped.
func pastTreeDeadline(t *state.Task, now time.Time) bool {
	return t.Root != "" && !t.TreeDeadline.IsZero() && !now.Before(t.TreeDeadline) && t.BudgetStop == "" && !t.Phase.Terminal()
}
