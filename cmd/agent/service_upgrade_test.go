package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/service"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// miniSystemd is a systemctl first on PATH that does what systemd does
// with a user unit, as far as service install and upgrade need: enable
// --now and restart start the unit's ExecStart in the background;
// restart first stops the agent as systemd does (SIGTERM, here through
// agent stop, whose output it keeps).
type miniSystemd struct {
	dir, pidFile, stopOut string
}

func newMiniSystemd(t *testing.T, unit, dataDir string) *miniSystemd {
	t.Helper()
	dir := t.TempDir()
	m := &miniSystemd{dir: dir, pidFile: filepath.Join(dir, "pid"), stopOut: filepath.Join(dir, "stop.out")}
	script := fmt.Sprintf(`#!/bin/sh
unit=%[1]q
start() {
	cmdline=$(sed -n 's/^ExecStart=//p' "$unit")
	AGENT_TEST_BE_AGENT=1 sh -c "exec $cmdline" >> %[2]q 2>&1 < /dev/null &
	echo $! > %[3]q
}
case "$*" in
*"enable --now"*) start ;;
*restart*)
	bin=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
	AGENT_TEST_BE_AGENT=1 "$bin" stop --data-dir %[4]q > %[5]q 2>&1 || exit 1
	start ;;
esac
exit 0
`, unit, filepath.Join(dir, "agent.log"), m.pidFile, dataDir, m.stopOut)
	must(t, os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o700))
	t.Cleanup(func() {
		runAgent(t, "stop", "--now", "--data-dir", dataDir)
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
			t.Logf("service output:\n%s", tail(string(b), 6000))
		}
	})
	return m
}

// pid is the service's agent's pid, as last started.
func (m *miniSystemd) pid(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(m.pidFile)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	return pid
}

// TestE2EServiceUpgradeCutsNoTurn installs the agent as a service, runs a
// task that reports progress for 10 s, and upgrades the service's binary
// mid-task: the binary is replaced, the service restarted on it, the stop
// says the task will be re-attached, and the task completes in one
// attempt, its one executor process running throughout, every progress
// report at the control plane once.
func TestE2EServiceUpgradeCutsNoTurn(t *testing.T) {
	const n = 100
	c := startCP(t, freeAddr(t), t.TempDir())
	configHome, stateHome, home := t.TempDir(), t.TempDir(), t.TempDir()
	dataDir := t.TempDir()
	unit := filepath.Join(configHome, "systemd", "user", service.UnitName)
	sd := newMiniSystemd(t, unit, dataDir)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + configHome, "XDG_STATE_HOME=" + stateHome, "PATH=" + sd.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	r := runAgentEnv(t, env, "service", "install", "--", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "exec", "--executor-command", tickerScript(t, n), "--heartbeat-interval", "300ms", "--reattach-grace", "2m")
	if r.code != 0 {
		t.Fatalf("service install: %+v", r)
	}
	installedBin := filepath.Join(home, ".local", "bin", "agent")
	first := sd.pid(t)
	id := submit(t, c, "tick")
	untilTick(t, c, id, 30)

	// The new binary: this one, told apart by bytes after its end (an
	// ELF file's loader reads what its headers name, not the rest).
	self, err := os.ReadFile(os.Args[0])
	must(t, err)
	marker := []byte("\nupgraded-by-the-test\n")
	newBin := filepath.Join(t.TempDir(), "agent-new")
	must(t, os.WriteFile(newBin, append(self, marker...), 0o755))

	r = runAgentEnv(t, env, "service", "upgrade", "--bin", newBin)
	if r.code != 0 {
		t.Fatalf("service upgrade: %+v", r)
	}
	for _, want := range []string{"installed " + newBin, "as " + installedBin, "task " + id + " goes on through the restart", "running: systemctl --user restart agent.service"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("service upgrade said\n%s\nwant %q", r.stdout, want)
		}
	}
	if b, err := os.ReadFile(installedBin); err != nil || !bytes.HasSuffix(b, marker) {
		t.Fatalf("the installed binary is not the new one (%v)", err)
	}
	stopped, _ := os.ReadFile(sd.stopOut)
	if !strings.Contains(string(stopped), "task "+id+" will be re-attached when the agent starts again") {
		t.Errorf("the restart's stop said\n%s\nwant it to name the task re-attached", stopped)
	}
	second := sd.pid(t)
	if second == first {
		t.Fatalf("the service was not restarted (pid %d)", first)
	}
	testkit.WaitFor(t, "the new agent to run the new binary", func() bool {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", second))
		return err == nil && exe == installedBin
	})

	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 1 {
		t.Fatalf("the task ended %s after %d attempts, want completed after 1", v.Phase, len(v.Attempts))
	}
	progress := progressSeen(t, c, id)
	pids := map[int]bool{}
	for msg, count := range progress {
		var k, pid int
		if _, err := fmt.Sscanf(msg, "tick %d pid %d", &k, &pid); err == nil {
			pids[pid] = true
		}
		if count != 1 {
			t.Errorf("%q is held %d times", msg, count)
		}
	}
	if len(pids) != 1 || len(progress) != n {
		t.Errorf("%d progress reports from executor pids %v, want %d from one", len(progress), pids, n)
	}

	// A binary that is no agent replaces nothing.
	bogus := filepath.Join(t.TempDir(), "agent-bogus")
	must(t, os.WriteFile(bogus, []byte("#!/bin/sh\necho hello\n"), 0o755))
	wantOneLineError(t, runAgentEnv(t, env, "service", "upgrade", "--bin", bogus), 1, "does not run as an agent binary")
	if b, err := os.ReadFile(installedBin); err != nil || !bytes.HasSuffix(b, marker) {
		t.Errorf("a refused upgrade changed the installed binary (%v)", err)
	}
}
