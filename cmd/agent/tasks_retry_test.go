package main

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// A task the safety gate stopped is run again when a person says so: the
// control plane queues it, the agent runs attempt 2 with the timeline going
// on, and the timeline says a person retried. Retrying a task in any other
// phase is one line and exit 1.
func TestTasksRetryRunsTheNextAttempt(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}

	// Attempt 1 has a side effect, then a network error: the gate stops it.
	id := submit(t, c, "Rotate the staging credentials\n@side-effect rotated the staging key\n@fail network\n@no-session")
	if v := c.waitDone(t, id); v.Phase != state.PhaseRecoverableFailed {
		t.Fatalf("phase %s, want recoverable_failed", v.Phase)
	}
	waitLocalPhase(t, dataDir, id, state.PhaseRecoverableFailed)

	r := runAgent(t, append([]string{"tasks", "retry", id}, cpArgs...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "queued again for attempt 2") {
		t.Fatalf("tasks retry: %+v", r)
	}
	v := c.waitPhase(t, id, "completed", func(p state.Phase) bool { return p == state.PhaseCompleted })
	if len(v.Attempts) != 2 || !v.Attempts[1].RetriedByPerson || v.Attempts[0].Retry == nil || v.Attempts[0].Retry.Gate != state.GateSideEffect {
		t.Fatalf("attempts at the control plane: %+v", v.Attempts)
	}
	local := waitLocalPhase(t, dataDir, id, state.PhaseCompleted)
	if len(local.Attempts) != 2 || local.Attempts[1].Number != 2 || !local.Attempts[1].RetriedByPerson {
		t.Fatalf("local attempts: %+v", local.Attempts)
	}

	// The timeline goes on from attempt 1, locally and at the control plane.
	for _, args := range [][]string{{"tasks", "show", id, "--data-dir", dataDir}, append([]string{"tasks", "show", id, "--remote"}, cpArgs...)} {
		r := runAgent(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "-> blocked: side_effect; retried by a person") || !strings.Contains(r.stdout, "Attempt 2/3  completed") {
			t.Errorf("%v:\n%s%s", args, r.stdout, r.stderr)
		}
	}

	t.Run("a completed task is refused", func(t *testing.T) {
		r := runAgent(t, append([]string{"tasks", "retry", id}, cpArgs...)...)
		wantOneLineError(t, r, 1, "409 Conflict: task "+id+" is completed: only a recoverable_failed task can be retried")
	})
	t.Run("an unknown task is refused", func(t *testing.T) {
		r := runAgent(t, append([]string{"tasks", "retry", "t-nosuchtask"}, cpArgs...)...)
		wantOneLineError(t, r, 1, "404")
	})
	t.Run("without a control plane it is a usage error", func(t *testing.T) {
		r := runAgentEnv(t, []string{"AGENT_CONTROL_PLANE="}, "tasks", "retry", id, "--token-file", c.operatorFile)
		wantOneLineError(t, r, 2, "--control-plane is required")
	})
}

// tasks ls, show and cancel with --remote go to the control plane, and
// the local state and the control plane agree on how each task ended.
func TestTasksRemoteAndLocalAgree(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--max-retries", "0")
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	never := filepath.Join(t.TempDir(), "never")

	ids := map[state.Phase]string{
		state.PhaseCompleted:         submit(t, c, "@progress 2\n@output hello"),
		state.PhaseFailed:            submit(t, c, "@fail quota"),
		state.PhaseRecoverableFailed: submit(t, c, "@output partial work\n@fail network"),
		state.PhaseCancelled:         submit(t, c, "@wait-file "+never),
	}
	cancelled := ids[state.PhaseCancelled]
	waitLocalPhase(t, dataDir, cancelled, state.PhaseTurnStarted)
	r := runAgent(t, append([]string{"tasks", "cancel", cancelled, "--remote"}, cpArgs...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "cancel requested") {
		t.Fatalf("tasks cancel: %+v", r)
	}
	for want, id := range ids {
		t.Run(string(want), func(t *testing.T) {
			remote := c.waitDone(t, id)
			local := waitLocalPhase(t, dataDir, id, remote.Phase)
			if remote.Phase != want || local.Phase != want || len(local.Attempts) != len(remote.Attempts) {
				t.Fatalf("control plane %s (%d attempts), local %s (%d attempts); want %s", remote.Phase, len(remote.Attempts), local.Phase, len(local.Attempts), want)
			}
		})
	}

	r = runAgent(t, append([]string{"tasks", "ls", "--remote", "--json"}, cpArgs...)...)
	var views []api.TaskView
	if err := json.Unmarshal([]byte(r.stdout), &views); err != nil || len(views) != len(ids) || len(views[0].ProgressCard) == 0 {
		t.Fatalf("tasks ls --remote --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	// One shape for a task as shown: the local list and show say what the
	// control plane's list says, key for key.
	keys := func(raw []byte) []string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		return slices.Sorted(maps.Keys(m))
	}
	var remoteRaw, localRaw []json.RawMessage
	json.Unmarshal([]byte(r.stdout), &remoteRaw)
	lr := runAgent(t, "tasks", "ls", "--json", "--data-dir", dataDir)
	if err := json.Unmarshal([]byte(lr.stdout), &localRaw); err != nil || len(localRaw) == 0 || len(remoteRaw) == 0 {
		t.Fatalf("tasks ls --json: %v\n%s", err, lr.stdout)
	}
	var shown struct{ Task json.RawMessage }
	sr := runAgent(t, "tasks", "show", views[0].ID, "--json", "--data-dir", dataDir)
	if err := json.Unmarshal([]byte(sr.stdout), &shown); err != nil {
		t.Fatalf("tasks show --json: %v\n%s", err, sr.stdout)
	}
	for name, raw := range map[string][]byte{"the control plane's list": remoteRaw[0], "tasks ls --json": localRaw[0], "tasks show --json's task": shown.Task} {
		got := keys(raw)
		for _, k := range []string{"id", "phase", "attempts", "progress_card", "output_cut_lines", "output_cut_bytes"} {
			if !slices.Contains(got, k) {
				t.Errorf("%s has no %q: %v", name, k, got)
			}
		}
	}
	r = runAgent(t, append([]string{"tasks", "ls", "--remote"}, cpArgs...)...)
	for want, id := range ids {
		if !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, string(want)) {
			t.Errorf("tasks ls --remote lacks %s %s:\n%s", id, want, r.stdout)
		}
	}
	r = runAgent(t, append([]string{"tasks", "cancel", cancelled}, cpArgs...)...)
	wantOneLineError(t, r, 1, "is already cancelled")
	r = runAgent(t, append([]string{"tasks", "show", "t-nosuchtask", "--remote"}, cpArgs...)...)
	wantOneLineError(t, r, 1, "no task t-nosuchtask at")
}

// waitLocalPhase waits until the agent's task file shows the phase.
func waitLocalPhase(t *testing.T, dataDir, id string, want state.Phase) *state.Task {
	t.Helper()
	var task *state.Task
	testkit.WaitFor(t, "task "+id+" to be "+string(want)+" in the data directory", func() bool {
		var err error
		task, err = datadir.LoadTask(dataDir, id)
		return err == nil && task.Phase == want
	})
	return task
}
