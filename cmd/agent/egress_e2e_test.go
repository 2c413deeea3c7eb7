package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// publicDir is a directory of the test's that any user may enter (the
// test's own temporary directories are root's alone), removed after.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, _ = filepath.EvalSymlinks(dir)
	return dir
}

// addTaskUser makes an unprivileged user for the test and removes it
// after; it returns its name and uid.
func addTaskUser(t *testing.T) (string, int) {
	t.Helper()
	name := fmt.Sprintf("at%d", os.Getpid()%100000)
	_ = exec.Command("userdel", name).Run() // left by a run that was killed
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	return name, uid
}

// Two tasks of an agent running as root run side by side; one reads, from
// its shell, the agent's /proc/PID/environ (the registration secret's
// neighbourhood: here a marker in the agent's environment) and its
// sibling's (its task token). Neither opens, and the task holds no
// capability: as the --task-user, and as root without one. Health says
// who tasks run as.
func TestE2EATaskOfARootAgentReadsNoOtherEnvironment(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("this is about an agent running as root")
	}
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	name, uid := addTaskUser(t)
	for _, c := range []struct {
		name string
		args []string
		uid  int
		says string
	}{
		{"task user", []string{"--task-user", name}, uid, "tasks run as " + name + " (uid " + strconv.Itoa(uid) + "), without capabilities"},
		{"root without one", nil, 0, "tasks run as root without capabilities"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := publicDir(t)
			shared := filepath.Join(dir, "shared")
			if err := os.Mkdir(shared, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(shared, 0o777); err != nil {
				t.Fatal(err)
			}
			cp := startCP(t, freeAddr(t), filepath.Join(dir, "cp"))
			dataDir := filepath.Join(dir, "agent")
			script := filepath.Join(dir, "task.sh")
			writeFile(t, script, `#!/bin/sh
read -r task
s=`+shared+`
case "$task" in
*sibling*)
	echo $$ > $s/sibling.tmp && mv $s/sibling.tmp $s/sibling.pid
	while [ ! -e $s/done ]; do sleep 0.05; done
	echo '{"type":"result","summary":"sibling"}' ;;
*)
	while [ ! -s $s/sibling.pid ]; do sleep 0.05; done
	agent=$(cut -d' ' -f4 /proc/$PPID/stat)
	{
		echo "uid=$(id -u)"
		grep CapEff /proc/self/status
		echo "agent-environ: $(tr '\0' ' ' < /proc/$agent/environ 2>&1)"
		echo "sibling-environ: $(tr '\0' ' ' < /proc/$(cat $s/sibling.pid)/environ 2>&1)"
	} > $s/result 2>&1
	touch $s/done
	echo '{"type":"result","summary":"reader"}' ;;
esac
`)
			if err := os.Chmod(script, 0o755); err != nil {
				t.Fatal(err)
			}
			a := startProc(t, "agent", []string{"AGENT_SECRET_MARKER=s3cret-in-agent-env"},
				append([]string{"run", "--control-plane", cp.url(), "--token-file", cp.tokenFile, "--data-dir", dataDir,
					"--executor", "exec", "--executor-command", script, "--max-concurrent", "2", "--heartbeat-interval", "300ms"}, c.args...)...)
			sibling := submit(t, cp, "the sibling")
			reader := submit(t, cp, "the reader")
			for _, id := range []string{reader, sibling} {
				if v := cp.waitDone(t, id); v.Phase != state.PhaseCompleted {
					t.Fatalf("task %s ended %s (%s):\n%s", id, v.Phase, v.PhaseReason, tail(a.output(), 3000))
				}
			}
			b, err := os.ReadFile(filepath.Join(shared, "result"))
			if err != nil {
				t.Fatal(err)
			}
			out := string(b)
			if !strings.Contains(out, "uid="+strconv.Itoa(c.uid)+"\n") || !strings.Contains(out, "CapEff:\t0000000000000000") {
				t.Errorf("the task runs as another uid than %d, or holds capabilities:\n%s", c.uid, out)
			}
			for _, leak := range []string{"s3cret-in-agent-env", "AGENT_TASK_TOKEN", "PATH="} {
				if strings.Contains(out, leak) {
					t.Errorf("the task read an environment not its own (%s):\n%s", leak, out)
				}
			}
			if strings.Count(out, "Permission denied") != 2 {
				t.Errorf("want both reads refused:\n%s", out)
			}
			if line := isolationHealth(t, dataDir); !strings.Contains(line, c.says) {
				t.Errorf("health says %q, not %q", line, c.says)
			}
			if a.stop() != 0 {
				t.Fatalf("agent exit code != 0:\n%s", tail(a.output(), 3000))
			}
		})
	}
}

