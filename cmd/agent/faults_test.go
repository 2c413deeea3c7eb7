//go:build faults

package main

// The fault suite (make faults): real processes against real faults. Each
// test logs one "FAULT | scenario | figures" line, which scripts/faults.sh
// gathers into the table docs/faults.md shows.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

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

func agentHealth(t *testing.T, c *cp) api.AgentView {
	t.Helper()
	agents, err := c.client.Agents(context.Background())
	if err != nil || len(agents) != 1 {
		return api.AgentView{}
	}
	return agents[0]
}

// The data directory fills up while a task runs, then space returns: no
// report of the agent's own is lost (a side effect's attempt record is
// held in memory and written once space returns), what the task prints
// meanwhile is dropped and said (under the disk floor, output is not
// kept), no task runs twice, health goes degraded (disk_full) and back,
// nothing is claimed meanwhile, and no restart is needed.
func TestFaultDiskFull(t *testing.T) {
	disk := mountTmpfs(t, "8m")
	dataDir := filepath.Join(disk, "agent")
	c := startCP(t, freeAddr(t), t.TempDir())
	ag := startAgentProc(t, c, dataDir)
	defer ag.stop()
	gates := t.TempDir() // on another disk: the task's pace is the test's
	full, freed := filepath.Join(gates, "full"), filepath.Join(gates, "freed")
	first := submit(t, c, "@progress 3\n@wait-file "+full+"\n@progress 5\n@output written while the disk was full\n@side-effect wrote while the disk was full\n@wait-file "+freed+"\n@progress 2")
	c.waitPhase(t, first, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })

	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	must(t, os.WriteFile(full, nil, 0o600)) // the task reports while the disk is full
	testkit.WaitFor(t, "the agent to report disk_full with reports held", func() bool {
		a := agentHealth(t, c)
		return a.Health.Grade == "degraded" && strings.HasPrefix(a.Health.Reason, "disk_full") && a.Outbox.Held > 0
	})
	second := submit(t, c, "@output the second task")
	// Several heartbeats while the disk is full: the second task waits.
	beats := 0
	last := agentHealth(t, c).LastHeartbeat
	testkit.WaitFor(t, "three more heartbeats", func() bool {
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
	must(t, os.WriteFile(freed, nil, 0o600))
	v1, v2 := c.waitDone(t, first), c.waitDone(t, second)
	if v1.Phase != state.PhaseCompleted || len(v1.Attempts) != 1 || v2.Phase != state.PhaseCompleted {
		t.Fatalf("after space returned: first %s (%d attempts), second %s", v1.Phase, len(v1.Attempts), v2.Phase)
	}
	testkit.WaitFor(t, "health to come back and the outbox to drain", func() bool {
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
	logs := c.events(t, first)
	if hasOutput(logs, "written while the disk was full") || !hasOutput(logs, "line(s) of output (") {
		t.Errorf("the output written while the disk was full arrived (%v), or the line saying it was dropped did not (%v)",
			hasOutput(logs, "written while the disk was full"), hasOutput(logs, "line(s) of output ("))
	}
	if !v1.Attempts[0].Facts.SideEffect {
		t.Errorf("the side effect made while the disk was full is not on the attempt: %+v", v1.Attempts[0].Facts)
	}
	t.Logf("FAULT | disk full (8 MiB tmpfs filled mid-task, then freed) | %d reports held in memory at most seen, %d records delivered once, 0 dead, 1 attempt, the output printed while full dropped and said, no claim while full, no restart |", heldWhileFull, written)
}

func hasOutput(evs []api.StoredEvent, text string) bool {
	for _, e := range evs {
		if e.Kind == state.EventLog && strings.Contains(string(e.Payload), text) {
			return true
		}
	}
	return false
}

// faultProxy sits between the agent and the control plane and breaks some
// exchanges: a 502 before the server sees the request, a reset connection
// before it, an answer dropped after the server acted, and a slow answer.
type faultProxy struct {
	target  string
	mu      sync.Mutex
	n       int
	counts  map[string]int
	rnd     *rand.Rand
	breakOn func(path string) bool
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.n++
	fault := "pass"
	if p.breakOn(r.URL.Path) {
		switch x := p.rnd.IntN(100); {
		case x < 10:
			fault = "502"
		case x < 20:
			fault = "reset"
		case x < 30:
			fault = "dropped answer"
		case x < 35:
			fault = "slow"
		}
	}
	p.counts[fault]++
	p.mu.Unlock()
	hijackClose := func() {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}
	switch fault {
	case "502":
		http.Error(w, "bad gateway (injected)", http.StatusBadGateway)
		return
	case "reset":
		hijackClose()
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	switch fault {
	case "dropped answer":
		hijackClose() // the server acted; the agent never hears of it
		return
	case "slow":
		time.Sleep(2 * time.Second) // the fault: an answer that comes late
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// Through a proxy that breaks a third of the exchanges (claims, events,
// heartbeats alike), several chatty tasks all end, and every record is
// delivered exactly once in effect.
func TestFaultProxy(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	proxy := &faultProxy{target: c.url(), counts: map[string]int{}, rnd: rand.New(rand.NewPCG(1, 2)),
		breakOn: func(path string) bool { return strings.HasPrefix(path, "/v1/") }}
	hs := httptest.NewServer(proxy)
	defer hs.Close()
	dataDir := t.TempDir()
	ag := startProc(t, "agent", nil, "run", "--control-plane", hs.URL, "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "sample", "--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--max-concurrent", "3")
	defer ag.stop()
	var ids []string
	for i := range 6 {
		ids = append(ids, submit(t, c, fmt.Sprintf("Task %d\n@progress 20\n@sleep 1s\n@flood 300\n@progress 20\n@sleep 1s\n@output done %d", i, i)))
	}
	for _, id := range ids {
		if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
			t.Errorf("task %s ended %s (%s)", id, v.Phase, v.PhaseReason)
		}
	}
	testkit.WaitFor(t, "the outbox to drain", func() bool {
		s, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
		return err == nil && s.Stats.Pending == 0
	})
	snap, _ := outbox.Inspect(filepath.Join(dataDir, "outbox"))
	if snap.Stats.Dead != 0 {
		t.Errorf("%d records dead", snap.Stats.Dead)
		for _, it := range snap.Items {
			if it.State == outbox.StateDead {
				t.Logf("dead %d %s %s: %s", it.Seq, it.Kind, it.TaskID, it.Reason)
			}
		}
	}
	written := map[string]int{}
	for _, it := range snap.Items {
		written[it.TaskID]++
	}
	total := 0
	for _, id := range ids {
		evs := c.events(t, id) // fails on a key stored twice
		if len(evs) != written[id] {
			t.Errorf("task %s: %d records written, %d events held", id, written[id], len(evs))
		}
		total += len(evs)
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	t.Logf("FAULT | proxy breaking %d of %d exchanges (502 %d, reset %d, answer dropped after the server acted %d, slow 2 s %d), 6 chatty tasks | all 6 completed, %d events delivered once each, 0 dead |",
		proxy.n-proxy.counts["pass"], proxy.n, proxy.counts["502"], proxy.counts["reset"], proxy.counts["dropped answer"], proxy.counts["slow"], total)
}

// The agent killed with SIGKILL 100 times under load, each kill once the
// control plane has heard something new from it: nothing lost, nothing
// applied twice, every task ends.
func TestFaultAgentKilled100Times(t *testing.T) {
	t.Parallel()
	kills := 100
	if n, err := strconv.Atoi(os.Getenv("AGENT_FAULT_KILLS")); err == nil && n > 0 {
		kills = n
	}
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	var ids []string
	// Keep work coming: whenever fewer than 6 tasks are open, add some, so
	// every kill lands on a loaded agent.
	topUp := func() {
		open := 0
		for _, id := range ids {
			if v, err := c.client.Task(context.Background(), id); err == nil && !v.Phase.Terminal() {
				open++
			}
		}
		for ; open < 6; open++ {
			v, err := c.client.CreateTask(context.Background(), api.CreateTaskRequest{MaxAttempts: 4,
				Prompt: fmt.Sprintf("Task %d\n@progress 30\n@sleep 200ms\n@progress 30\n@output done", len(ids))})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, v.ID)
		}
	}
	count := func() int {
		n := 0
		for _, id := range ids {
			evs, err := c.client.TaskEvents(context.Background(), id)
			if err == nil {
				n += len(evs)
			}
		}
		return n
	}
	args := []string{"run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "sample", "--heartbeat-interval", "300ms", "--shutdown-grace", "2s", "--max-concurrent", "4"}
	for range kills {
		topUp()
		seen := count()
		ag := startProc(t, "agent", nil, args...)
		// Kill once the control plane heard something new, or the agent
		// heartbeated twice (its tasks may all wait out a retry's
		// backoff): drawn from progress, never from the clock.
		beats, last := 0, agentHealth(t, c).LastHeartbeat
		testkit.WaitFor(t, "the agent to deliver something or heartbeat", func() bool {
			if h := agentHealth(t, c).LastHeartbeat; h.After(last) {
				beats, last = beats+1, h
			}
			return count() > seen || beats >= 2
		})
		ag.kill()
	}
	ag := startProc(t, "agent", nil, args...)
	for _, id := range ids {
		if v := c.waitDone(t, id); !v.Phase.Terminal() {
			t.Errorf("task %s stuck in %s", id, v.Phase)
		}
	}
	testkit.WaitFor(t, "the outbox to drain", func() bool {
		s, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
		return err == nil && s.Stats.Pending == 0
	})
	ag.stop()
	snap, _ := outbox.Inspect(filepath.Join(dataDir, "outbox"))
	// A record is one event under its idempotency key: an attempt taken up
	// after a kill writes its keeper's last commit's reports again, under
	// their keys, and the control plane keeps each once.
	written, again := map[string]map[string]bool{}, 0
	for _, it := range snap.Items {
		if it.State == outbox.StateDead {
			t.Logf("a dead record: %s %s attempt %d: %s", it.Kind, it.Key, it.Attempt, it.Reason)
			continue
		}
		if written[it.TaskID] == nil {
			written[it.TaskID] = map[string]bool{}
		}
		if written[it.TaskID][it.Key] {
			again++
		}
		written[it.TaskID][it.Key] = true
	}
	phases := map[state.Phase]int{}
	total := 0
	for _, id := range ids {
		evs := c.events(t, id)
		if len(evs) != len(written[id]) {
			t.Errorf("task %s: %d records written under distinct keys, %d events held", id, len(written[id]), len(evs))
		}
		total += len(evs)
		phases[c.task(t, id).Phase]++
	}
	t.Logf("FAULT | agent SIGKILLed %d times under load (%d tasks, 4 at a time), each kill after new deliveries or two heartbeats | %d events delivered once each (%d records written again after a kill, kept once), %d dead, tasks ended %v |",
		kills, len(ids), total, again, snap.Stats.Dead, phases)
}

func allEnded(t *testing.T, c *cp, ids []string) bool {
	for _, id := range ids {
		v, err := c.client.Task(context.Background(), id)
		if err != nil || !v.Phase.Terminal() {
			return false
		}
	}
	return true
}
