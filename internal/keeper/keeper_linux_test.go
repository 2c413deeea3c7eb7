package keeper

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/testkit"
)

func TestMain(m *testing.M) {
	Main() // the test binary is the keeper
	if os.Getenv(netClientEnv) != "" {
		os.Exit(netClient(os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// run starts sh -c script under a keeper and waits for the attempt to end.
func run(t *testing.T, script string, policy *landlock.Policy, dir string) (Status, string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := Start(cmd, Sandbox{Files: policy}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Keeper.Wait()
	return p.Status(), out.String()
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// readPid waits for a pid written to file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no pid written: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return pid
}

// A process that leaves the attempt's group, starts a session of its own
// and drops the attempt's environment is still the keeper's to end: it is
// dead once the keeper has exited, and counted.
func TestAProcessThatGetsAwayIsEnded(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "escaped")
	st, out := run(t, `env -i setsid sh -c 'echo $$ > escaped; exec sleep 1000' </dev/null >/dev/null 2>&1 &
		while [ ! -s escaped ]; do sleep 0.01; done; exit 3`, nil, dir)
	if st.ExitCode != 3 || st.Signal != "" {
		t.Fatalf("status %+v, want exit code 3; output %q", st, out)
	}
	pid := readPid(t, pidFile)
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the escaped process %d outlived its keeper", pid)
	}
	if st.Swept < 1 {
		t.Errorf("swept %d processes, want at least the escaped one", st.Swept)
	}
}

// How the executor ended is told as it was: a code, or a signal.
func TestTheExecutorsEndIsTold(t *testing.T) {
	st, _ := run(t, "kill -TERM $$", nil, "")
	if st.ExitCode != -1 || st.Signal != syscall.SIGTERM.String() {
		t.Errorf("status %+v, want the signal %q", st, syscall.SIGTERM.String())
	}
	st, _ = run(t, "exit 0", nil, "")
	if st.ExitCode != 0 || st.Signal != "" || st.Swept != 0 {
		t.Errorf("status %+v, want a clean exit 0", st)
	}
}

// An executor that cannot be started is said as such, with the system's
// reason, so the runner can tell a missing binary from one not executable.
func TestStartErrorsKeepTheirReason(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "cli")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want error
	}{
		{filepath.Join(dir, "missing"), fs.ErrNotExist},
		{notExec, fs.ErrPermission},
	} {
		cmd := exec.Command(c.path)
		_, err := Start(cmd, Sandbox{}, time.Second, nil)
		var se *StartError
		if !errors.As(err, &se) || !errors.Is(err, c.want) {
			t.Errorf("start %s: %v, want a StartError that is %v", c.path, err, c.want)
		}
	}
}

// Signals reach the executor's group, or the executor alone.
func TestSignalsReachTheGroupOrTheLeader(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `trap 'echo leader-int >> log' INT
		sh -c 'trap "echo child-term >> log; exit 0" TERM; echo $$ > child; while :; do sleep 0.05; done' &
		trap 'echo leader-term >> log; wait; exit 7' TERM
		echo ready > ready
		while :; do sleep 0.05; done`)
	cmd.Dir = dir
	p, err := Start(cmd, Sandbox{}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "ready"))
	waitFile(t, filepath.Join(dir, "child"))
	p.Signal(syscall.SIGINT, false)
	waitFor(t, filepath.Join(dir, "log"), "leader-int")
	p.Signal(syscall.SIGTERM, true)
	_ = p.Keeper.Wait()
	st := p.Status()
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	if st.ExitCode != 7 || !strings.Contains(string(b), "child-term") || !strings.Contains(string(b), "leader-term") {
		t.Errorf("status %+v, log %q: want exit 7 with both leader and child told", st, b)
	}
	if strings.Count(string(b), "leader-int") != 1 {
		t.Errorf("log %q: the leader got SIGINT other than once", b)
	}
}

