package tmuxview

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a private tmux server for one test: its own directory
// (TMUX_TMPDIR) and socket name, killed when the test ends.
type server struct {
	t      *testing.T
	socket string
}

func newServer(t *testing.T) *server {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux binary")
	}
	dir, err := os.MkdirTemp("", "tmv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("TMUX_TMPDIR", dir)
	t.Setenv("TMUX", "")
	s := &server{t: t, socket: "view-test"}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	return s
}

// run runs a tmux command on the test's server.
func (s *server) run(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	return string(out), err
}

// windows are the session's windows' names, by id.
func (s *server) windows(session string) map[string]string {
	out, err := s.run("list-windows", "-t", "="+session, "-F", "#{window_id} #{window_name}")
	if err != nil {
		return nil
	}
	w := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, name, _ := strings.Cut(line, " ")
		w[id] = name
	}
	return w
}

// windowNamed is the id of the session's window of this name, "" if none.
func (s *server) windowNamed(session, name string) string {
	for id, n := range s.windows(session) {
		if n == name {
			return id
		}
	}
	return ""
}

// waitGone waits for the server to exit: it does once its last session
// is killed.
func (s *server) waitGone() {
	s.t.Helper()
	testkit.WaitFor(s.t, "the tmux server to exit", func() bool { _, err := s.run("list-sessions"); return err != nil })
}

func (s *server) capture(window string) string {
	out, _ := s.run("capture-pane", "-p", "-t", window)
	return out
}

// logBuf is a log that tests read.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// options are a view's options on s: the home window sleeps, an attempt's
// window prints its task and number and stays until release exists.
func (s *server) options(log *slog.Logger, release string) Options {
	return Options{Socket: s.socket, Session: "agent", Owner: "test-owner", Logger: log, Linger: time.Second,
		Home: []string{"sleep", "600"},
		Attempt: func(id string, n int) []string {
			return []string{"sh", "-c", `printf 'output of %s, attempt %s\n' "$0" "$1"; while [ ! -e "$2" ]; do sleep 0.05; done`,
				id, strconv.Itoa(n), release + "-" + strconv.Itoa(n)}
		}}
}

func TestAttemptWindowsShowTheOutputAndCloseAfterTheAttempt(t *testing.T) {
	s := newServer(t)
	var log logBuf
	release := t.TempDir() + "/done"
	v := Start(s.options(log.logger(), release))
	if v == nil {
		t.Fatalf("no view: %s", log.String())
	}
	defer v.Close()

	v.Open("t-1", "fix flaky test", 1)
	v.Open("t-1", "fix flaky test", 1) // said again: one window
	var w1 string
	testkit.WaitFor(t, "the first attempt's window", func() bool { w1 = s.windowNamed("agent", "fix flaky test #1"); return w1 != "" })
	testkit.WaitFor(t, "the attempt's output in its window", func() bool { return strings.Contains(s.capture(w1), "output of t-1, attempt 1") })
	if n := len(s.windows("agent")); n != 2 {
		t.Errorf("windows = %v, want the home window and one attempt's", s.windows("agent"))
	}

	// The attempt ends: its window says so, then goes.
	touch(t, release+"-1")
	testkit.WaitFor(t, "the window to say it closes", func() bool { return strings.Contains(s.capture(w1), "this window closes in 1s") })
	testkit.WaitFor(t, "the window to close", func() bool { _, ok := s.windows("agent")[w1]; return !ok })

	// The next attempt gets a window of its own.
	v.Open("t-1", "fix flaky test", 2)
	var w2 string
	testkit.WaitFor(t, "the second attempt's window", func() bool { w2 = s.windowNamed("agent", "fix flaky test #2"); return w2 != "" })
	if w2 == w1 {
		t.Errorf("attempt 2 reused window %s", w1)
	}
	testkit.WaitFor(t, "attempt 2's output", func() bool { return strings.Contains(s.capture(w2), "output of t-1, attempt 2") })

	// Close kills the session it made, and with it the server.
	v.Close()
	s.waitGone()
	// The one warning is the start's, that a task can reach the server.
	if n := strings.Count(log.String(), "level=WARN"); n != 1 || !strings.Contains(log.String(), "a task can reach this tmux server") {
		t.Errorf("warnings logged, want the start's alone:\n%s", log.String())
	}
}

func TestHostileTitlesAndIdsStayArguments(t *testing.T) {
	s := newServer(t)
	var log logBuf
	release := t.TempDir() + "/done"
	v := Start(s.options(log.logger(), release))
	defer v.Close()
	id := `t-$(touch pwned)'"; x`
	v.Open(id, "rm #{host} #(id) $(id)\x1b[31m\nnext\u202eline", 1)
	var w string
	want := "rm #{host} #(id) $(id) [31m next line #1"
	testkit.WaitFor(t, "the window named "+want, func() bool { w = s.windowNamed("agent", want); return w != "" })
	testkit.WaitFor(t, "the id, as it is, in the window's output", func() bool { return strings.Contains(s.capture(w), "output of "+id+", attempt 1") })
}

