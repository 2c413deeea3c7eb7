package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// taskDiff is a task's last diff, as its agent reported it at the end of
// an attempt in a workspace (GET /v1/tasks/{id}/diff): read from the
// task's events at the seq the task keeps (Task.Diff), never searched for.
func (rl *rules) taskDiff(ctx context.Context, id string) (api.Diff, error) {
	t, err := rl.store.Task(ctx, id)
	if err != nil {
		return api.Diff{}, storeErr("read task", err)
	}
	if err := readable(ctx, id, t); err != nil {
		return api.Diff{}, err
	}
	if t.Diff.Seq == 0 {
		return api.Diff{}, &ruleError{errNotFound, fmt.Sprintf("task %s has no diff: it works on no repository, or no attempt of it has ended yet", id)}
	}
	lines, _, err := rl.store.Events(ctx, id, t.Diff.Seq-1, 1, 2*state.MaxDiffBytes)
	if err != nil {
		return api.Diff{}, storeErr("read events", err)
	}
	var e api.StoredEvent
	if len(lines) != 1 || lines[0].Seq != t.Diff.Seq || json.Unmarshal(lines[0].Line, &e) != nil || e.Kind != state.EventDiff {
		return api.Diff{}, fmt.Errorf("task %s: its diff is not its event %d", id, t.Diff.Seq)
	}
	var d state.DiffEvent
	if err := json.Unmarshal(e.Payload, &d); err != nil {
		return api.Diff{}, fmt.Errorf("task %s: its diff does not read: %w", id, err)
	}
	return api.Diff{TaskID: id, Attempt: e.Attempt, At: e.CreatedAt, DiffEvent: d}, nil
}
