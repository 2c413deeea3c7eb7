package taskfollow

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/state"
)

// TestMain checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// complete has agent claim the next task and run it to completed, its
// result in.
func complete(t *testing.T, agent *controlplane.Client, agentID, summary string) string {
	t.Helper()
	c := servertest.Claim(t, agent, agentID)
	now := time.Now()
	a := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: now}
	done := a
	done.Status, done.CompletedAt = state.AttemptCompleted, now
	servertest.Send(t, agent, agentID, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}, a, state.PhaseEvent{Phase: state.PhaseTurnStarted},
		done, state.PhaseEvent{Phase: state.PhaseCompleted},
		state.CompleteEvent{Status: state.PhaseCompleted, Attempts: []state.Attempt{done}, Summary: summary})
	return c.Task.ID
}

// readUntil reads lines from r until one holds want, and returns those
// read; the test fails if r ends first.
func readUntil(t *testing.T, r *bufio.Scanner, want string) string {
	t.Helper()
	var read []string
	for r.Scan() {
		read = append(read, r.Text())
		if strings.Contains(r.Text(), want) {
			return strings.Join(read, "\n")
		}
	}
	t.Fatalf("the output ended without %q:\n%s", want, strings.Join(read, "\n"))
	return ""
}

// Against a control plane on loopback: a wait follows a task to its end
// and prints its lines and its timeline; a task no online agent can take
// ends the wait at once, unless Queued, when Timeout bounds it; either
// returns the task as last seen.
func TestWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := servertest.Start(t, servertest.Options{})
	src := tasksource.Remote{Client: cp.Operator}
	agent := cp.Agent(t, "vm-1")
	if _, err := agent.Heartbeat(ctx, api.HeartbeatRequest{AgentID: "vm-1", State: api.AgentRunning, Health: api.Health{Grade: "available"}, Capacity: api.Capacity{Max: 1}}); err != nil {
		t.Fatal(err)
	}

	v, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "count"})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	defer pr.Close()
	type waited struct {
		v   api.TaskView
		err error
	}
	ended := make(chan waited, 1)
	go func() {
		v, err := Wait(ctx, src, v.ID, pw, WaitOptions{})
		pw.Close()
		ended <- waited{v, err}
	}()
	lines := bufio.NewScanner(pr)
	readUntil(t, lines, "queued")
	complete(t, agent, "vm-1", "counted 7")
	readUntil(t, lines, "completed")
	readUntil(t, lines, "  Attempt 1  completed")
	w := <-ended
	if w.err != nil || w.v.Phase != state.PhaseCompleted || w.v.Result == nil || w.v.Result.Summary != "counted 7" {
		t.Fatalf("the wait ended on %+v, %v", w.v, w.err)
	}
	if ExitCode(w.v.Phase) != ExitCompleted {
		t.Errorf("completed exits %d", ExitCode(w.v.Phase))
	}

	gpu, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "train", Requires: []state.Requirement{"label=gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	got, err := Wait(ctx, src, gpu.ID, &out, WaitOptions{Quiet: true})
	var u UnroutableError
	if !errors.As(err, &u) || ErrCode(err) != ExitUnroutable || got.ID != gpu.ID || got.Phase != state.PhaseQueued || out.Len() != 0 {
		t.Fatalf("a task no agent can take: %+v, %v", got, err)
	}
	if !strings.Contains(err.Error(), "no online agent can take it: no agent with label=gpu") {
		t.Errorf("unroutable says %q", err)
	}
	got, err = Wait(ctx, src, gpu.ID, &out, WaitOptions{Quiet: true, Queued: true, Timeout: 300 * time.Millisecond})
	if ErrCode(err) != ExitWaitTimeout || got.ID != gpu.ID || err.Error() != fmt.Sprintf("task %s has not ended within --timeout 300ms; it goes on (agent tasks show %s)", gpu.ID, gpu.ID) {
		t.Fatalf("a bounded wait: %+v, %v", got, err)
	}
	// As submit --wait: the reason the wait ended on stderr, the exit
	// code, no error; nothing on stdout with Quiet.
	var errOut strings.Builder
	out.Reset()
	got, code, err := Submitted(ctx, src, gpu.ID, &out, &errOut, WaitOptions{Quiet: true})
	if err != nil || code != ExitUnroutable || got.ID != gpu.ID || out.Len() != 0 || !strings.HasPrefix(errOut.String(), "agent: task "+gpu.ID+" is queued and no online agent can take it") {
		t.Errorf("Submitted, unroutable: %+v %d %v; out %q, errOut %q", got, code, err, out.String(), errOut.String())
	}
	if _, code, err := Submitted(ctx, src, v.ID, &out, &errOut, WaitOptions{}); err != nil || code != ExitCompleted || !strings.HasPrefix(out.String(), v.ID+" submitted; waiting for it to end\n") {
		t.Errorf("Submitted, completed: %d %v; out %q", code, err, out.String())
	}
	// Another end of the context is no timeout.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Wait(cctx, src, gpu.ID, &out, WaitOptions{Quiet: true, Queued: true, Timeout: time.Hour}); !errors.Is(err, context.Canceled) || ErrCode(err) != 0 {
		t.Errorf("a cancelled wait: %v", err)
	}
}

