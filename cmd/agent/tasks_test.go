package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

func TestTasksCommandsDoNotCreateAMistypedDataDir(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{{"tasks", "ls"}, {"tasks", "show", "t-1"}, {"tasks", "logs", "t-1"}, {"health"}} {
		r := runAgent(t, append(args, "--data-dir", missing)...)
		wantOneLineError(t, r, 1, missing)
		if _, err := os.Stat(missing); err == nil {
			t.Fatalf("%v created %s", args, missing)
		}
	}
	if r := runAgent(t, "tasks", "show", "../../etc/passwd", "--data-dir", t.TempDir()); r.code != 1 {
		t.Errorf("a path as a task id: %+v", r)
	}
}

// tasks ls lists what needs a person on top (a question, then a stop to
// decide on), then the newest first, and a finished task's result where
// a running one's progress is: locally, and from the control plane,
// where a limit still keeps an old task that needs a person. --order
// newest and oldest list all in that order; another order is refused.
func TestTasksLsPutsWhatNeedsAPersonOnTop(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	stopped := submit(t, c, "Rotate\n@side-effect rotated the key\n@fail network\n@no-session")
	if v := c.waitDone(t, stopped); v.Phase != state.PhaseRecoverableFailed {
		t.Fatalf("the stopped task is %s", v.Phase)
	}
	var done []string
	for i := range 3 {
		id := submit(t, c, fmt.Sprintf("Task %d\n@progress 2\n@output finished number %d", i, i))
		if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
			t.Fatalf("task %d is %s", i, v.Phase)
		}
		done = append(done, id)
	}
	rows := func(args ...string) []string {
		t.Helper()
		r := runAgent(t, append([]string{"tasks", "ls"}, args...)...)
		if r.code != 0 {
			t.Fatalf("tasks ls %v: %+v", args, r)
		}
		var ids []string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
			ids = append(ids, strings.Fields(l)[0])
		}
		return ids
	}
	local := []string{"--data-dir", dataDir}
	testkit.WaitFor(t, "the agent to have saved every task", func() bool { return len(rows(local...)) == 4 })
	remote := []string{"--remote", "--control-plane", c.url(), "--token-file", c.operatorFile}
	for _, where := range [][]string{local, remote} {
		if got, want := rows(where...), []string{stopped, done[2], done[1], done[0]}; !slices.Equal(got, want) {
			t.Errorf("tasks ls %v: %v, want %v", where, got, want)
		}
		if got, want := rows(append(where, "--limit", "2")...), []string{stopped, done[2]}; !slices.Equal(got, want) {
			t.Errorf("tasks ls --limit 2 %v: %v, want %v", where, got, want)
		}
		if got, want := rows(append(where, "--order", "newest")...), []string{done[2], done[1], done[0], stopped}; !slices.Equal(got, want) {
			t.Errorf("tasks ls --order newest %v: %v, want %v", where, got, want)
		}
		if got, want := rows(append(where, "--order", "oldest")...), []string{stopped, done[0], done[1], done[2]}; !slices.Equal(got, want) {
			t.Errorf("tasks ls --order oldest %v: %v, want %v", where, got, want)
		}
		out := runAgent(t, append([]string{"tasks", "ls"}, where...)...).stdout
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, done[1]) && (!strings.Contains(l, "done: Task 1") || strings.Contains(l, "%")) {
				t.Errorf("tasks ls %v: a finished task's row does not show its result: %q", where, l)
			}
			if strings.HasPrefix(l, stopped) && !strings.Contains(l, "recoverable_failed: ") {
				t.Errorf("tasks ls %v: a stopped task's row does not say why: %q", where, l)
			}
		}
	}
	r := runAgent(t, "tasks", "ls", "--order", "random", "--data-dir", dataDir)
	wantOneLineError(t, r, 2, `--order "random": want people, newest or oldest`)
}