// countingListener is a loopback service a task must not reach: it counts
// the connections it accepts.
type countingListener struct {
	addr string
	mu   sync.Mutex
	n    int
}

func startCounting(t *testing.T) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{addr: ln.Addr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.n++
			l.mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return l
}

func (l *countingListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// A task of a real agent, confined, tries from its shell what a prompt
// injection would on the network: the agent's metrics endpoint on
// loopback, directly and through its proxy, and a host off its allow list.
// Only the loopback endpoint --egress-allow names opens. What the proxy
// refused is on the attempt, at the control plane too, and agent tasks
// show says it.
func TestE2EATaskReachesOnlyItsAllowList(t *testing.T) {
	t.Parallel()
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	if err := keeper.ProbeEgress(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	cp := startCP(t, freeAddr(t), filepath.Join(dir, "cp"))
	dataDir := filepath.Join(dir, "agent")
	metrics := freeAddr(t)
	allowed := startCounting(t)
	_, mport, _ := net.SplitHostPort(metrics)
	_, aport, _ := net.SplitHostPort(allowed.addr)
	script := filepath.Join(dir, "task.sh")
	writeFile(t, script, `#!/bin/bash
read -r task
out=egress-probe
p=${HTTPS_PROXY##*:}
(exec 3<>/dev/tcp/127.0.0.1/`+mport+`) 2>/dev/null && echo metrics-direct-reached >> $out || echo metrics-direct-refused >> $out
for target in 127.0.0.1:`+mport+` evil.example:443; do
	exec 3<>/dev/tcp/127.0.0.1/$p
	printf "CONNECT $target HTTP/1.1\r\nHost: $target\r\n\r\n" >&3
	read -r line <&3
	echo "proxy $target: $line" >> $out
	exec 3>&-
done
(exec 3<>/dev/tcp/127.0.0.1/`+aport+`) 2>/dev/null && echo allowed-direct-reached >> $out || echo allowed-direct-refused >> $out
echo '{"type":"result","summary":"probed"}'
`)
	if err := os.Chmod(script, 0o700); err != nil {
		t.Fatal(err)
	}
	a := startProc(t, "agent", nil, "run", "--control-plane", cp.url(), "--token-file", cp.tokenFile, "--data-dir", dataDir,
		"--executor", "exec", "--executor-command", script, "--heartbeat-interval", "300ms",
		"--metrics-addr", metrics, "--egress-allow", allowed.addr)
	testkit.WaitFor(t, "the metrics endpoint", func() bool {
		c, err := net.Dial("tcp", metrics)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	id := submit(t, cp, "probe the network")
	v := cp.waitDone(t, id)
	if v.Phase != state.PhaseCompleted {
		t.Fatalf("the task ended %s (%s):\n%s", v.Phase, v.PhaseReason, tail(a.output(), 3000))
	}
	b, _ := os.ReadFile(filepath.Join(dataDir, "work", id, "egress-probe"))
	out := string(b)
	for _, want := range []string{"metrics-direct-refused", "proxy 127.0.0.1:" + mport + ": HTTP/1.1 403", "proxy evil.example:443: HTTP/1.1 403", "allowed-direct-reached"} {
		if !strings.Contains(out, want) {
			t.Errorf("the task's probe lacks %q:\n%s", want, out)
		}
	}
	// The task's connection is made when the probe says so; the listener
	// counts it when it accepts it, which a loaded machine may do later.
	if strings.Contains(out, "allowed-direct-reached") {
		testkit.WaitFor(t, "the allowed endpoint to accept the task's connection", func() bool { return allowed.count() > 0 })
	}
	if allowed.count() != 1 {
		t.Errorf("the allowed endpoint was reached %d times, want 1", allowed.count())
	}
	refused := "egress refused 2: 127.0.0.1:" + mport + ", evil.example:443"
	if e := v.Attempts[0].Egress; e == nil || e.Denied != 2 {
		t.Errorf("the control plane's attempt records %+v refused, want 2", e)
	}
	r := runAgent(t, "tasks", "show", id, "--data-dir", dataDir)
	if r.code != 0 || !strings.Contains(r.stdout, refused) {
		t.Errorf("tasks show does not say %q: %+v", refused, r)
	}
	if a.stop() != 0 {
		t.Fatalf("agent exit code != 0:\n%s", tail(a.output(), 3000))
	}
}