// subtask wait's loop: every subtask named, each once though named twice,
// returned once each has ended.
func TestSubtasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := servertest.Start(t, servertest.Options{})
	agent := cp.Agent(t, "vm-1")
	var ids []string
	for i := range 2 {
		v, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: fmt.Sprintf("part %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	complete(t, agent, "vm-1", "part 0 done")
	var remind strings.Builder
	bctx, cancel := Bound(ctx, 300*time.Millisecond, "both")
	defer cancel()
	done, err := Subtasks(bctx, tasksource.Remote{Client: cp.Operator}, ids, &remind)
	if err = Ended(bctx, err); ErrCode(err) != ExitWaitTimeout || EndedOf(ids, done) != 1 || done[ids[0]] == nil {
		t.Fatalf("with one of two ended, past the timeout: %v, %d ended", err, EndedOf(ids, done))
	}
	complete(t, agent, "vm-1", "part 1 done")
	done, err = Subtasks(ctx, tasksource.Remote{Client: cp.Operator}, append(ids, ids[0]), &remind)
	if err != nil || EndedOf(ids, done) != 2 || done[ids[1]].Result.Summary != "part 1 done" {
		t.Fatalf("both ended: %v, %+v", err, done)
	}
	if remind.String() != "" {
		t.Errorf("no retry, yet it said %q", remind.String())
	}
	if _, err := Subtasks(ctx, tasksource.Remote{Client: cp.Operator}, []string{"t-nosuchtask"}, &remind); err == nil || !strings.HasPrefix(err.Error(), "t-nosuchtask: no task t-nosuchtask at ") {
		t.Errorf("an unknown subtask: %v", err)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for p, want := range map[state.Phase]int{
		state.PhaseCompleted: ExitCompleted, state.PhaseFailed: ExitFailed, state.PhaseRecoverableFailed: ExitNeedsPerson,
		state.PhaseTimedOut: ExitTimedOut, state.PhaseExpired: ExitTimedOut, state.PhaseCancelled: ExitCancelled,
	} {
		if got := ExitCode(p); got != want {
			t.Errorf("ExitCode(%s) = %d, want %d", p, got, want)
		}
	}
	if ErrCode(errors.New("network")) != 0 || ErrCode(fmt.Errorf("wrapped: %w", UnroutableError{})) != ExitUnroutable {
		t.Error("ErrCode does not tell a wait's ends from other errors")
	}
}

// A local follow wakes on the data directory's changes, not only on its
// poll: a DirWatch fires once a task file is written, and a directory
// made after the watch began is watched once added.
func TestDirWatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := NewDirWatch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tasks := datadir.Layout{Dir: dir}.Tasks()
	w.Add(tasks) // not there yet: nothing watched
	if err := os.MkdirAll(tasks, 0o700); err != nil {
		t.Fatal(err)
	}
	w.Add(tasks)
	if err := os.WriteFile(filepath.Join(tasks, "t-1.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	<-w.Wake()
}
