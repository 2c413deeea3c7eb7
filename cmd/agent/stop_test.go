package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// lockedBuffer is an io.Writer a running command writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// agent stop drains (attempts that do not outlive the agent,
// --reattach-grace 0): the running task may finish while the agent claims
// nothing, says each second what it waits for, and tells the control plane
// it is draining, then offline; both commands exit 0 and nothing warns.
func TestStopDrainsARunningTask(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	ag := startAgentProc(t, c, dataDir, "--drain-timeout", "10m", "--reattach-grace", "0")
	gate := filepath.Join(t.TempDir(), "go-on")
	id := submit(t, c, "@wait-file "+gate+"\n@output done")
	c.waitPhase(t, id, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })

	var out lockedBuffer
	stop := agentCmd(context.Background(), nil, "stop", "--data-dir", dataDir)
	stop.Stdout, stop.Stderr = &out, &out
	must(t, stop.Start())
	stopped := make(chan error, 1)
	go func() { stopped <- stop.Wait() }()

	testkit.WaitFor(t, "the control plane to show the agent draining", func() bool {
		agents, err := c.client.Agents(context.Background())
		return err == nil && len(agents) == 1 && agents[0].State == "draining"
	})
	testkit.WaitFor(t, "the drain to say what it waits for", func() bool {
		return strings.Contains(ag.output(), `"msg":"draining: waiting for running tasks","running":["`+id+`"]`)
	})
	testkit.WaitFor(t, "agent stop to say what is still running", func() bool {
		return strings.Contains(out.String(), "waiting: 1 task(s) still running: ["+id+"]")
	})
	// Work queued now is not claimed by a draining agent.
	late := submit(t, c, "@output later")

	must(t, os.WriteFile(gate, nil, 0o600))
	if code := ag.wait(); code != 0 {
		t.Fatalf("agent exit %d", code)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("agent stop: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("agent stop did not return after the agent exited:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "stopped") {
		t.Errorf("agent stop did not say the agent stopped:\n%s", out.String())
	}
	if v := c.task(t, id); v.Phase != state.PhaseCompleted {
		t.Errorf("the drained task ended %s", v.Phase)
	}
	if v := c.task(t, late); v.Phase != state.PhaseQueued {
		t.Errorf("a draining agent took new work: %s", v.Phase)
	}
	agents, err := c.client.Agents(context.Background())
	if err != nil || len(agents) != 1 || agents[0].State != "offline" {
		t.Errorf("after the stop the control plane shows %+v (%v)", agents, err)
	}
	if o := ag.output(); strings.Contains(o, `"level":"WARN"`) || strings.Contains(o, `"level":"ERROR"`) {
		t.Errorf("a clean drain logged a warning or an error:\n%s", tail(o, 3000))
	}
	if _, err := os.Stat(filepath.Join(dataDir, "agent.pid")); !os.IsNotExist(err) {
		t.Errorf("the pid file outlived the agent: %v", err)
	}
}

// With --reattach-grace 0, past the drain timeout the running task is stopped, and its next
// attempt waits for the agent's next run (it had done nothing: a replay),
// which stop says; --now (SIGQUIT) skips the drain.
func TestStopDrainTimeoutAndNow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		agentArgs []string
		stopArgs  []string
		wantLog   string
	}{
		{"drain timeout", []string{"--drain-timeout", "1s", "--reattach-grace", "0"}, nil, "stopping the tasks still running"},
		{"now", []string{"--drain-timeout", "10m", "--reattach-grace", "0"}, []string{"--now"}, "stopping at once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCP(t, freeAddr(t), t.TempDir())
			dataDir := t.TempDir()
			ag := startAgentProc(t, c, dataDir, tc.agentArgs...)
			id := submit(t, c, "@wait-file "+filepath.Join(t.TempDir(), "never"))
			c.waitPhase(t, id, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
			r := runAgent(t, append([]string{"stop", "--data-dir", dataDir}, tc.stopArgs...)...)
			if r.code != 0 || !strings.Contains(r.stdout, "stopped") || !strings.Contains(r.stdout, "task "+id+" will run attempt 2 from the start when the agent starts again") {
				t.Fatalf("agent stop: %+v", r)
			}
			if code := ag.wait(); code != 0 {
				t.Fatalf("agent exit %d", code)
			}
			if !strings.Contains(ag.output(), tc.wantLog) {
				t.Errorf("the agent's log does not say %q:\n%s", tc.wantLog, tail(ag.output(), 3000))
			}
			tasks, err := datadir.LoadTasks(dataDir)
			if err != nil || len(tasks) != 1 {
				t.Fatalf("tasks: %d (%v)", len(tasks), err)
			}
			task := tasks[0]
			if a := task.Attempts[0]; !task.Phase.Running() || len(task.Attempts) != 2 || a.Error == nil || a.Error.Code != state.CodeAgentShutdown ||
				task.Current().Status != state.AttemptPending {
				t.Errorf("the stopped task is %s with attempts %+v", task.Phase, task.Attempts)
			}
		})
	}
}

