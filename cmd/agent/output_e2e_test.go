package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory: a disk that
// can really fill up. It needs root, as CI and the project's machines have.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small-disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs for the full-disk fault (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// A task prints 30 MB, more than its attempt's cap (6 MiB, the control
// plane's, which its heartbeat answer tells the agent, under the agent's
// own --max-attempt-output, 16 MiB here),
// on a 24 MiB data volume, while the control plane is up. The outbox takes
// no more than the cap of it; the task completes; the control plane holds its output up
// to the cap, the cut marked once, and every line printed is either
// stored or counted as cut; the agent keeps claiming (a second task
// completes); every record the agent wrote is delivered once, none dead.
// Both with the attempt's output spooled (it outlives the agent) and
// piped (--reattach-grace 0).
func TestE2EATasksOutputCannotStarveTheAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to mount a 24 MiB tmpfs as the agent's data volume")
	}
	// Through the spool (attempts that outlive the agent, the default) and
	// straight through a pipe (--reattach-grace 0).
	for _, path := range []struct {
		name string
		args []string
	}{{"spooled", nil}, {"piped", []string{"--reattach-grace", "0"}}} {
		t.Run(path.name, func(t *testing.T) {
			const lines, width = 300_000, 100 // 30 MB
			disk := mountTmpfs(t, "24m")
			dataDir := filepath.Join(disk, "agent")
			const limit = 6 << 20
			c := startCP(t, freeAddr(t), t.TempDir(), "--max-attempt-output", "6MiB")
			script := filepath.Join(t.TempDir(), "task.sh")
			writeFile(t, script, fmt.Sprintf(`#!/bin/sh
read -r task
case "$task" in
*flood*) awk 'BEGIN { for (i = 0; i < %d; i++) printf "%%07d %%0%dd\n", i, 0 }' ;;
*) echo small ;;
esac
echo '{"type":"result","summary":"printed"}'
`, lines, width-9))
			must(t, os.Chmod(script, 0o700))
			a := startProc(t, "agent", nil, append([]string{"run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
				"--executor", "exec", "--executor-command", script, "--heartbeat-interval", "300ms", "--max-attempt-output", "16MiB"}, path.args...)...)
			defer a.stop()

			// The outbox file and the free space, watched while the task floods.
			var mostOutbox, leastFree int64 = 0, 1 << 62
			watched, stopWatch := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(watched)
				for {
					if info, err := os.Stat(filepath.Join(dataDir, "outbox", outbox.FileName)); err == nil {
						mostOutbox = max(mostOutbox, info.Size())
					}
					if free := durable.FreeBytes(disk); free >= 0 {
						leastFree = min(leastFree, free)
					}
					select {
					case <-stopWatch:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			flood := submit(t, c, "flood")
			v := c.waitDone(t, flood)
			close(stopWatch)
			<-watched
			if v.Phase != state.PhaseCompleted {
				t.Fatalf("the flooding task ended %s (%s):\n%s", v.Phase, v.PhaseReason, tail(a.output(), 3000))
			}
			second := submit(t, c, "second")
			if v := c.waitDone(t, second); v.Phase != state.PhaseCompleted {
				t.Fatalf("the second task ended %s (%s)", v.Phase, v.PhaseReason)
			}
			testkit.WaitFor(t, "the outbox to drain", func() bool {
				s, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
				return err == nil && s.Stats.Pending == 0
			})

			// The outbox took the cap's worth, not the flood: the disk kept room.
			// Piped, the flood outruns delivery and the outbox fills to the
			// cap; spooled, it comes at the pace of the spool's window,
			// which delivery may keep up with: the file then stays under.
			if mostOutbox > limit+1<<20 || path.args != nil && mostOutbox < limit-1<<20 || leastFree < 8<<20 {
				t.Errorf("while the task flooded, the outbox file reached %d bytes (the cap is %d) and the 24 MiB volume had %d bytes free at least", mostOutbox, limit, leastFree)
			}
			if out := a.output(); strings.Contains(out, "no space left") || strings.Contains(out, "nearly full") {
				t.Errorf("the agent ran short of space:\n%s", tail(out, 2000))
			}

			// The control plane: up to the cap stored, one mark, the rest counted.
			var stored, storedBytes, marks int64
			for _, e := range c.events(t, flood) { // fails on an event stored twice
				if e.Kind != state.EventLog {
					continue
				}
				var p api.LogPayload
				must(t, json.Unmarshal(e.Payload, &p))
				storedBytes += int64(len(e.Payload))
				l := p.Lines
				if p.Cut != nil {
					marks++
					l = l[:len(l)-1] // the mark's line
				}
				for _, line := range l {
					if !strings.HasPrefix(line, "[agent]") {
						stored++
					}
				}
			}
			v = c.task(t, flood)
			t.Logf("FIGURES stored %d lines (%d bytes), %d marks, cut %d lines; outbox at most %d bytes, free at least %d", stored, storedBytes, marks, v.OutputCutLines, mostOutbox, leastFree)
			if marks != 1 || stored+v.OutputCutLines != lines || v.OutputCutLines == 0 {
				t.Errorf("the control plane holds %d lines, %d marks, and counts %d cut: %d printed", stored, marks, v.OutputCutLines, lines)
			}
			if storedBytes < limit-1<<20 || storedBytes > limit+1<<20 {
				t.Errorf("the control plane stores %d bytes of the flood's output, want about its cap, %d", storedBytes, limit)
			}

			// Nothing lost: the lines add up above; the records written were
			// all delivered, none refused.
			snap, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
			must(t, err)
			if snap.Stats.Dead != 0 || snap.Stats.Pending != 0 {
				t.Errorf("%d records dead, %d pending", snap.Stats.Dead, snap.Stats.Pending)
			}
			if v.Result == nil || v.Result.Summary != "printed" {
				t.Errorf("the flooding task's completion: %+v", v.Result)
			}
		})
	}
}

// The data volume nearly full, by something else than the agent (less
// free than the floor the agent keeps for its own records): a task's
// output and progress are not kept, its phases, attempt and completion
// are, after one line saying how much output was dropped; the agent goes
// on claiming. Space back, the next task's output is kept again.
func TestE2EANearlyFullDiskKeepsRoomForTheAgentsOwnRecords(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to mount a 24 MiB tmpfs as the agent's data volume")
	}
	const lines = 1000
	disk := mountTmpfs(t, "24m")
	dataDir := filepath.Join(disk, "agent")
	c := startCP(t, freeAddr(t), t.TempDir())
	script := filepath.Join(t.TempDir(), "task.sh")
	writeFile(t, script, fmt.Sprintf(`#!/bin/sh
read -r task
echo '{"type":"progress","message":"starting to print"}'
awk 'BEGIN { for (i = 0; i < %d; i++) printf "printed line %%d\n", i }'
echo '{"type":"result","summary":"printed"}'
`, lines))
	must(t, os.Chmod(script, 0o700))
	a := startProc(t, "agent", nil, "run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "exec", "--executor-command", script, "--heartbeat-interval", "300ms")
	defer a.stop()
	testkit.WaitFor(t, "the agent to register", func() bool { return agentIDOf(dataDir) != "" })

	// Fill the volume but 1 MiB: under the 2 MiB floor of 24 MiB.
	filler := filepath.Join(disk, "filler")
	f, err := os.Create(filler)
	must(t, err)
	chunk := make([]byte, 64<<10)
	for durable.FreeBytes(disk) > 1<<20+int64(len(chunk)) {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	must(t, f.Close())

	logsOf := func(id string) (printed int, notes []string) {
		for _, e := range c.events(t, id) {
			if e.Kind != state.EventLog {
				continue
			}
			var p api.LogPayload
			must(t, json.Unmarshal(e.Payload, &p))
			for _, l := range p.Lines {
				switch {
				case strings.HasPrefix(l, "printed line "):
					printed++
				case strings.HasPrefix(l, "[agent]"):
					notes = append(notes, l)
				}
			}
		}
		return printed, notes
	}
	first := submit(t, c, "print while the disk is nearly full")
	v := c.waitDone(t, first)
	if v.Phase != state.PhaseCompleted || v.Result == nil || v.Result.Summary != "printed" || len(v.Attempts) != 1 {
		t.Fatalf("the task under the floor: %s (%s), result %+v", v.Phase, v.PhaseReason, v.Result)
	}
	printed, notes := logsOf(first)
	if printed != 0 || len(notes) != 1 || !strings.Contains(notes[0], fmt.Sprintf("%d line(s) of output", lines)) || !strings.Contains(notes[0], "nearly full") {
		t.Errorf("under the floor the control plane got %d printed lines and the notes %q, want none and one saying %d were dropped", printed, notes, lines)
	}
	if v.Progress.Message == "starting to print" {
		t.Errorf("a progress record was kept under the floor")
	}
	if !strings.Contains(a.output(), "the data directory's disk is nearly full") {
		t.Errorf("the agent did not say its disk is nearly full:\n%s", tail(a.output(), 2000))
	}

	must(t, os.Remove(filler))
	second := submit(t, c, "print with room")
	if v := c.waitDone(t, second); v.Phase != state.PhaseCompleted || v.Progress.Message != "starting to print" {
		t.Fatalf("the task with room: %s (%s), progress %+v", v.Phase, v.PhaseReason, v.Progress)
	}
	if printed, notes := logsOf(second); printed != lines || len(notes) != 0 {
		t.Errorf("with room again the control plane got %d of %d printed lines, notes %q", printed, lines, notes)
	}
}

// agentIDOf is the id an agent registered with, "" before it has.
func agentIDOf(dataDir string) string {
	if _, err := os.Stat(filepath.Join(dataDir, "agent-token")); err != nil {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(dataDir, "agent-id"))
	return strings.TrimSpace(string(b))
}
