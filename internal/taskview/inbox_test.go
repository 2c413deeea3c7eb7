package taskview

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

// TestTheInboxListsUnansweredQuestionsOldestFirst: only a task that
// waits on a question nobody answered is in the inbox, the oldest
// question first; a question from an agent that did not say when it was
// asked counts from the task's last change.
func TestTheInboxListsUnansweredQuestionsOldestFirst(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ask := func(id string, asked time.Time) *state.Task {
		task := state.NewTask(id, "p", now)
		task.Phase, task.UpdatedAt = state.PhaseAwaitingReply, now.Add(-time.Hour)
		task.AwaitingReply = &state.ApprovalRequest{ID: id + "-r", Kind: state.ApprovalCommand, Command: "make deploy", Asked: asked}
		return task
	}
	newer, older, undated := ask("t-new", now.Add(-time.Minute)), ask("t-old", now.Add(-10*time.Minute)), ask("t-undated", time.Time{})
	answered := ask("t-answered", now.Add(-20*time.Minute))
	answered.Reply = &state.Reply{Decision: state.AnswerAccept, At: now}
	running := ask("t-running", now.Add(-30*time.Minute))
	running.Phase = state.PhaseTurnStarted
	entries := InboxOf([]*state.Task{newer, answered, running, older, undated})
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.TaskID)
	}
	if got := strings.Join(ids, ","); got != "t-undated,t-old,t-new" {
		t.Fatalf("the inbox: %s, want t-undated,t-old,t-new", got)
	}
	if !entries[0].Request.Asked.Equal(undated.UpdatedAt) {
		t.Errorf("an undated question asked %s, want the task's last change %s", entries[0].Request.Asked, undated.UpdatedAt)
	}
	var b bytes.Buffer
	Inbox(&b, testHint{}, entries, now)
	for _, want := range []string{"t-old\n  asked 10m ago\n  request:  t-old-r (command)\n  command:  make deploy\n", "  answer:   agent tasks reply t-old --accept|--decline --control-plane http://cp\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the inbox lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	Inbox(&b, testHint{}, nil, now)
	if b.String() != "no approval waits for a person\n" {
		t.Errorf("an empty inbox: %q", b.String())
	}
}

// TestApprovalLinesShowTheDiffBoundedAndInert: a question's diff is
// counted whole, shown to the bound asked, and what the task wrote in it
// is inert.
func TestApprovalLinesShowTheDiffBoundedAndInert(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	diff := "--- a/x\n+++ b/x\n@@ -1 +1,3 @@\n-old\n+new \x1b[2J\n+two\n+three\n"
	r := &state.ApprovalRequest{ID: "r1", Kind: state.ApprovalFileChange, Paths: []string{"x"}, Diff: diff, Deadline: now.Add(5 * time.Minute), Asked: now}
	lines := ApprovalLines(r, now, 3)
	got := strings.Join(lines, "\n")
	for _, want := range []string{"change:   x", "diff:     +3 -1", `  --- a/x`, "  … 4 more lines (agent tasks show ID)", "declined: in 5m if nobody answers"} {
		if !strings.Contains(got, want) {
			t.Errorf("the lines lack %q:\n%s", want, got)
		}
	}
	all := strings.Join(ApprovalLines(r, now, 0), "\n")
	if !strings.Contains(all, `+new \x1b[2J`) || strings.Contains(all, "\x1b") {
		t.Errorf("the whole diff, inert:\n%q", all)
	}
}
