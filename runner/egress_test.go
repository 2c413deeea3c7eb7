package runner_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// listener is a loopback service a task must not reach (the control
// plane, PostgreSQL, the agent's metrics): it counts the connections it
// accepts.
type listener struct {
	port     int
	mu       sync.Mutex
	accepted int
}

func listen(t *testing.T) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{port: ln.Addr().(*net.TCPAddr).Port}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.accepted++
			l.mu.Unlock()
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nreached"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return l
}

func (l *listener) reached() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// probeScript is what a prompt-injected task tries, in bash (its /dev/tcp
// needs no tool): a loopback service directly, the same through its
// proxy, and a host off its list through the proxy; then an allowed
// loopback endpoint, when given. It writes what happened to egress-probe
// in its work directory.
func probeScript(service int, allowed int) string {
	s := strconv.Itoa(service)
	script := `out=egress-probe; p=${HTTPS_PROXY##*:}; echo "proxy=$HTTPS_PROXY" > $out; ` +
		`(exec 3<>/dev/tcp/127.0.0.1/` + s + `) 2>/dev/null && echo service-direct-reached >> $out || echo service-direct-refused >> $out; ` +
		`for target in 127.0.0.1:` + s + ` evil.example:443; do ` +
		`if exec 3<>/dev/tcp/127.0.0.1/$p; then printf "CONNECT $target HTTP/1.1\r\nHost: $target\r\n\r\n" >&3; read -r line <&3; echo "proxy $target: $line" >> $out; exec 3>&-; ` +
		`else echo "proxy $target: no proxy" >> $out; fi; done; `
	if allowed > 0 {
		a := strconv.Itoa(allowed)
		// Reached means answered: the endpoint counts the connection
		// before it answers, so the count holds once the task has ended
		// (a connection merely opened is the keeper's forward, which
		// dials the endpoint in its own time).
		script += `(exec 3<>/dev/tcp/127.0.0.1/` + a + ` && read -r line <&3) 2>/dev/null && echo allowed-direct-reached >> $out || echo allowed-direct-refused >> $out; `
	}
	return `bash -c '` + strings.ReplaceAll(script, `'`, `'\''`) + `'`
}

func egressOf(t *testing.T, allow ...string) *runner.Egress {
	t.Helper()
	rules, err := egress.ParseRules(allow)
	if err != nil {
		t.Fatal(err)
	}
	return &runner.Egress{Allow: rules}
}

func needEgress(t *testing.T) {
	t.Helper()
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	if err := keeper.ProbeEgress(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
}

// checkProbe fails the test for every part of probeScript that got
// through, and returns what the task wrote.
func checkProbe(t *testing.T, work string, service *listener) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(work, "egress-probe"))
	if err != nil {
		t.Fatalf("the task's probe did not run: %v", err)
	}
	out := string(b)
	for _, want := range []string{"proxy=http://127.0.0.1:", "service-direct-refused",
		"proxy 127.0.0.1:" + strconv.Itoa(service.port) + ": HTTP/1.1 403", "proxy evil.example:443: HTTP/1.1 403"} {
		if !strings.Contains(out, want) {
			t.Errorf("the task's probe lacks %q:\n%s", want, out)
		}
	}
	if n := service.reached(); n > 0 {
		t.Errorf("the loopback service off the allow list was reached %d time(s):\n%s", n, out)
	}
	return out
}

// checkDenied fails the test unless the attempt's record counts and names
// what its proxy refused, and the task's log says it.
func checkDenied(t *testing.T, f *runnertest.Fixture, service *listener) {
	t.Helper()
	a := f.Task.Attempts[len(f.Task.Attempts)-1]
	if a.Egress == nil || a.Egress.Denied != 2 || !slices.Contains(a.Egress.Last, "evil.example:443") ||
		!slices.Contains(a.Egress.Last, "127.0.0.1:"+strconv.Itoa(service.port)) {
		t.Errorf("the attempt records %+v refused, want 2, naming evil.example:443 and the service", a.Egress)
	}
	if logs := strings.Join(f.Rec.Logs(), "\n"); !strings.Contains(logs, "egress: 2 connection(s) refused") {
		t.Errorf("the task's log does not say what was refused:\n%s", logs)
	}
}

