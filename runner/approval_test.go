package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// person answers approval requests: by a fixed decision, after a wait
// when one is set, or never (no decision).
type person struct {
	decision runner.Approval
	after    time.Duration

	mu    sync.Mutex
	asked []state.ApprovalRequest
}

func (p *person) Await(ctx context.Context, taskID string, req state.ApprovalRequest) (runner.Approval, error) {
	p.mu.Lock()
	p.asked = append(p.asked, req)
	p.mu.Unlock()
	if p.decision == "" {
		<-ctx.Done()
		return "", ctx.Err()
	}
	select {
	case <-time.After(p.after):
		return p.decision, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (p *person) questions() []state.ApprovalRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked)
}

// An exec child asks before it runs a command (an approval line), and
// the answer comes back on its stdin: by the policy, or by a person, in
// time or not. A decline is a denied call, and the completed task says
// how many there were.
func TestAnExecChildAsks(t *testing.T) {
	for _, c := range []struct {
		name    string
		policy  runner.ApprovalPolicy
		person  *person
		ran     bool
		asked   bool
		why     string // the denied call's why; "" for none
		expired bool
	}{
		{name: "a person accepts", policy: runner.ApprovalAsk, person: &person{decision: runner.ApprovalAccept}, ran: true, asked: true},
		{name: "a person declines", policy: runner.ApprovalAsk, person: &person{decision: runner.ApprovalDecline}, asked: true, why: "declined by a person"},
		{name: "nobody answers in time", policy: runner.ApprovalAsk, person: &person{}, asked: true, why: "no answer within 300ms", expired: true},
		{name: "nobody can be asked", policy: runner.ApprovalAsk, why: "nobody can be asked"},
		{name: "accepted by the policy", policy: runner.ApprovalAcceptAll, ran: true},
		{name: "declined by the policy", policy: runner.ApprovalDeclineAll, why: "declined by the approval policy"},
		{name: "never: nobody is asked, and stdin ends after the task", policy: runner.ApprovalNever, why: "--approval never: nobody is asked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Approval: c.policy}), "Tidy up\n@ask echo ran > ran.txt\n@output after the question")
			f.Runner.WorkRoot = t.TempDir()
			f.Runner.ApprovalTimeout = 300 * time.Millisecond
			if c.person != nil {
				f.Runner.Replies = c.person
			}
			f.Run(t, context.Background())
			if f.Task.Phase != state.PhaseCompleted {
				t.Fatalf("task %s (%s): logs %q", f.Task.Phase, f.Task.PhaseReason, f.Rec.Logs())
			}
			_, err := os.Stat(filepath.Join(f.Runner.WorkRoot, f.Task.ID, "ran.txt"))
			if ran := err == nil; ran != c.ran {
				t.Errorf("the command ran: %v, want %v; logs %q", ran, c.ran, f.Rec.Logs())
			}
			if !slices.Contains(f.Rec.Logs(), "output: after the question") {
				t.Errorf("the child did not go on after its question: %q", f.Rec.Logs())
			}
			var asked []state.ApprovalRequest
			if c.person != nil {
				asked = c.person.questions()
			}
			if (len(asked) == 1) != c.asked {
				t.Fatalf("asked %+v, want a question: %v", asked, c.asked)
			}
			if c.asked {
				q := asked[0]
				if q.ID != "ask-1-1" || q.Kind != state.ApprovalCommand || q.Tool != "sh" || q.Command != "echo ran > ran.txt" ||
					q.Cwd != filepath.Join(f.Runner.WorkRoot, f.Task.ID) || q.Deadline.IsZero() {
					t.Errorf("the question %+v does not say what it approves", q)
				}
				var waited *state.PhaseEvent
				for _, p := range f.Rec.Phases() {
					if p.Phase == state.PhaseAwaitingReply {
						waited = &p
					}
				}
				if waited == nil || waited.Request == nil || waited.Request.Command != q.Command || !strings.Contains(waited.Reason, "run echo ran > ran.txt in ") {
					t.Errorf("the awaiting_reply phase reported %+v", waited)
				}
			}
			d := f.Task.Attempts[0].Denied
			switch {
			case c.why == "" && (d.Count != 0 || f.Task.PhaseReason != ""):
				t.Errorf("denied %+v, reason %q; want none", d, f.Task.PhaseReason)
			case c.why != "" && (d.Count != 1 || d.Calls[0].Why != c.why || d.Calls[0].Tool != "sh" || !strings.Contains(d.Calls[0].Input, "echo ran") ||
				f.Task.PhaseReason != "1 tool call denied"):
				t.Errorf("denied %+v, reason %q; want one, %s", d, f.Task.PhaseReason, c.why)
			}
			if (f.Task.ApprovalExpired != nil) != c.expired {
				t.Errorf("the task's expired question %+v, want one: %v", f.Task.ApprovalExpired, c.expired)
			}
		})
	}
}

// The time a person takes to answer does not count against the attempt's
// limits: an answer that comes after they have passed still lets the
// attempt complete.
func TestAQuestionStopsTheAttemptLimit(t *testing.T) {
	const limit = 300 * time.Millisecond
	f := runnertest.NewFixture(t, sampleExec(t, exec.Config{Approval: runner.ApprovalAsk}), "@ask echo ran > ran.txt")
	f.Runner.WorkRoot = t.TempDir()
	// The question is the child's first event: the first-event limit
	// does not fire while a person takes their time either.
	f.Runner.Timeouts = runner.Timeouts{Attempt: []time.Duration{limit}, FirstEvent: []time.Duration{limit}}
	f.Runner.Replies = &person{decision: runner.ApprovalAccept, after: 3 * limit}
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s (%s), want it completed: the wait for the answer counted against the attempt limit", f.Task.Phase, f.Task.PhaseReason)
	}
	if _, err := os.Stat(filepath.Join(f.Runner.WorkRoot, f.Task.ID, "ran.txt")); err != nil {
		t.Errorf("the accepted command did not run: %v", err)
	}
}
