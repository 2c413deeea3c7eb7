package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// TestE2EThreeOutcomes runs a control plane, an agent and the sample
// executor as processes, and checks the three outcomes at the control
// plane: success; a transient failure retried on the next model; a side
// effect before a transient failure, stopped by the gate.
func TestE2EThreeOutcomes(t *testing.T) { e2eThreeOutcomes(t) }

// TestE2EOnPostgres is TestE2EThreeOutcomes with the control plane on
// PostgreSQL (--store postgres://…).
func TestE2EOnPostgres(t *testing.T) { e2eThreeOutcomes(t, "--store", pgtest.Start(t)) }

// e2eThreeOutcomes runs the three outcomes on a control plane started with
// cpFlags (its store).
func e2eThreeOutcomes(t *testing.T, cpFlags ...string) {
	c := startCP(t, freeAddr(t), t.TempDir(), cpFlags...)
	dataDir := t.TempDir()
	ag := startAgentProc(t, c, dataDir)
	ok := submit(t, c, "Fix the flaky test")
	retried := submit(t, c, "Summarize\n@fail rate_limit")
	blocked := submit(t, c, "Rotate\n@side-effect rotated the key\n@fail network\n@no-session")

	v := c.waitDone(t, ok)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 || v.Result == nil || v.Result.Summary != "done: Fix the flaky test" {
		t.Errorf("success: %s, %d attempts, %+v", v.Phase, len(v.Attempts), v.Result)
	}
	v = c.waitDone(t, retried)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 {
		t.Fatalf("retry: %s with %d attempts", v.Phase, len(v.Attempts))
	}
	a1, a2 := v.Attempts[0], v.Attempts[1]
	if a1.Error == nil || a1.Error.Code != state.CodeRateLimit || a1.Retry == nil || a1.Retry.Decision != state.DecisionRetried ||
		a1.Retry.Gate != state.GateAllowed || a1.Model != "model-a" || a2.Model != "model-b" || a2.Status != state.AttemptCompleted {
		t.Errorf("retry attempts: %+v / %+v", a1, a2)
	}
	v = c.waitDone(t, blocked)
	if v.Phase != state.PhaseRecoverableFailed || len(v.Attempts) != 1 || v.Attempts[0].Retry.Gate != state.GateSideEffect ||
		!v.Attempts[0].Retry.TechnicallyRetryable || v.Attempts[0].Retry.Decision != state.DecisionStopped {
		t.Errorf("gate: %s %+v", v.Phase, v.Attempts)
	}
	for _, id := range []string{ok, retried, blocked} {
		evs := c.events(t, id)
		if last := evs[len(evs)-1]; last.Kind != state.EventComplete {
			t.Errorf("%s: last event is %s, want the completion", id, last.Kind)
		}
	}
	if code := ag.stop(); code != 0 {
		t.Errorf("agent exit %d on SIGTERM", code)
	}
	// What the agent kept locally agrees.
	r := runAgent(t, "tasks", "show", retried, "--data-dir", dataDir)
	if !strings.Contains(r.stdout, "-> retried in") || !strings.Contains(r.stdout, "[x] Done") {
		t.Errorf("tasks show:\n%s", r.stdout)
	}
	r = runAgent(t, "tasks", "logs", ok, "--data-dir", dataDir)
	if !strings.Contains(r.stdout, "I looked at the code and made the change.") {
		t.Errorf("tasks logs:\n%s", r.stdout)
	}
	r = runAgent(t, "health", "--data-dir", dataDir, "--json")
	var h datadir.HealthFile
	if json.Unmarshal([]byte(r.stdout), &h); h.Grade != "available" || h.ControlPlane != "reachable" {
		t.Errorf("health: %+v", r)
	}
}

func TestE2ECancelFromTheControlPlaneKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	startAgentProc(t, c, t.TempDir())
	id := submit(t, c, "@spawn-child\n@output started\n@hang")
	var pid int
	testkit.WaitFor(t, "the grandchild's pid in the task's events", func() bool {
		evs, _ := c.client.TaskEvents(context.Background(), id)
		for _, e := range evs {
			var l state.LogEvent
			if e.Kind == state.EventLog && json.Unmarshal(e.Payload, &l) == nil {
				for _, line := range l.Lines {
					if rest, ok := strings.CutPrefix(line, "grandchild pid "); ok {
						pid, _ = strconv.Atoi(rest)
					}
				}
			}
		}
		return pid > 0
	})
	if !processAlive(pid) {
		t.Fatalf("grandchild %d is not running before the cancel", pid)
	}
	if _, err := c.client.CancelTask(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCancelled || v.Attempts[0].Status != state.AttemptCancelled {
		t.Errorf("after cancel: %s %+v", v.Phase, v.Attempts[0])
	}
	testkit.WaitFor(t, "the grandchild to die", func() bool { return !processAlive(pid) })
}