// A confined exec task reaches the loopback endpoint its agent allows, and
// neither a loopback service off the list (directly or through its proxy)
// nor a host off it: what its proxy refused is counted and named on the
// attempt.
func TestAConfinedTaskReachesOnlyItsAllowList(t *testing.T) {
	needEgress(t)
	files := newAgentFiles(t)
	service, allowed := listen(t), listen(t)
	exe, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", probeScript(service.port, allowed.port)}})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "probe")
	f.Runner.WorkRoot, f.Runner.Isolation = files.workRoot, files.isolation()
	f.Runner.Egress = egressOf(t, "127.0.0.1:"+strconv.Itoa(allowed.port))
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s (%s): logs %v", f.Task.Phase, f.Task.PhaseReason, f.Rec.Logs())
	}
	out := checkProbe(t, filepath.Join(files.workRoot, f.Task.ID), service)
	if !strings.Contains(out, "allowed-direct-reached") || allowed.reached() != 1 {
		t.Errorf("the allowed loopback endpoint was not reached (%d):\n%s", allowed.reached(), out)
	}
	checkDenied(t, f, service)
}

// A task's own list narrows the agent's: an endpoint the agent allows but
// the task does not name is out of its reach.
func TestATasksOwnListNarrowsTheAgents(t *testing.T) {
	needEgress(t)
	files := newAgentFiles(t)
	service, allowed := listen(t), listen(t)
	exe, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", probeScript(service.port, allowed.port)}})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "probe")
	f.Task.EgressAllow = []string{"pypi.org"}
	f.Runner.WorkRoot, f.Runner.Isolation = files.workRoot, files.isolation()
	f.Runner.Egress = egressOf(t, "127.0.0.1:"+strconv.Itoa(allowed.port), "pypi.org")
	f.Run(t, context.Background())
	out := checkProbe(t, filepath.Join(files.workRoot, f.Task.ID), service)
	if !strings.Contains(out, "allowed-direct-refused") || allowed.reached() != 0 {
		t.Errorf("the task reached an endpoint its own list leaves out:\n%s", out)
	}
}

// The real CLIs, confined, still reach their model (the mock, on
// loopback, forwarded into the attempt's network as it is); their shell,
// prompt-injected, reaches no loopback service off the list and no host
// off it, and what their proxy refused is counted on the attempt.
func TestTheRealCLIsReachTheirModelAndNothingElseConfined(t *testing.T) {
	needEgress(t)
	for _, c := range []struct {
		name string
		exe  func(*testing.T, *mockmodel.Server) runner.Executor
	}{
		{"codex", func(t *testing.T, m *mockmodel.Server) runner.Executor {
			return runnertest.CodexExec(t, m, codex.Config{})
		}},
		{"claude", func(t *testing.T, m *mockmodel.Server) runner.Executor {
			return runnertest.ClaudeExec(t, m, claude.Config{PermissionMode: "bypassPermissions", Base: cli.Base{Env: []string{"IS_SANDBOX=1"}}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runnertest.LimitCLIs(t)
			mock := runnertest.StartMock(t)
			files := newAgentFiles(t)
			service := listen(t)
			f := runnertest.NewCLIFixture(t, c.exe(t, mock), "Probe\nmock: shell\nmock-cmd: "+probeScript(service.port, 0), []string{"gpt-5.5"})
			f.Runner.WorkRoot, f.Runner.Isolation, f.Runner.Egress = files.workRoot, files.isolation(), &runner.Egress{}
			f.Run(t, context.Background())
			if f.Task.Phase != state.PhaseCompleted {
				t.Fatalf("task %s (%s), %s; logs:\n%s", f.Task.Phase, f.Task.PhaseReason, runnertest.AttemptsText(f.Task), strings.Join(f.Rec.Logs(), "\n"))
			}
			if n := len(mock.Requests()); n < 2 {
				t.Errorf("the model was asked %d time(s), want the shell call and the answer after it", n)
			}
			checkProbe(t, filepath.Join(files.workRoot, f.Task.ID), service)
			checkDenied(t, f, service)
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// A task user's way to its directories: the agent's own directories on it
// become enterable, not listable (0711); one above them that bars the user
// stops the agent, naming it.
func TestATaskUserIsGivenTheWayToItsDirectories(t *testing.T) {
	root, err := os.MkdirTemp("", "task-user-way-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	u := &runner.TaskUser{Name: "agent-task", User: keeper.User{Uid: 4242, Gid: 4242}}
	work := filepath.Join(data, "work")
	if err := u.Prepare(work, data); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{data, work, filepath.Join(work, ".tmp"), filepath.Join(work, runner.SessionDirName), filepath.Join(work, runner.ServeDirName)} {
		if info, err := os.Stat(d); err != nil || info.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v %v, want 0711", d, info.Mode().Perm(), err)
		}
	}
	barred := filepath.Join(root, "barred")
	if err := os.Mkdir(barred, 0o700); err != nil {
		t.Fatal(err)
	}
	err = u.Prepare(filepath.Join(barred, "data", "work"), filepath.Join(barred, "data"))
	if err == nil || !strings.Contains(err.Error(), barred+" is not searchable by it") {
		t.Errorf("a barred way: %v", err)
	}
}
