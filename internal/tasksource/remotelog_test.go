package tasksource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// A task's output as the control plane keeps it: each line as the agent's
// log files hold it, a header before an attempt's lines when all are
// read, and each call printing only what came since the last.
func TestRemoteLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := servertest.Start(t, servertest.Options{})
	if _, err := cp.Operator.CreateTask(ctx, api.CreateTaskRequest{Prompt: "talk"}); err != nil {
		t.Fatal(err)
	}
	agent := cp.Agent(t, "vm-1")
	c := servertest.Claim(t, agent, "vm-1")
	id := c.Task.ID
	at := time.Now()
	servertest.Send(t, agent, "vm-1", c, state.PhaseEvent{Phase: state.PhaseExecutorStarting},
		state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: at},
		state.PhaseEvent{Phase: state.PhaseTurnStarted},
		state.LogEvent{Stream: state.LogStream("stdout"), Lines: []string{"hello", "from afar"}})

	var got []string
	all := NewRemoteLog(cp.Operator, id, 0, func(l string) { got = append(got, l) })
	if err := all.Next(ctx); err != nil {
		t.Fatal(err)
	}
	// Each line as the agent's log files hold it: the time it was made
	// at (to the millisecond), its stream, its text.
	ts := `\d\d:\d\d:\d\d\.\d{3}`
	line := func(stream, text string) string {
		return "^" + ts + " " + regexp.QuoteMeta(fmt.Sprintf("%-8s %s", stream, text)) + "$"
	}
	want := []string{`^== attempt 1 ==$`, line("stdout", "hello"), line("stdout", "from afar")}
	if len(got) != len(want) {
		t.Fatalf("the log read:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !regexp.MustCompile(want[i]).MatchString(got[i]) {
			t.Errorf("line %d: %q, want %s", i, got[i], want[i])
		}
	}
	servertest.Send(t, agent, "vm-1", c, state.LogEvent{Stream: state.LogStream("stderr"), Lines: []string{"later"}})
	got = nil
	if err := all.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !regexp.MustCompile(line("stderr", "later")).MatchString(got[0]) {
		t.Errorf("the next read printed %q, want the line that came since alone", got)
	}
	// One attempt: its lines, no header; another attempt's: none.
	got = nil
	if err := NewRemoteLog(cp.Operator, id, 1, func(l string) { got = append(got, l) }).Next(ctx); err != nil || len(got) != 3 || strings.HasPrefix(got[0], "==") {
		t.Errorf("attempt 1 alone: %q, %v", got, err)
	}
	got = nil
	if err := NewRemoteLog(cp.Operator, id, 2, func(l string) { got = append(got, l) }).Next(ctx); err != nil || len(got) != 0 {
		t.Errorf("attempt 2, which did not run: %q, %v", got, err)
	}
}

// A task's diff, read from its workspace as it is now: what it changed
// against its base, and the attempt from its task file; a task with no
// workspace says where it looked and what else there is.
func TestLocalDiff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := gittest.NewRepo(t)
	workDir := filepath.Join(gittest.OutOfReach(t), "work")
	m, err := workspace.New(workDir, []workspace.Repo{{Name: "app", Path: repo}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Prepare(ctx, "t-1", "app", "")
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(w.Dir, "README"), []byte("one\n2\nthree\n"), 0o600))
	s := Local{DataDir: t.TempDir()}
	d, err := Diff(ctx, s, workDir, "t-1")
	if err != nil {
		t.Fatal(err)
	}
	if d.TaskID != "t-1" || d.Repo != "app" || !strings.Contains(d.Patch, "-two\n+2\n") || d.Insertions != 1 || d.Deletions != 1 {
		t.Errorf("the diff: %+v", d)
	}
	// The control plane's: none for a task it does not know, said with
	// the task's id.
	cp := servertest.Start(t, servertest.Options{})
	if _, err := Diff(ctx, Remote{Client: cp.Operator}, "", "t-nosuchtask"); err == nil || !strings.HasPrefix(err.Error(), "tasks diff t-nosuchtask: ") {
		t.Errorf("the diff of a task the control plane does not know: %v", err)
	}
	_, err = s.Diff(ctx, workDir, "t-2")
	if want := "task t-2 has no workspace in " + workDir + ": it names no repository, or retention removed it"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a task with no workspace: %v, want %q…", err, want)
	}
}