// TestE2EControlPlaneDownAndBack stops the control plane while a task runs:
// the task finishes, its records wait in the outbox, and once the control
// plane is back every one is delivered, none applied twice.
func TestE2EControlPlaneDownAndBack(t *testing.T) {
	t.Parallel()
	addr, cpDir, dataDir := freeAddr(t), t.TempDir(), t.TempDir()
	c := startCP(t, addr, cpDir)
	startAgentProc(t, c, dataDir)
	gate := filepath.Join(t.TempDir(), "go-on")
	id := submit(t, c, "@progress 2\n@wait-file "+gate+"\n@progress 3\n@output done")
	c.waitPhase(t, id, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
	c.kill()
	must(t, os.WriteFile(gate, nil, 0o600)) // the task goes on only now, with the control plane down

	testkit.WaitFor(t, "the task to end on the agent", func() bool {
		task, err := datadir.LoadTask(dataDir, id)
		return err == nil && task.Phase.Terminal()
	})
	snap, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
	if err != nil || snap.Stats.Pending == 0 {
		t.Fatalf("no records waiting while the control plane is down: %v %+v", err, snap)
	}
	// Wait for the agent to have tried and failed, rather than for a while.
	testkit.WaitFor(t, "a failed delivery to be recorded", func() bool {
		s, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
		if err != nil {
			return false
		}
		for _, it := range s.Items {
			if it.TaskID == id && it.Tries > 0 {
				return true
			}
		}
		return false
	})

	c = startCP(t, addr, cpDir)
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
		t.Errorf("after the outage: %s, %d attempts", v.Phase, len(v.Attempts))
	}
	testkit.WaitFor(t, "the outbox to drain", func() bool {
		s, err := outbox.Inspect(filepath.Join(dataDir, "outbox"))
		return err == nil && s.Stats.Pending == 0
	})
	snap, _ = outbox.Inspect(filepath.Join(dataDir, "outbox"))
	written, tried := 0, 0
	for _, it := range snap.Items {
		if it.TaskID == id {
			written++
			tried = max(tried, it.Tries)
		}
	}
	if evs := c.events(t, id); len(evs) != written {
		t.Errorf("the agent wrote %d records for the task, the control plane holds %d events", written, len(evs))
	}
	if tried == 0 {
		t.Errorf("no failed delivery was recorded: the outage was not exercised")
	}
}

