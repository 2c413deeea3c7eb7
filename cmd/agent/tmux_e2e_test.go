package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// tmuxServer is a private tmux server for one test: a directory of its
// own (TMUX_TMPDIR, which env gives the agent) and a socket name, killed
// when the test ends.
type tmuxServer struct {
	t      *testing.T
	socket string
	env    []string
}

func newTmuxServer(t *testing.T) *tmuxServer {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux binary")
	}
	dir, err := os.MkdirTemp("", "tmx") // short: a socket's path has room for about 100 bytes
	if err != nil {
		t.Fatal(err)
	}
	s := &tmuxServer{t: t, socket: "agent-e2e", env: []string{"TMUX_TMPDIR=" + dir}}
	t.Cleanup(func() {
		_, _ = s.run("kill-server")
		os.RemoveAll(dir)
	})
	return s
}

func (s *tmuxServer) run(args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...)
	cmd.Env = append(os.Environ(), s.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// window is the id of the session's window of this name, "" if none.
func (s *tmuxServer) window(name string) string {
	out, err := s.run("list-windows", "-t", "=agent", "-F", "#{window_id}\t#{window_name}")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		if id, n, _ := strings.Cut(line, "\t"); n == name {
			return id
		}
	}
	return ""
}

// shows waits until the window shows text, as a person attached sees it.
func (s *tmuxServer) shows(window, text string) {
	s.t.Helper()
	testkit.WaitFor(s.t, "window "+window+" to show "+text, func() bool {
		out, _ := s.run("capture-pane", "-p", "-t", window)
		return strings.Contains(out, text)
	})
}

func TestE2ETmuxWindowPerAttempt(t *testing.T) {
	t.Parallel()
	s := newTmuxServer(t)
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	agentProc := startProc(t, "agent", s.env, "run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir,
		"--executor", "sample", "--heartbeat-interval", "300ms", "--tmux", "--tmux-socket", s.socket, "--tmux-linger", "1s")
	pace := t.TempDir()
	r := runAgent(t, "submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--title", "fix flaky test",
		"--prompt", "@output hello from the task\n@wait-file "+pace+"/one\n@fail network 1\n@output the second try\n@wait-file "+pace+"/two")
	if r.code != 0 {
		t.Fatalf("submit: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)

	// The first attempt's window, titled, shows the task's output.
	var w1 string
	testkit.WaitFor(t, "the first attempt's window", func() bool { w1 = s.window("fix flaky test #1"); return w1 != "" })
	s.shows(w1, "hello from the task")
	// The home window is the agent's tasks watch.
	s.shows("=agent:tasks", id)

	// The attempt fails: its window says so and goes.
	touchFile(t, filepath.Join(pace, "one"))
	s.shows(w1, "this window closes in 1s")
	testkit.WaitFor(t, "the first attempt's window to close", func() bool { return s.window("fix flaky test #1") == "" })

	// A person kills the session: the retry's window opens in a new one.
	if out, err := s.run("kill-session", "-t", "=agent"); err != nil {
		t.Fatalf("kill-session: %v: %s", err, out)
	}
	var w2 string
	testkit.WaitFor(t, "the retry's window", func() bool { w2 = s.window("fix flaky test #2"); return w2 != "" })
	s.shows(w2, "the second try")
	touchFile(t, filepath.Join(pace, "two"))
	c.waitPhase(t, id, "completed", func(p state.Phase) bool { return p == state.PhaseCompleted })
	testkit.WaitFor(t, "the retry's window to close", func() bool { return s.window("fix flaky test #2") == "" })

	// The agent stops: its session goes, and the server with it.
	if code := agentProc.stop(); code != 0 {
		t.Fatalf("agent exit code %d", code)
	}
	testkit.WaitFor(t, "the tmux server to exit", func() bool { _, err := s.run("list-sessions"); return err != nil })
	if n := linesWith(agentProc.output(), "tmux view: "); n > 1 {
		t.Errorf("the tmux view logged %d lines, want at most one:\n%s", n, agentProc.output())
	}
}

func TestE2ETmuxMissingIsOneLineAndTasksComplete(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	agentProc := startProc(t, "agent", []string{"PATH=" + t.TempDir()}, "run", "--control-plane", c.url(), "--token-file", c.tokenFile,
		"--data-dir", dataDir, "--executor", "sample", "--heartbeat-interval", "300ms", "--tmux")
	id := submit(t, c, "@output fine without tmux\n@fail network 1")
	v := c.waitPhase(t, id, "completed", func(p state.Phase) bool { return p.Terminal() })
	if v.Phase != state.PhaseCompleted || len(v.Attempts) != 2 {
		t.Fatalf("task %s: phase %s after %d attempts, want completed after 2", id, v.Phase, len(v.Attempts))
	}
	if code := agentProc.stop(); code != 0 {
		t.Fatalf("agent exit code %d", code)
	}
	if n := linesWith(agentProc.output(), "tmux"); n != 1 || !strings.Contains(agentProc.output(), "tmux view off: no tmux binary") {
		t.Errorf("want one line saying there is no tmux, got %d:\n%s", n, agentProc.output())
	}
}

func touchFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// linesWith counts the lines of out that hold s.
func linesWith(out, s string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}