func TestStopWithoutAnAgent(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t) // an outbox, but nobody holds its lock
	r := runAgent(t, "stop", "--data-dir", dataDir)
	wantOneLineError(t, r, 1, "no agent is running on this data directory")
	r = runAgent(t, "stop", "--data-dir", t.TempDir())
	wantOneLineError(t, r, 1, "no agent is running on this data directory")
}

// agent stop signals the process that holds the data directory's lock,
// never one the pid file names that does not: a task, running as the
// agent's user, can rewrite or remove agent.pid. A planted pid is said
// on stderr and left alone; the real agent drains and exits.
func TestStopSignalsOnlyTheLockHolder(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the kernel names a lock's holder only on Linux (/proc/locks)")
	}
	for _, tc := range []struct {
		name    string
		planted bool // the pid file names a sleep; else it is removed
	}{
		{"pid file names another process", true},
		{"pid file removed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCP(t, freeAddr(t), t.TempDir())
			dataDir := t.TempDir()
			ag := startAgentProc(t, c, dataDir)
			pidFile := filepath.Join(dataDir, "agent.pid")
			testkit.WaitFor(t, "the agent to write its pid file", func() bool {
				_, err := os.Stat(pidFile)
				return err == nil
			})
			sleep := exec.Command("sleep", "300")
			must(t, sleep.Start())
			sleepDone := make(chan struct{})
			go func() { sleep.Wait(); close(sleepDone) }()
			t.Cleanup(func() { sleep.Process.Kill(); <-sleepDone })
			if tc.planted {
				must(t, os.WriteFile(pidFile, []byte(strconv.Itoa(sleep.Process.Pid)+"\n"), 0o600))
			} else {
				must(t, os.Remove(pidFile))
			}

			r := runAgent(t, "stop", "--data-dir", dataDir, "--timeout", "30s")
			select {
			case <-sleepDone:
				t.Fatalf("agent stop signalled pid %d, which the pid file named but which holds no lock: %+v", sleep.Process.Pid, r)
			default:
			}
			agentPID := ag.cmd.Process.Pid
			if r.code != 0 || !strings.Contains(r.stdout, "asked agent pid "+strconv.Itoa(agentPID)+" to drain") || !strings.Contains(r.stdout, "stopped") {
				t.Errorf("agent stop did not stop the lock's holder, pid %d: %+v", agentPID, r)
			}
			wantWarn := ""
			if tc.planted {
				wantWarn = "agent: warning: " + pidFile + " names pid " + strconv.Itoa(sleep.Process.Pid) + ", which does not hold the data directory's lock: not signalled"
			}
			if wantWarn != "" && (!strings.HasPrefix(r.stderr, wantWarn) || strings.Count(r.stderr, "\n") != 1) || wantWarn == "" && r.stderr != "" {
				t.Errorf("stderr %q, want one line starting %q", r.stderr, wantWarn)
			}
			if code := ag.wait(); code != 0 {
				t.Errorf("agent exit %d", code)
			}
			if !processAlive(sleep.Process.Pid) {
				t.Error("the sleep the pid file named does not run any more")
			}
		})
	}
}

// A stop that outlasts its --timeout (a drain: --reattach-grace 0) says
// how to stop at once, and that line works when pasted as printed.
func TestStopTimeoutHintWorksAsPrinted(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	ag := startAgentProc(t, c, dataDir, "--drain-timeout", "10m", "--reattach-grace", "0")
	id := submit(t, c, "@wait-file "+filepath.Join(t.TempDir(), "never"))
	c.waitPhase(t, id, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
	r := runAgent(t, "stop", "--data-dir", dataDir, "--timeout", "1s")
	_, hint, ok := strings.Cut(strings.TrimSpace(r.stderr), "; ")
	if r.code != 1 || !ok || !strings.HasSuffix(hint, " stops it at once") {
		t.Fatalf("agent stop past its timeout: %+v", r)
	}
	line := strings.TrimSuffix(hint, " stops it at once")
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append(os.Environ(), "AGENT_TEST_BE_AGENT=1", "GORACE=atexit_sleep_ms=0", "AGENT_CONFIG=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	if code := ag.wait(); code != 0 {
		t.Errorf("agent exit %d after %s", code, line)
	}
}
