package tasksource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/state"
)

// TestMain checks that no goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// localTasks writes tasks to a data directory's task files, as the agent
// saves them: t-0 … t-3 submitted a minute apart, t-1 ended
// recoverable_failed (a person decides), the others completed.
func localTasks(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := state.OpenStore(datadir.Layout{Dir: dir}.Tasks())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for i := range 4 {
		id, at := fmt.Sprintf("t-%d", i), t0.Add(time.Duration(i)*time.Minute)
		task := state.NewTask(id, "p", at)
		task.Title = "task " + id
		must(t, task.Transition(state.PhaseClaimed, "", at))
		_, err := task.StartFirstAttempt(id+"-a1", []string{"model-a"}, at)
		must(t, err)
		must(t, task.Transition(state.PhaseTurnStarted, "", at))
		out, end := state.Outcome{Status: state.AttemptCompleted}, state.PhaseCompleted
		if i == 1 {
			out = state.Outcome{Status: state.AttemptFailed, Error: &state.Error{Code: state.CodeNetwork, Message: "reset"},
				Retry: &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateSideEffect, Decision: state.DecisionStopped}}
			end = state.PhaseRecoverableFailed
		}
		must(t, task.FinalizeAttempt(id+"-a1", out, at.Add(time.Second)))
		must(t, task.Transition(end, "", at.Add(time.Second)))
		must(t, st.Save(task))
	}
	return dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ids(tasks []*state.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func TestLocal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := Local{DataDir: localTasks(t)}
	if s.KnowsQueue() || s.String() != s.DataDir {
		t.Errorf("a data directory knows the queue (%v) or names itself %q", s.KnowsQueue(), s.String())
	}
	got, err := s.Tasks(ctx, api.TaskFilter{Phase: state.PhaseCompleted}, 2)
	if err != nil || !slices.Equal(ids(got), []string{"t-0", "t-2"}) {
		t.Errorf("the first 2 completed: %v, %v", ids(got), err)
	}
	for _, tc := range []struct {
		order string
		limit int
		want  []string
	}{
		{OrderPeople, 0, []string{"t-1", "t-3", "t-2", "t-0"}},
		{OrderPeople, 2, []string{"t-1", "t-3"}},
		{OrderNewest, 0, []string{"t-3", "t-2", "t-1", "t-0"}},
		{OrderOldest, 3, []string{"t-0", "t-1", "t-2"}},
	} {
		got, err := List(ctx, s, tc.order, api.TaskFilter{}, tc.limit)
		if err != nil || !slices.Equal(ids(got), tc.want) {
			t.Errorf("List %s limit %d: %v, %v; want %v", tc.order, tc.limit, ids(got), err, tc.want)
		}
	}
	task, err := s.Task(ctx, "t-2")
	if err != nil || task.ID != "t-2" {
		t.Fatalf("Task(t-2) = %v, %v", task, err)
	}
	// A task the agent has not claimed yet may come: a follow waits.
	if _, err := s.Task(ctx, "t-9"); !errors.Is(err, ErrNoTask) || !s.Transient(err) {
		t.Errorf("an unknown task: %v, transient %v; want ErrNoTask, transient", err, s.Transient(err))
	}
	// A data directory the agent never ran in is an error, not no tasks.
	if _, err := (Local{DataDir: t.TempDir()}).Tasks(ctx, api.TaskFilter{}, 0); err == nil || !strings.Contains(err.Error(), "no task state") {
		t.Errorf("an empty directory: %v", err)
	}
}

// stopOn has agent run the next task to recoverable_failed: a person
// decides.
func stopOn(t *testing.T, agent *controlplane.Client, agentID string) string {
	t.Helper()
	a := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: time.Now()}
	failed := a
	failed.Status, failed.CompletedAt = state.AttemptFailed, time.Now()
	failed.Error = &state.Error{Code: state.CodeNetwork, Message: "reset"}
	failed.Retry = &state.RetryDecision{TechnicallyRetryable: true, Gate: state.GateSideEffect, Decision: state.DecisionStopped}
	c := servertest.Claim(t, agent, agentID)
	servertest.Send(t, agent, agentID, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}, a, state.PhaseEvent{Phase: state.PhaseTurnStarted},
		failed, state.PhaseEvent{Phase: state.PhaseRecoverableFailed},
		state.CompleteEvent{Status: state.PhaseRecoverableFailed, Attempts: []state.Attempt{failed}})
	return c.Task.ID
}

