package taskview

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

// TestTheSubtaskViews: a parent's tree names its subtasks with their
// phases, and one it cannot read by its id; a subtask's end says its
// phase, why, its result and timeline; subtask ls a row each. Titles a
// parent chose are printed inert.
func TestTheSubtaskViews(t *testing.T) {
	t.Parallel()
	tasks := colourTasks(t)
	now := tasks[0].CreatedAt.Add(time.Minute)
	parent := tasks[3]
	parent.Children = []string{"t-done", "t-gone"}
	kid := tasks[0]
	kid.Title = "kid \x1b[2J"
	get := func(_ context.Context, id string) (*state.Task, error) {
		if id == kid.ID {
			return kid, nil
		}
		return nil, errors.New("no such task")
	}
	var b bytes.Buffer
	SubtaskTree(context.Background(), &b, Palette{}, parent, get)
	if want := "\nsubtasks:\n  t-done  completed  kid \\x1b[2J\n  t-gone\n"; b.String() != want {
		t.Errorf("the tree:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	failed := tasks[1]
	failed.Parent, failed.Depth, failed.PhaseReason = "t-running", 1, "network: reset"
	SubtaskTree(context.Background(), &b, Palette{}, failed, get)
	if want := "\nparent:   t-running (depth 1)\n"; b.String() != want {
		t.Errorf("a subtask's tree: %q, want %q", b.String(), want)
	}
	b.Reset()
	SubtaskEnd(&b, Palette{}, failed, now)
	if got := b.String(); !strings.HasPrefix(got, "t-failed  failed (network: reset)  task t-failed\n  Attempt 1  failed") {
		t.Errorf("a subtask's end:\n%s", got)
	}
	b.Reset()
	Subtasks(&b, Palette{}, []*state.Task{kid, failed})
	if want := "ID        PHASE      TITLE\nt-done    completed  kid \\x1b[2J\nt-failed  failed     task t-failed\n"; b.String() != want {
		t.Errorf("subtask ls:\n%q\nwant\n%q", b.String(), want)
	}
}
