package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// A real agent runs a task that floods its output against a control plane
// started with --max-attempt-output 64KiB: the task completes, every
// record the agent sent is accepted (none dead, none pending), the control
// plane's file holds the attempt's output up to the cap and one mark, and
// the task says how much was cut. The lists it is read with come in pages.
func TestE2EControlPlaneCapsAnAttemptsOutput(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	addr, cpDir, dataDir := freeAddr(t), t.TempDir(), t.TempDir()
	c := startCP(t, addr, cpDir, "--max-attempt-output", "64KiB")
	startAgentProc(t, c, dataDir)
	const flood = 20000 // 40 bytes a line: 800 KB
	id := submit(t, c, "flood\n@flood 20000")
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted {
		t.Fatalf("phase %s (%s)", v.Phase, v.PhaseReason)
	}
	testkit.WaitFor(t, "the outbox to drain", func() bool {
		s, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
		return err == nil && s.Stats.Pending == 0
	})
	if s, _ := outbox.Inspect(filepath.Join(dataDir, "outbox")); s.Stats.Dead != 0 {
		t.Errorf("%d dead records: the cut events must be accepted", s.Stats.Dead)
	}

	var kept, marks int
	var logBytes int64
	f, err := os.Open(filepath.Join(cpDir, "events", id+".jsonl"))
	must(t, err)
	defer f.Close()
	r := bufio.NewReaderSize(f, 4<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break
		}
		var e api.StoredEvent
		must(t, json.Unmarshal(line, &e))
		if e.Kind != state.EventLog {
			continue
		}
		logBytes += int64(len(line))
		var p api.LogPayload
		must(t, json.Unmarshal(e.Payload, &p))
		if p.Cut != nil {
			marks++
		}
		for _, l := range p.Lines {
			if strings.HasPrefix(l, "flood line ") {
				kept++
			}
		}
	}
	t.Logf("stored %d of %d flood lines in %d bytes of log events; the task says %d lines, %d bytes cut", kept, flood, logBytes, v.OutputCutLines, v.OutputCutBytes)
	if logBytes > limit+2<<10 || marks != 1 {
		t.Errorf("the attempt's log events take %d bytes with %d marks; the cap is %d and one mark", logBytes, marks, limit)
	}
	if kept == 0 || v.OutputCutLines < int64(flood-kept) || v.OutputCutBytes < v.OutputCutLines*30 {
		t.Errorf("kept %d flood lines, the task says %d lines (%d bytes) cut; %d were sent", kept, v.OutputCutLines, v.OutputCutBytes, flood)
	}

	// The people's tools read the lists in pages: a page of two tasks
	// names the next, and tasks ls --remote shows them all.
	var more []string
	for range 3 {
		more = append(more, submit(t, c, "@output more"))
	}
	page, next, err := c.client.TasksPage(t.Context(), "", 2)
	if err != nil || len(page) != 2 || next != page[1].ID {
		t.Fatalf("a page of 2: %d tasks, next %q, %v", len(page), next, err)
	}
	res := runAgent(t, "tasks", "ls", "--remote", "--json", "--control-plane", c.url(), "--token-file", c.operatorFile)
	var all []json.RawMessage
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &all) != nil || len(all) != 4 {
		t.Errorf("tasks ls --remote --json: %d tasks, exit %d: %s", len(all), res.code, res.stderr)
	}
	// Narrowed by the control plane: what has not ended (nothing, once
	// all are done), the completed ones (at most two), a repository none
	// is on; a phase that is not one, in one line.
	for _, id := range more {
		c.waitDone(t, id)
	}
	cpArgs := []string{"--remote", "--json", "--control-plane", c.url(), "--token-file", c.operatorFile}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--live"}, 0},
		{[]string{"--phase", "completed", "--limit", "2"}, 2},
		{[]string{"--phase", "completed", "--repo", "nope"}, 0},
	} {
		res := runAgent(t, append(append([]string{"tasks", "ls"}, tc.args...), cpArgs...)...)
		var got []api.TaskView
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &got) != nil || len(got) != tc.want {
			t.Errorf("tasks ls %v: %d tasks, exit %d, want %d: %s", tc.args, len(got), res.code, tc.want, res.stderr)
		}
		for _, v := range got {
			if v.Phase != state.PhaseCompleted {
				t.Errorf("tasks ls %v listed %s, %s", tc.args, v.ID, v.Phase)
			}
		}
	}
	if res := runAgent(t, append([]string{"tasks", "ls", "--phase", "donezo"}, cpArgs...)...); res.code == 0 || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 || !strings.Contains(res.stderr, "--phase") {
		t.Errorf("tasks ls --phase donezo: exit %d: %q", res.code, res.stderr)
	}
}