// The agent going away (its end of the socket closed, as when it is
// killed) ends the attempt: SIGTERM, then SIGKILL after the grace period
// to a process that ignores SIGTERM.
func TestTheAgentGoingAwayEndsTheAttempt(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `trap '' TERM; echo $$ > pid; while :; do sleep 0.05; done`)
	cmd.Dir = dir
	p, err := Start(cmd, Sandbox{}, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "pid"))
	p.ctl.Close() // what the agent's death does
	_ = p.Keeper.Wait()
	if pid := readPid(t, filepath.Join(dir, "pid")); alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the executor %d outlived the agent's going away", pid)
	}
}

// Confined, the executor and what it starts read and write only what the
// policy allows: a denied file cannot be read, listed names aside; outside
// the writable hierarchies nothing can be written; it cannot signal the
// process that started its keeper.
func TestTheAttemptIsConfined(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	root, _ := filepath.EvalSymlinks(t.TempDir())
	data := filepath.Join(root, "data")
	work := filepath.Join(data, "work", "t-1")
	for _, d := range []string{work, filepath.Join(data, "work", "t-2")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(data, "agent-token")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(root, "agent.toml")
	if err := os.WriteFile(config, []byte("# config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := &landlock.Policy{Read: []string{"/"}, Write: []string{work, "/dev"}, Deny: []string{data, config}, ListAll: true}
	script := `cat ` + secret + ` && echo read-secret
		echo x >> ` + config + ` && echo wrote-config
		echo x > ` + filepath.Join(data, "work", "t-2", "f") + ` && echo wrote-other-task
		echo x > ` + filepath.Join(root, "beside") + ` && echo wrote-outside
		mv ` + data + ` ` + data + `.moved && echo moved-data
		echo ok > mine && cat mine
		ls ` + data + ` >/dev/null && echo listed
		kill -0 ` + strconv.Itoa(os.Getpid()) + ` && echo signalled-agent
		exit 0`
	st, out := run(t, script, policy, work)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v; output:\n%s", st, out)
	}
	for _, bad := range []string{"s3cret", "read-secret", "wrote-config", "wrote-other-task", "wrote-outside", "moved-data", "signalled-agent"} {
		if strings.Contains(out, bad) {
			t.Errorf("the confined attempt could: %s; output:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "ok") || !strings.Contains(out, "listed") {
		t.Errorf("the confined attempt could not write its work directory or list: output:\n%s", out)
	}
	if b, _ := os.ReadFile(config); string(b) != "# config\n" {
		t.Errorf("the config file was changed: %q", b)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	testkit.WaitFor(t, path, func() bool { b, err := os.ReadFile(path); return err == nil && len(b) > 0 })
}

func waitFor(t *testing.T, path, text string) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%s to say %q", path, text), func() bool { b, _ := os.ReadFile(path); return strings.Contains(string(b), text) })
}

// A variable set twice keeps its last value, as os/exec has it.
func TestAVariableSetTwiceKeepsItsLastValue(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `echo "$A $B"`)
	cmd.Env = []string{"A=1", "B=2", "A=3"}
	var out strings.Builder
	cmd.Stdout = &out
	p, err := Start(cmd, Sandbox{}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Keeper.Wait()
	p.Status()
	if got := strings.TrimSpace(out.String()); got != "3 2" {
		t.Errorf("the executor saw %q, want %q", got, "3 2")
	}
}

// The executor does not inherit the keeper's socket: it could otherwise
// write to the agent as if it were the keeper, and hold the agent's end
// open after the keeper is gone.
func TestTheExecutorHasNoSocketOfTheKeepers(t *testing.T) {
	st, out := run(t, `ls -l /proc/self/fd/ | grep -c socket || true`, nil, "")
	if st.ExitCode != 0 || strings.TrimSpace(out) != "0" {
		t.Errorf("the executor holds %s socket(s) (status %+v)", strings.TrimSpace(out), st)
	}
}