// From the control plane: pages, the people's order (a task that needs a
// person kept on top, though older, and under a limit), and an unknown
// task said with where it is not.
func TestRemote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := servertest.Start(t, servertest.Options{})
	s := Remote{Client: cp.Operator}
	if !s.KnowsQueue() || s.String() != cp.URL {
		t.Errorf("the control plane does not know the queue (%v) or names itself %q", s.KnowsQueue(), s.String())
	}
	var queued []string
	for i := range 4 {
		v, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: fmt.Sprintf("task %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, v.ID)
	}
	stopped := stopOn(t, cp.Agent(t, "vm-1"), "vm-1") // the oldest, claimed first
	if stopped != queued[0] {
		t.Fatalf("the agent ran %s, not the oldest %s", stopped, queued[0])
	}
	all, err := s.Tasks(ctx, api.TaskFilter{}, 0)
	if err != nil || !slices.Equal(ids(all), queued) {
		t.Errorf("every task, oldest first: %v, %v; want %v", ids(all), err, queued)
	}
	for _, tc := range []struct {
		order string
		limit int
		want  []string
	}{
		{OrderPeople, 0, []string{stopped, queued[3], queued[2], queued[1]}},
		{OrderPeople, 1, []string{stopped}},
		{OrderPeople, 2, []string{stopped, queued[3]}},
		{OrderNewest, 2, []string{queued[3], queued[2]}},
		{OrderOldest, 0, queued},
	} {
		got, err := List(ctx, s, tc.order, api.TaskFilter{}, tc.limit)
		if err != nil || !slices.Equal(ids(got), tc.want) {
			t.Errorf("List %s limit %d: %v, %v; want %v", tc.order, tc.limit, ids(got), err, tc.want)
		}
	}
	live, err := List(ctx, s, OrderPeople, api.TaskFilter{Live: true}, 0)
	if err != nil || slices.Contains(ids(live), stopped) || len(live) != 3 {
		t.Errorf("the live tasks: %v, %v", ids(live), err)
	}

	_, err = s.Task(ctx, "t-nosuchtask")
	if !errors.Is(err, ErrNoTask) || s.Transient(err) || err.Error() != "no task t-nosuchtask at "+cp.URL {
		t.Errorf("an unknown task: %v, transient %v", err, s.Transient(err))
	}
	// The network failing may pass.
	cp.Close()
	if _, err := s.Task(ctx, queued[1]); err == nil || !s.Transient(err) {
		t.Errorf("a control plane gone: %v, transient %v; want transient", err, s.Transient(err))
	}
}

// Completion offers the data directory's tasks a command applies to, each
// said by its phase and title, and nothing for a directory it cannot read.
func TestCandidates(t *testing.T) {
	t.Parallel()
	dir := localTasks(t)
	got := Candidates(dir, "t-", Recoverable)
	if len(got) != 1 || got[0].ID != "t-1" || got[0].Desc != "recoverable_failed task t-1" {
		t.Errorf("the recoverable tasks: %+v", got)
	}
	if got := Candidates(dir, "t-2", nil); len(got) != 1 || got[0].ID != "t-2" {
		t.Errorf("the tasks starting t-2: %+v", got)
	}
	for name, want := range map[string]func(*state.Task) bool{"unended": Unended, "awaiting a reply": AwaitingReply, "parked at a budget": ParkedAtBudget} {
		if got := Candidates(dir, "", want); len(got) != 0 {
			t.Errorf("%s: %+v, want none of these ended tasks", name, got)
		}
	}
	if got := Candidates(t.TempDir(), "", nil); got != nil {
		t.Errorf("an empty directory: %+v", got)
	}
}

// tasks ls's query: a phase by its name, a limit from 0, an order List
// knows; an unknown order is told apart (a usage error for the command).
func TestQueryCheck(t *testing.T) {
	t.Parallel()
	q := Query{Phase: "failed", Order: OrderNewest, Limit: 3}
	if err := q.Check(); err != nil || q.Filter.Phase != state.PhaseFailed {
		t.Errorf("a good query: %v, phase %q", err, q.Filter.Phase)
	}
	for _, tc := range []struct {
		q     Query
		want  string
		order bool
	}{
		{Query{Phase: "done", Order: OrderPeople}, `--phase "done": want one of `, false},
		{Query{Order: OrderPeople, Limit: -1}, "--limit -1: want 0 (all) or more", false},
		{Query{Order: "random\x1b"}, `--order "random\\x1b": want people, newest or oldest`, true},
	} {
		err := tc.q.Check()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || errors.As(err, &UnknownOrderError{}) != tc.order {
			t.Errorf("Check(%+v) = %v, want %q… (an unknown order: %v)", tc.q, err, tc.want, tc.order)
		}
	}
	if v := Views(nil); v == nil || len(v) != 0 {
		t.Errorf("no tasks make %#v, want []", v)
	}
}