func TestWindowName(t *testing.T) {
	for _, c := range []struct {
		title, id string
		n         int
		want      string
	}{
		{"fix flaky test", "t-1", 2, "fix flaky test ##2"},
		{"", "t-1", 1, "t-1 ##1"},
		{"  \t\n ", "t\x07-1", 1, "t-1 ##1"},
		{"issue #12", "t-1", 3, "issue ##12 ##3"},
		{strings.Repeat("é", 60), "t-1", 1, strings.Repeat("é", maxTitle-1) + "… ##1"},
	} {
		if got := WindowName(c.title, c.id, c.n); got != c.want {
			t.Errorf("WindowName(%q, %q, %d) = %q, want %q", c.title, c.id, c.n, got, c.want)
		}
	}
}

func TestNoTmuxIsOneLineAndNothingElse(t *testing.T) {
	var log logBuf
	v := Start(Options{Bin: "no-such-tmux-binary", Logger: log.logger(), Home: []string{"true"},
		Attempt: func(string, int) []string { return []string{"true"} }})
	if v != nil {
		t.Fatal("a view without tmux")
	}
	for n := 1; n <= 3; n++ {
		v.Open("t-1", "x", n)
	}
	v.Forget("t-1")
	v.Close()
	if got := strings.Count(log.String(), "\n"); got != 1 || !strings.Contains(log.String(), "no tmux binary") {
		t.Errorf("log = %q, want one line saying there is no tmux", log.String())
	}
}

func TestAKilledSessionIsMadeAgain(t *testing.T) {
	s := newServer(t)
	var log logBuf
	release := t.TempDir() + "/done"
	v := Start(s.options(log.logger(), release))
	defer v.Close()
	testkit.WaitFor(t, "the session", func() bool { return len(s.windows("agent")) == 1 })
	if _, err := s.run("kill-session", "-t", "=agent"); err != nil {
		t.Fatal(err)
	}
	v.Open("t-1", "after the kill", 1)
	testkit.WaitFor(t, "the window in a session made again", func() bool { return s.windowNamed("agent", "after the kill #1") != "" })
	if _, ok := nameSet(s.windows("agent"))["tasks"]; !ok {
		t.Errorf("windows = %v, want the home window back", s.windows("agent"))
	}
}

func TestAPersonsSessionKeepsItsWindows(t *testing.T) {
	s := newServer(t)
	if out, err := s.run("new-session", "-d", "-s", "agent", "-n", "mine", "--", "sleep", "600"); err != nil {
		t.Fatalf("new-session: %v: %s", err, out)
	}
	var log logBuf
	release := t.TempDir() + "/done"
	v := Start(s.options(log.logger(), release))
	v.Open("t-1", "into a person's session", 1)
	testkit.WaitFor(t, "the attempt's window", func() bool { return s.windowNamed("agent", "into a person's session #1") != "" })
	v.Close()
	got := nameSet(s.windows("agent"))
	if len(got) != 1 || !got["mine"] {
		t.Errorf("windows after Close = %v, want only the person's", got)
	}
}

func TestASessionAnEarlierRunLeftIsMadeAfresh(t *testing.T) {
	s := newServer(t)
	var log logBuf
	release := t.TempDir() + "/done"
	// As if an agent had crashed: its session, tagged as the owner's, stays.
	for _, args := range [][]string{
		{"new-session", "-d", "-s", "agent", "-n", "tasks", "--", "sleep", "600"},
		{"new-window", "-d", "-t", "=agent:", "-n", "left running #1", "--", "sleep", "600"},
		{"set-option", "-t", "=agent:", ownerOption, "test-owner"},
	} {
		if out, err := s.run(args...); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	second := Start(s.options(log.logger(), release))
	testkit.WaitFor(t, "the session made afresh", func() bool { return s.windowNamed("agent", "left running #1") == "" && len(s.windows("agent")) == 1 })
	second.Close()
	s.waitGone()
}

func nameSet(w map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, n := range w {
		out[n] = true
	}
	return out
}

func touch(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("touch", path).CombinedOutput(); err != nil {
		t.Fatal(fmt.Sprint(err, string(out)))
	}
}

// A task can reach the view's server through its socket and plant a
// session there: when the view started the server, Close ends the server
// whole, the planted session with it.
func TestCloseEndsTheServerItStartedWithWhatWasPlanted(t *testing.T) {
	s := newServer(t)
	var log logBuf
	v := Start(s.options(log.logger(), t.TempDir()+"/done"))
	if v == nil {
		t.Fatalf("no view: %s", log.String())
	}
	testkit.WaitFor(t, "the view's session", func() bool { _, err := s.run("has-session", "-t", "agent"); return err == nil })
	if out, err := s.run("new-session", "-d", "-s", "planted", "--", "sleep", "600"); err != nil {
		t.Fatalf("plant a session: %v %s", err, out)
	}
	v.Close()
	s.waitGone()
}
