package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
)

// A task's own allow list travels to the agent that claims it; one that
// names something other than hosts is refused in one line; a subtask
// takes its parent's list, or narrows it, never widens it, and an empty
// narrowing stays empty (it allows nothing more, not everything).
func TestATasksEgressListNarrowsDownItsTree(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	for _, list := range [][]string{{"https://pypi.org/simple"}, {"pypi.org:0"}, make([]string, api.MaxEgressAllow+1)} {
		if _, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "p", EgressAllow: list}); statusOf(err) != http.StatusBadRequest ||
			!strings.Contains(err.Error(), "egress_allow: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("egress_allow %q: %v, want a one-line 400", list, err)
		}
	}
	if _, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "the parent", EgressAllow: []string{"pypi.org", "*.github.com"}}); err != nil {
		t.Fatal(err)
	}
	c := e.claimOne("ag")
	if !slices.Equal(c.Task.EgressAllow, []string{"pypi.org", "*.github.com"}) {
		t.Fatalf("claimed with egress_allow %q", c.Task.EgressAllow)
	}
	pc := e.as(c.TaskToken)
	for _, w := range []struct {
		asks, gets []string
	}{
		{nil, []string{"pypi.org", "*.github.com"}},
		{[]string{"api.github.com", "evil.example"}, []string{"api.github.com"}},
		{[]string{"evil.example"}, []string{}},
	} {
		v, err := pc.CreateSubtask(ctx, c.Task.ID, api.CreateTaskRequest{Prompt: "a child", EgressAllow: w.asks})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.client.Task(ctx, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.EgressAllow, w.gets) || got.EgressAllow == nil {
			t.Errorf("a subtask asking %q got %#v, want %#v", w.asks, got.EgressAllow, w.gets)
		}
	}
	if _, err := pc.CreateSubtask(ctx, c.Task.ID, api.CreateTaskRequest{Prompt: "bad", EgressAllow: []string{"not a host"}}); statusOf(err) != http.StatusBadRequest {
		t.Errorf("a subtask with a bad list: %v, want 400", err)
	}
}
