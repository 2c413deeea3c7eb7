package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/state"
)

// A task's last diff, reported by its agent as an event, is read back
// whole by GET /v1/tasks/{id}/diff, the latest one when attempts report
// several, after a restart too; the task shows its stat; a patch over the
// cap is refused, and a task without a diff says so (404).
func TestTaskDiff(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnv(t, dir, clk)
	e.submit("fix it", "")
	c := e.claim("ag-1", "available", 1)[0]
	id := c.Task.ID
	var nf *controlplane.APIError
	if _, err := e.client.TaskDiff(context.Background(), id); !errors.As(err, &nf) || nf.Status != http.StatusNotFound || !strings.Contains(err.Error(), "has no diff") {
		t.Fatalf("a task with no diff yet: %v", err)
	}
	first := state.DiffEvent{Repo: "app", Branch: "agent/" + id, BaseCommit: "b0", Head: "h1", Files: 1, Insertions: 1,
		Patch: "diff --git a/x b/x\n+one\n"}
	first.Bytes = int64(len(first.Patch))
	second := first
	second.Head, second.Insertions, second.Patch = "h2", 2, "diff --git a/x b/x\n+one\n+two\n"
	second.Bytes = int64(len(second.Patch))
	over := first
	over.Patch = strings.Repeat("+\n", state.MaxDiffBytes/2+1)
	res := e.send("ag-1",
		ev(id+":diff:1", state.EventDiff, c, first),
		ev(id+":log:1", state.EventLog, c, state.LogEvent{Stream: "stdout", Lines: []string{"between"}}),
		ev(id+":diff:2", state.EventDiff, c, second),
		ev(id+":diff:3", state.EventDiff, c, over))
	if got := statuses(res); got != "accepted accepted accepted rejected" || !strings.Contains(string(res[3].Reason), "over") {
		t.Fatalf("diff events: %s (%s)", got, res[3].Reason)
	}
	check := func(e *env) {
		t.Helper()
		d, err := e.client.TaskDiff(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.TaskID != id || d.Attempt != 1 || d.Head != "h2" || d.Patch != second.Patch || d.Insertions != 2 || d.Bytes != second.Bytes {
			t.Errorf("the diff read back: %+v", d)
		}
		v, _ := e.client.Task(context.Background(), id)
		if v.Diff.Seq != 3 || v.Diff.Insertions != 2 || v.Diff.Files != 1 || v.Diff.Bytes != second.Bytes {
			t.Errorf("the task's diff: %+v", v.Diff)
		}
	}
	check(e)
	e = e.restart(clk)
	check(e)

	// An agent reads the diff of a task it holds, no other.
	if _, err := e.as(e.tokenOfAgent("ag-1")).TaskDiff(context.Background(), id); err != nil {
		t.Errorf("the agent holding the task: %v", err)
	}
	if _, err := e.as(e.tokenOfAgent("ag-2")).TaskDiff(context.Background(), id); !errors.As(err, &nf) || nf.Status != http.StatusForbidden {
		t.Errorf("another agent read the diff: %v", err)
	}
}
