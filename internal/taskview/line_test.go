package taskview

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

// TestLineSaysWhatATaskDoesNow: the line of a follow for each state a
// task is in, and the same line for an unchanged task.
func TestLineSaysWhatATaskDoesNow(t *testing.T) {
	t.Parallel()
	tasks := colourTasks(t)
	running := tasks[3]
	if got, want := Line(running), "turn_started  attempt 1 with model-a"; got != want {
		t.Errorf("a running task: %q, want %q", got, want)
	}
	running.Progress = state.Progress{Message: "step 2 of 3", Percent: 40}
	if got, want := Line(running), "turn_started  step 2 of 3 (40%)"; got != want {
		t.Errorf("with progress: %q, want %q", got, want)
	}
	if again := *running; Line(&again) != Line(running) {
		t.Error("an unchanged task gives two lines")
	}
	asking := tasks[3]
	asking.AwaitingReply = &state.ApprovalRequest{ID: "r1", Kind: state.ApprovalCommand, Command: "make deploy"}
	if got := Line(asking); !strings.Contains(got, "waiting for a person: run make deploy") {
		t.Errorf("a question: %q", got)
	}
	failed := tasks[1]
	failed.PhaseReason = "network: reset"
	if got, want := Line(failed), "failed  network: reset"; got != want {
		t.Errorf("an end: %q, want %q", got, want)
	}
	queued := state.NewTask("t-q", "p", time.Now())
	queued.Unroutable = "no online agent runs claude"
	if got, want := Line(queued), "queued  unroutable: no online agent runs claude"; got != want {
		t.Errorf("unroutable: %q, want %q", got, want)
	}
}

// TestChangesPrintsEachChangeOnce: the first round prints what the board
// shows (not every old ending); later ones a line per task that changed,
// once, with its timeline when it ends; what a task wrote is printed
// inert.
func TestChangesPrintsEachChangeOnce(t *testing.T) {
	t.Parallel()
	tasks := colourTasks(t)
	now := tasks[0].CreatedAt.Add(time.Minute)
	done, failed, running := tasks[0], tasks[1], tasks[3]
	done.UpdatedAt, failed.UpdatedAt = now.Add(-time.Minute), now
	var c Changes
	var b bytes.Buffer
	c.Print(&b, Palette{}, []*state.Task{done, failed, running}, 1, now)
	first := b.String()
	if !strings.Contains(first, "t-failed") || !strings.Contains(first, "t-running") || strings.Contains(first, "t-done") {
		t.Errorf("the first round, one recent ending asked for:\n%s", first)
	}
	if !strings.Contains(first, "    Attempt 1  failed") {
		t.Errorf("an ended task's line has no timeline under it:\n%s", first)
	}
	b.Reset()
	c.Print(&b, Palette{}, []*state.Task{done, failed, running}, 1, now)
	if b.Len() != 0 {
		t.Errorf("a round with no change printed:\n%s", b.String())
	}
	running.Progress = state.Progress{Message: "\x1b[2Jstep 2"}
	c.Print(&b, Palette{}, []*state.Task{done, failed, running}, 1, now)
	if got := b.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `t-running  task t-running`) || !strings.Contains(got, `\x1b[2Jstep 2`) {
		t.Errorf("the progress of one task, inert:\n%q", got)
	}
}
