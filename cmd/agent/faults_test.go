//go:build faults

package main

// The fault suite (make faults): real processes against real faults. Each
// test logs one "FAULT | scenario | figures" line, which scripts/faults.sh
// gathers into the table the README shows.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
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

// fill writes to path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

func agentHealth(t *testing.T, c *cp) controlplane.AgentView {
	t.Helper()
	agents, err := c.client.Agents(context.Background())
	if err != nil || len(agents) != 1 {
		return controlplane.AgentView{}
	}
	return agents[0]
}

// The data directory fills up while a task runs, then space returns: no
// report is lost, no task runs twice, health goes degraded (disk_full) and
// back, nothing is claimed meanwhile, and no restart is needed.
func TestFaultDiskFull(t *testing.T) {
	disk := mountTmpfs(t, "8m")
	dataDir := filepath.Join(disk, "agent")
	c := startCP(t, freeAddr(t), t.TempDir())
	ag := startAgentProc(t, c, dataDir)
	defer ag.stop()
	first := submit(t, c, "@progress 3\n@sleep 3s\n@progress 5\n@output written while the disk was full\n@sleep 1s\n@progress 2")
	c.waitPhase(t, first, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })

	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	waitFor(t, 60*time.Second, "the agent to report disk_full", func() bool {
		h := agentHealth(t, c).Health
		return h.Grade == "degraded" && strings.HasPrefix(h.Reason, "disk_full")
	})
	second := submit(t, c, "@output the second task")
	// Several heartbeats while the disk is full: the second task waits.
	beats := 0
	last := agentHealth(t, c).LastHeartbeat
	waitFor(t, 60*time.Second, "three more heartbeats", func() bool {
		if h := agentHealth(t, c).LastHeartbeat; h.After(last) {
			beats++
			last = h
		}
		return beats >= 3
	})
	if v := c.task(t, second); v.Phase != state.PhaseQueued {
		t.Fatalf("a task was claimed while the disk was full: %s", v.Phase)
	}
	heldWhileFull := agentHealth(t, c).Outbox.Held

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	v1, v2 := c.waitDone(t, first), c.waitDone(t, second)
	if v1.Phase != state.PhaseCompleted || len(v1.Attempts) != 1 || v2.Phase != state.PhaseCompleted {
		t.Fatalf("after space returned: first %s (%d attempts), second %s", v1.Phase, len(v1.Attempts), v2.Phase)
	}
	waitFor(t, 60*time.Second, "health to come back and the outbox to drain", func() bool {
		a := agentHealth(t, c)
		s, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
		return a.Health.Grade == "available" && a.Outbox.WriteFailing == "" && err == nil && s.Stats.Pending == 0
	})
	snap, _ := outbox.Inspect(filepath.Join(dataDir, "outbox"))
	written := 0
	for _, it := range snap.Items {
		if it.TaskID == first {
			written++
		}
	}
	if evs := c.events(t, first); len(evs) != written || snap.Stats.Dead != 0 {
		t.Fatalf("the agent wrote %d records, the control plane holds %d events, %d dead", written, len(evs), snap.Stats.Dead)
	}
	if logs := c.events(t, first); !hasOutput(logs, "written while the disk was full") {
		t.Errorf("the output written while the disk was full did not arrive")
	}
	t.Logf("FAULT | disk full (8 MiB tmpfs filled mid-task, then freed) | %d reports held in memory at most seen, %d records delivered once, 0 dead, 1 attempt, no claim while full, no restart |", heldWhileFull, written)
}

func hasOutput(evs []controlplane.StoredEvent, text string) bool {
	for _, e := range evs {
		if e.Kind == state.EventLog && strings.Contains(string(e.Payload), text) {
			return true
		}
	}
	return false
}