// TestE2EAgentKilledMidTaskAndRestarted SIGKILLs the agent during an
// attempt, with attempts that do not outlive it (--reattach-grace 0). At the next start the orphaned attempt is finalized as
// agent_restart, the gate allows a new attempt (nothing was done), and the
// task completes; nothing stays in a running phase.
func TestE2EAgentKilledMidTaskAndRestarted(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	ag := startAgentProc(t, c, dataDir, "--reattach-grace", "0")
	gate := filepath.Join(t.TempDir(), "go-on")
	id := submit(t, c, "@wait-file "+gate+"\n@output done")
	c.waitPhase(t, id, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
	ag.kill()

	startAgentProc(t, c, dataDir, "--reattach-grace", "0")
	must(t, os.WriteFile(gate, nil, 0o600)) // the second attempt may finish
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 {
		t.Fatalf("after the restart: %s with %d attempts", v.Phase, len(v.Attempts))
	}
	a1 := v.Attempts[0]
	if a1.Error == nil || a1.Error.Code != state.CodeAgentRestart || a1.Retry.Decision != state.DecisionRetried {
		t.Errorf("orphaned attempt %+v %+v", a1.Error, a1.Retry)
	}
	c.events(t, id)
	tasks, err := datadir.LoadTasks(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.Phase.Running() {
			t.Errorf("task %s is stuck %s", task.ID, task.Phase)
		}
	}
}

// TestE2EAgentKilledAfterASideEffectContinuesTheSession SIGKILLs the agent
// (--reattach-grace 0) after its attempt had a side effect: a replay would do it again, so the
// next start continues the attempt's session instead (the sample keeps
// one), which skips what was done, and the task completes. stop, on a
// second such task, says which task will continue.
func TestE2EAgentKilledAfterASideEffectContinuesTheSession(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	ag := startAgentProc(t, c, dataDir, "--reattach-grace", "0")
	gate := filepath.Join(t.TempDir(), "go-on")
	id := submit(t, c, "release\n@side-effect tagged v1.2.3\n@wait-file "+gate+"\n@output released")
	testkit.WaitFor(t, "the side effect to be recorded", func() bool {
		v := c.task(t, id)
		return len(v.Attempts) == 1 && v.Attempts[0].Facts.SideEffect && v.Attempts[0].SessionPath != ""
	})
	ag.kill()

	startAgentProc(t, c, dataDir, "--reattach-grace", "0")
	must(t, os.WriteFile(gate, nil, 0o600))
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 {
		t.Fatalf("after the restart: %s with %d attempts", v.Phase, len(v.Attempts))
	}
	a1, a2 := v.Attempts[0], v.Attempts[1]
	if a1.Error == nil || a1.Error.Code != state.CodeAgentRestart || a1.Retry.Decision != state.DecisionContinued || a1.Retry.Gate != state.GateSideEffect {
		t.Errorf("orphaned attempt %+v %+v", a1.Error, a1.Retry)
	}
	if a2.Continues != 1 || a2.SessionID != a1.SessionID {
		t.Errorf("attempt 2 continues %d, session %s; want attempt 1's session %s", a2.Continues, a2.SessionID, a1.SessionID)
	}
	effects := 0
	for _, ev := range c.events(t, id) {
		if ev.Kind == state.EventLog && strings.Contains(string(ev.Payload), "tagged v1.2.3") {
			effects++
		}
	}
	if effects != 1 {
		t.Errorf("the side effect was reported %d times; the continue repeated it", effects)
	}
}

// TestE2EStopSaysWhichTasksWillContinue stops the agent (agent stop,
// --reattach-grace 0) under a task that had a side effect: stop says the task will continue its
// session, and the next start does.
func TestE2EStopSaysWhichTasksWillContinue(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--reattach-grace", "0")
	gate := filepath.Join(t.TempDir(), "go-on")
	id := submit(t, c, "@side-effect opened a pull request\n@wait-file "+gate)
	testkit.WaitFor(t, "the side effect to be recorded", func() bool {
		v := c.task(t, id)
		return len(v.Attempts) == 1 && v.Attempts[0].Facts.SideEffect
	})
	r := runAgent(t, "stop", "--data-dir", dataDir)
	if r.code != 0 || !strings.Contains(r.stdout, "task "+id+" will continue attempt 1's session (attempt 2) when the agent starts again") {
		t.Fatalf("stop: %+v", r)
	}
	must(t, os.WriteFile(gate, nil, 0o600))
	startAgentProc(t, c, dataDir, "--reattach-grace", "0")
	if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 || v.Attempts[1].Continues != 1 {
		t.Fatalf("after the restart: %s, attempts %+v", v.Phase, v.Attempts)
	}
}

// TestE2ELateCompletionIsRejectedAndDead lets the control plane's watchdog
// time a task out while the agent, cut off from it, is still running it
// (an agent that hears of the timeout ends the task timed_out at once):
// the agent's late completion is rejected as terminal and shows as dead
// in the outbox.
func TestE2ELateCompletionIsRejectedAndDead(t *testing.T) {
	t.Parallel()
	// A stall limit of seconds: the watchdog must time the task out only
	// once the agent is cut off, not while a loaded machine starts its
	// turn (with 1 s it fired before the turn started).
	c := startCP(t, freeAddr(t), t.TempDir(), "--stall-limit", "5s")
	target, err := url.Parse(c.url())
	must(t, err)
	p := newHoldProxy(target, func(path string) bool { return strings.HasPrefix(path, "/v1/") })
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	dataDir := t.TempDir()
	startProc(t, "agent", nil, "run", "--control-plane", hs.URL, "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "sample", "--heartbeat-interval", "300ms", "--shutdown-grace", "2s")
	gate := filepath.Join(t.TempDir(), "go-on")
	id := submit(t, c, "@wait-file "+gate+"\n@output too late")
	c.waitPhase(t, id, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
	p.hold.Store(true) // the agent is cut off
	v := c.waitPhase(t, id, "timed out by the watchdog", terminal)
	if v.Phase != state.PhaseTimedOut {
		t.Fatalf("phase %s", v.Phase)
	}
	must(t, os.WriteFile(gate, nil, 0o600)) // only now does the agent finish, too late
	waitLocalPhase(t, dataDir, id, state.PhaseCompleted)
	p.hold.Store(false)
	var dead []outbox.Item
	testkit.WaitFor(t, "the late completion to be marked dead", func() bool {
		r := runAgent(t, "outbox", "ls", "--dead", "--json", "--data-dir", dataDir)
		dead = nil
		json.Unmarshal([]byte(r.stdout), &dead)
		for _, it := range dead {
			if it.Kind == outbox.KindComplete && it.Reason == "terminal" {
				return true
			}
		}
		return false
	})
	if v := c.task(t, id); v.Phase != state.PhaseTimedOut || v.Result != nil {
		t.Errorf("the late completion changed the task: %s %+v", v.Phase, v.Result)
	}
}

func TestE2EWrongTokenIsOneClearLine(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	bad := filepath.Join(t.TempDir(), "token")
	os.WriteFile(bad, []byte("tok-wrong-7781-0123456789abcdef0123"), 0o600)

	r := runAgent(t, "submit", "--control-plane", c.url(), "--token-file", bad, "--prompt", "x")
	wantOneLineError(t, r, 1, "401")
	ag := startProc(t, "agent", nil, "run", "--control-plane", c.url(), "--token-file", bad, "--data-dir", t.TempDir(), "--executor", "sample")
	if code := ag.wait(); code != 1 {
		t.Errorf("agent with a wrong token exited %d", code)
	}
	out := ag.output()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "agent: ") || !strings.Contains(last, "401") {
		t.Errorf("last line %q", last)
	}
	if strings.Contains(out, "tok-wrong-7781") || strings.Contains(r.stderr, "tok-wrong-7781") {
		t.Error("the token appears in the output")
	}
}

func TestE2ESecondAgentOnTheSameDataDirIsRefused(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	testkit.WaitFor(t, "the first agent to take the lock", func() bool {
		_, err := os.Stat(filepath.Join(dataDir, "health.json"))
		return err == nil
	})
	r := runAgent(t, "run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir, "--executor", "sample")
	wantOneLineError(t, r, 1, filepath.Join(dataDir, "outbox", "lock"))
}

// TestE2EDemo runs the demo once, in a time zone other than UTC, and
// checks what it says and what it stores. (It holds what was
// TestStoredTimesAreUTC, which ran the same demo a second time to read
// its times.)
func TestE2EDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runAgentEnv(t, []string{"TZ=Asia/Tokyo"}, "demo", "--data-dir", dir)
	if r.code != 0 {
		t.Fatalf("demo: %+v", r)
	}
	for _, want := range []string{"-> retried in", "-> continued in", "continued attempt 1's session after", "continued by a person", "Attempt 2/3  completed", "0 pending, 0 dead",
		// Subtasks: a task launched two and reports their timelines.
		"its subtasks, as agent subtask wait reported them:", "completed  Collect the merged changes", "(a subtask of t-"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	if ls := runAgent(t, "tasks", "ls", "--data-dir", filepath.Join(dir, "agent")); strings.Count(ls.stdout, "\n") != 8 {
		t.Errorf("tasks ls after the demo:\n%s", ls.stdout)
	}
	// It runs with the split credentials and says where each is, never
	// what it is.
	for _, file := range []string{"controlplane/operator-token", "controlplane/token", "agent/agent-token"} {
		if !strings.Contains(r.stdout, file) {
			t.Errorf("the demo does not say where %s is:\n%s", file, r.stdout)
		}
		tok, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || len(strings.TrimSpace(string(tok))) < 32 {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if strings.Contains(r.stdout+r.stderr, strings.TrimSpace(string(tok))) {
			t.Errorf("the demo printed the token in %s", file)
		}
	}
	// Whatever the machine's time zone, what is stored and logged as
	// JSON is in UTC; what is printed for people is local.
	t.Run("StoredTimesAreUTC", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(dir, "agent", "tasks", "*.json"))
		files = append(files, filepath.Join(dir, "demo.log"), filepath.Join(dir, "agent", "health.json"))
		stamp := regexp.MustCompile(`"(?:time|[a-z_]*_at|since|at)": ?"(\d{4}-\d\d-\d\dT[^"]+)"`)
		seen := 0
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range stamp.FindAllStringSubmatch(string(b), -1) {
				seen++
				if !strings.HasSuffix(m[1], "Z") {
					t.Errorf("%s: %s is not in UTC", filepath.Base(f), m[0])
					break
				}
			}
		}
		if seen < 10 {
			t.Fatalf("only %d times found in %v", seen, files)
		}
		show := runAgentEnv(t, []string{"TZ=Asia/Tokyo"}, "tasks", "ls", "--json", "--data-dir", filepath.Join(dir, "agent"))
		if show.code != 0 || !strings.Contains(show.stdout, "Z\"") || strings.Contains(show.stdout, "+09:00") {
			t.Errorf("tasks ls --json is not in UTC: %s", tail(show.stdout, 500))
		}
	})
}

// TestE2EOutboxReplayByHand leaves records pending (the control plane went
// away and the agent was stopped), then delivers them with
// `agent outbox replay`.
func TestE2EOutboxReplayByHand(t *testing.T) {
	t.Parallel()
	addr, cpDir, dataDir := freeAddr(t), t.TempDir(), t.TempDir()
	c := startCP(t, addr, cpDir)
	ag := startAgentProc(t, c, dataDir)
	gate := filepath.Join(t.TempDir(), "go-on")
	id := submit(t, c, "@wait-file "+gate+"\n@output done")
	c.waitPhase(t, id, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
	c.kill()
	must(t, os.WriteFile(gate, nil, 0o600))
	testkit.WaitFor(t, "the task to end on the agent", func() bool {
		task, err := datadir.LoadTask(dataDir, id)
		return err == nil && task.Phase.Terminal()
	})
	if code := ag.stop(); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	snap, _ := outbox.Inspect(filepath.Join(dataDir, "outbox"))
	pending := snap.Stats.Pending
	if pending == 0 {
		t.Fatal("nothing pending: the scenario did not happen")
	}

	// A copy of the data directory, to deliver the same records twice.
	again := filepath.Join(t.TempDir(), "again")
	if out, err := exec.Command("cp", "-a", dataDir, again).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}

	// With the control plane still down, the replay says what it did
	// (nothing) and fails in one line.
	r := runAgent(t, "outbox", "replay", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", again)
	want := fmt.Sprintf("0 delivered (0 new to the control plane, 0 it had already), 0 dead, %d still pending", pending)
	if r.code != 1 || strings.TrimSpace(r.stdout) != want || !strings.Contains(r.stderr, fmt.Sprintf("replay stopped with %d records still pending", pending)) {
		t.Fatalf("replay with the control plane down: %+v", r)
	}

	c = startCP(t, addr, cpDir)
	r = runAgent(t, "outbox", "replay", "--json", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir)
	// The control plane was SIGKILLed while the agent was sending: a
	// batch it stored, its answer lost, comes back as duplicates.
	var res agent.ReplayResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 ||
		res.Sent != pending || res.Accepted+res.Duplicate != pending || res.Dead != 0 || res.Pending != 0 {
		t.Fatalf("replay of %d records: %+v %+v", pending, res, r)
	}
	if v := c.task(t, id); v.Phase != state.PhaseCompleted {
		t.Errorf("after the replay the control plane shows %s", v.Phase)
	}
	// The same records again: delivered, but nothing new to the control
	// plane, and the report says so.
	r = runAgent(t, "outbox", "replay", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", again)
	want = fmt.Sprintf("%d delivered (0 new to the control plane, %d it had already), 0 dead, 0 still pending", pending, pending)
	if r.code != 0 || strings.TrimSpace(r.stdout) != want {
		t.Fatalf("replay of records the control plane had: %+v, want %q", r, want)
	}
}

// A stopped agent says so in a last heartbeat: the control plane shows it
// offline at once, and the stop logs no warning.
func TestE2EStopSaysOffline(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	ag := startAgentProc(t, c, t.TempDir())
	id := submit(t, c, "@output hi")
	c.waitDone(t, id)
	testkit.WaitFor(t, "the agent to be online", func() bool {
		agents, err := c.client.Agents(context.Background())
		return err == nil && len(agents) == 1 && agents[0].Online
	})
	if code := ag.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	agents, err := c.client.Agents(context.Background())
	if err != nil || len(agents) != 1 || agents[0].Online || agents[0].State != "offline" {
		t.Fatalf("after the stop the control plane shows %+v (%v)", agents, err)
	}
	if out := ag.output(); strings.Contains(out, `"level":"WARN"`) {
		t.Errorf("a clean stop logged a warning:\n%s", out)
	}
}
