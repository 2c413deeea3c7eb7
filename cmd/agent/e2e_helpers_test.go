package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// proc is the agent binary running as a subprocess.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

// startProc starts the agent with args, its output in a file.
func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return startProcIn(t, "", name, env, args...)
}

// startProcIn is startProc in the working directory dir ("" for the
// test's), as a person starts it from a shell in dir.
func startProcIn(t *testing.T, dir, name string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := agentCmd(context.Background(), env, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p := &proc{t: t, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s output:\n%s", name, tail(string(b), 4000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *proc) output() string { b, _ := os.ReadFile(p.logPath); return string(b) }

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop() int {
	p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait()
}

func (p *proc) wait() int {
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		p.t.Fatalf("%v did not exit within a minute", p.cmd.Args)
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// cp is a control plane subprocess. tokenFile is the registration secret
// agents enrol with; operatorFile a person's token, which client uses.
type cp struct {
	*proc
	addr, dir, tokenFile, operatorFile string
	client                             *controlplane.Client
}

func startCP(t *testing.T, addr, dir string, extra ...string) *cp {
	t.Helper()
	return startCPEnv(t, nil, addr, dir, extra...)
}

// startCPEnv is startCP with more environment (the crash switch of a
// faults build, say).
func startCPEnv(t *testing.T, env []string, addr, dir string, extra ...string) *cp {
	t.Helper()
	args := append([]string{"controlplane", "serve", "--addr", addr, "--data-dir", dir, "--heartbeat-interval", "300ms", "--lease", "10s"}, extra...)
	p := startProc(t, "controlplane", env, args...)
	url := "http://" + addr
	testkit.WaitFor(t, "the control plane to listen", func() bool {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	// The token files it was given, or those it made in its directory.
	tokenFile, operatorFile := filepath.Join(dir, "token"), filepath.Join(dir, "operator-token")
	for i := 0; i+1 < len(extra); i++ {
		switch extra[i] {
		case "--token-file":
			tokenFile = extra[i+1]
		case "--operator-token-file":
			operatorFile = extra[i+1]
		}
	}
	tok, err := os.ReadFile(operatorFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := controlplane.NewClient(url, strings.TrimSpace(string(tok)), controlplane.ClientOptions{Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &cp{proc: p, addr: addr, dir: dir, tokenFile: tokenFile, operatorFile: operatorFile, client: c}
}

func (c *cp) url() string { return "http://" + c.addr }

// startAgentProc runs `agent run` with the sample executor against c.
func startAgentProc(t *testing.T, c *cp, dataDir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "sample", "--heartbeat-interval", "300ms", "--models", "model-a,model-b", "--shutdown-grace", "2s"}, extra...)
	return startProc(t, "agent", nil, args...)
}

// submit enqueues a task through `agent submit` and returns its id.
func submit(t *testing.T, c *cp, prompt string) string {
	t.Helper()
	r := runAgent(t, "submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--prompt", prompt)
	if r.code != 0 {
		t.Fatalf("submit: %+v", r)
	}
	return strings.TrimSpace(r.stdout)
}

func (c *cp) task(t *testing.T, id string) api.TaskView {
	t.Helper()
	v, err := c.client.Task(context.Background(), id)
	if err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	return v
}

// waitPhase waits until the control plane shows task id in a phase that
// satisfies ok.
func (c *cp) waitPhase(t *testing.T, id, what string, ok func(state.Phase) bool) api.TaskView {
	t.Helper()
	var v api.TaskView
	testkit.WaitFor(t, fmt.Sprintf("task %s to be %s", id, what), func() bool {
		var err error
		v, err = c.client.Task(context.Background(), id)
		return err == nil && ok(v.Phase)
	})
	return v
}

func terminal(p state.Phase) bool { return p.Terminal() }

// waitDone waits until the control plane has the task's completion event:
// the terminal phase arrives first, as an event of its own, and the result
// with the completion after it.
func (c *cp) waitDone(t *testing.T, id string) api.TaskView {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("task %s's completion", id), func() bool {
		evs, err := c.client.TaskEvents(context.Background(), id)
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Kind == state.EventComplete {
				return true
			}
		}
		return false
	})
	return c.task(t, id)
}

// events returns the events the control plane accepted for a task, and
// fails if a key appears twice.
func (c *cp) events(t *testing.T, id string) []api.StoredEvent {
	t.Helper()
	evs, err := c.client.TaskEvents(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.Key] {
			t.Errorf("event %s applied twice", e.Key)
		}
		seen[e.Key] = true
	}
	return evs
}

// processAlive reports whether pid is running (not a zombie).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// crashSwitchName is the variable that sets off the control plane's crash
// points in a faults build. It is put together at run time: as a constant
// in this test it would be in every test binary.
func crashSwitchName() string { return strings.Join([]string{"AGENT", "CP", "CRASH"}, "_") }

// holdsCrashSwitch reports whether a binary holds the crash switch's name.
func holdsCrashSwitch(bin []byte) bool { return bytes.Contains(bin, []byte(crashSwitchName())) }
