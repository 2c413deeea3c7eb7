package state

import (
	"strings"
	"testing"
	"time"
)

func TestApprovalRequestIsBounded(t *testing.T) {
	paths := make([]string, MaxApprovalPaths+5)
	for i := range paths {
		paths[i] = "/w/f"
	}
	r := ApprovalRequest{ID: "q1", Kind: ApprovalFileChange, Command: strings.Repeat("é", MaxApprovalText),
		Paths: paths, Diff: strings.Repeat("+line\n", MaxApprovalDiff/6+10), Input: strings.Repeat("x", MaxApprovalText+1)}
	r.Bound()
	if len(r.Command) > MaxApprovalText+len("…") || !strings.HasSuffix(r.Command, "é…") {
		t.Errorf("command cut to %d bytes, ending %q: want at most %d, at a character's end, marked", len(r.Command), r.Command[len(r.Command)-8:], MaxApprovalText)
	}
	if len(r.Paths) != MaxApprovalPaths || r.PathsMore != 5 {
		t.Errorf("%d paths and %d more, want %d and 5", len(r.Paths), r.PathsMore, MaxApprovalPaths)
	}
	if len(r.Diff) > MaxApprovalDiff || !r.DiffCut || !strings.HasSuffix(r.Diff, "+line\n") {
		t.Errorf("diff of %d bytes (cut %v), want at most %d, cut at a line's end", len(r.Diff), r.DiffCut, MaxApprovalDiff)
	}
	if !strings.HasSuffix(r.Input, "…") || len(r.Input) > MaxApprovalText+len("…") {
		t.Errorf("input of %d bytes not cut", len(r.Input))
	}
	small := ApprovalRequest{ID: "q2", Kind: ApprovalCommand, Command: "ls", Diff: "+a\n"}
	before := small
	small.Bound()
	if small.Command != before.Command || small.Diff != before.Diff || small.DiffCut {
		t.Errorf("a request within its bounds changed: %+v", small)
	}
}

func TestApprovalWhat(t *testing.T) {
	for _, c := range []struct {
		r    ApprovalRequest
		want string
	}{
		{ApprovalRequest{Kind: ApprovalCommand, Command: "rm -rf\n build", Cwd: "/w"}, "run rm -rf build in /w"},
		{ApprovalRequest{Kind: ApprovalFileChange, Paths: []string{"/w/a.go"}}, "change /w/a.go"},
		{ApprovalRequest{Kind: ApprovalFileChange, Paths: []string{"/w/a.go", "/w/b.go"}, PathsMore: 3}, "change 5 files: /w/a.go, /w/b.go"},
		{ApprovalRequest{Kind: ApprovalTool, Tool: "WebFetch", Input: `{"url":"https://example.com"}`}, `use WebFetch {"url":"https://example.com"}`},
		{ApprovalRequest{Kind: ApprovalFileChange}, "file_change"},
	} {
		if got := c.r.What(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}

func TestDeniedCallsAreCountedAndBounded(t *testing.T) {
	task := NewTask("t", "p", t0)
	must(t, task.Transition(PhaseClaimed, "", t0))
	a, err := task.StartFirstAttempt("a1", nil, t0)
	must(t, err)
	for i := range MaxDeniedCalls + 3 {
		must(t, task.Deny("a1", DeniedCall{Tool: "Bash", Input: strings.Repeat("y", MaxDeniedInput*2), Why: "declined by a person", At: t0.Add(time.Duration(i) * time.Second)}))
	}
	if a.Denied.Count != MaxDeniedCalls+3 || len(a.Denied.Calls) != MaxDeniedCalls || task.Denied != MaxDeniedCalls+3 {
		t.Fatalf("attempt counts %d, keeps %d; task counts %d", a.Denied.Count, len(a.Denied.Calls), task.Denied)
	}
	if in := a.Denied.Calls[0].Input; len(in) > MaxDeniedInput+len("…") {
		t.Errorf("a denied call's input kept whole: %d bytes", len(in))
	}
	if err := task.Check(); err != nil {
		t.Errorf("invariant: %v", err)
	}
	lines := DeniedLines(task)
	if len(lines) != MaxDeniedCalls+1 || !strings.HasSuffix(lines[0], "(declined by a person)") || lines[len(lines)-1] != "attempt 1: and 3 more" {
		t.Errorf("denied lines: %q", lines)
	}
	c := task.Clone()
	must(t, task.Deny("a1", DeniedCall{Tool: "Write"}))
	if c.Attempts[0].Denied.Count != MaxDeniedCalls+3 || c.Denied != MaxDeniedCalls+3 {
		t.Error("a clone's denied calls changed with the task's")
	}
	must(t, task.FinalizeAttempt("a1", Outcome{Status: AttemptCompleted}, t0))
	if err := task.Deny("a1", DeniedCall{Tool: "Bash"}); err == nil {
		t.Error("a finalized attempt took a denied call")
	}
	if got := Timeline(task, t0); !strings.Contains(got[0], "24 tool calls denied") {
		t.Errorf("timeline %q does not say the denied calls", got)
	}
	if DeniedText(1) != "1 tool call denied" || DeniedText(0) != "" {
		t.Error("DeniedText")
	}
}
