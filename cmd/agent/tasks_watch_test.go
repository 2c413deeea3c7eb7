package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/taskfollow"
	"github.com/edgeagent/agent/internal/testkit"
)

// followLimit is how long a test waits for a follow to show something
// before it gives up: generous, for a slow shared machine.
const followLimit = 90 * time.Second

// lineProc is a command whose stdout a test reads line by line.
type lineProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	seen  []string
}

// startLines starts the agent with args, its stdout a pipe; with
// stderr, its stderr goes in the same pipe.
func startLines(t *testing.T, stderr bool, args ...string) *lineProc {
	t.Helper()
	cmd := agentCmd(context.Background(), nil, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if stderr {
		cmd.Stderr = cmd.Stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &lineProc{t: t, cmd: cmd, lines: make(chan string, 1000)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for range p.lines {
		}
		if t.Failed() {
			t.Logf("%v printed:\n%s", args, strings.Join(p.seen, "\n"))
		}
	})
	return p
}

// expect reads lines until one matches re, and returns it.
func (p *lineProc) expect(re string) string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	limit := time.After(followLimit)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("the output ended without a line matching %q", re)
			}
			p.seen = append(p.seen, l)
			if rx.MatchString(l) {
				return l
			}
		case <-limit:
			p.t.Fatalf("no line matching %q within %s", re, followLimit)
		}
	}
}

// rest reads the lines left once the command has ended.
func (p *lineProc) rest() []string {
	var out []string
	for l := range p.lines {
		p.seen = append(p.seen, l)
		out = append(out, l)
	}
	return out
}

// waitDataDir waits until the agent has made its task store.
func waitDataDir(t *testing.T, dataDir string) {
	t.Helper()
	testkit.WaitFor(t, "the agent's task store", func() bool {
		_, err := os.Stat(datadir.Layout{Dir: dataDir}.Tasks())
		return err == nil
	})
}

// Piped, tasks watch prints a line per change: the progress as the task
// runs, then its end with the attempt timeline.
func TestTasksWatchPrintsALinePerChange(t *testing.T) {
	t.Parallel()
	for _, remote := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "remote"}[remote], func(t *testing.T) {
			c := startCP(t, freeAddr(t), t.TempDir())
			dataDir := t.TempDir()
			startAgentProc(t, c, dataDir)
			waitDataDir(t, dataDir)
			args := []string{"tasks", "watch", "--data-dir", dataDir}
			if remote {
				args = []string{"tasks", "watch", "--remote", "--control-plane", c.url(), "--token-file", c.operatorFile}
			}
			w := startLines(t, false, args...)
			gate := filepath.Join(t.TempDir(), "gate")
			id := submit(t, c, "Fix the flaky test\n@progress 2\n@wait-file "+gate+"\n@output \x1b[31mfixed")
			w.expect(regexp.QuoteMeta(id) + `  Fix the flaky test +turn_started  step 2 of 2 \(100%\)$`)
			must(t, os.WriteFile(gate, nil, 0o600))
			w.expect(regexp.QuoteMeta(id) + `  Fix the flaky test +completed`)
			w.expect(`^    Attempt 1/3  completed  model-a `)
			w.cmd.Process.Signal(syscall.SIGTERM)
			if err := w.cmd.Wait(); err != nil {
				t.Errorf("tasks watch ended with %v, want exit 0 on SIGTERM", err)
			}
			for _, l := range append(w.rest(), w.seen...) {
				if strings.ContainsRune(l, '\x1b') {
					t.Errorf("an escape sequence reached the output: %q", l)
				}
			}
		})
	}
}

// tasks logs -f waits for a task the agent has not claimed yet, shows its
// output with its progress, and stops after the line of its final phase.
func TestTasksLogsFollowWaitsAndEndsWithTheFinalPhase(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--max-concurrent", "1", "--max-retries", "0")
	gate, gate2 := filepath.Join(t.TempDir(), "gate"), filepath.Join(t.TempDir(), "gate2")
	first := submit(t, c, "@wait-file "+gate+"\n@output first")
	waitLocalPhase(t, dataDir, first, "turn_started")
	// The one slot is taken: the second task stays queued, unknown here.
	second := submit(t, c, "@progress 2\n@wait-file "+gate2+"\n@output hello \x1b]0;title\x07\n@fail quota")
	if r := runAgent(t, "tasks", "logs", second, "--data-dir", dataDir); r.code != 1 {
		t.Errorf("tasks logs of a task not here yet, without -f: %+v", r)
	}
	logs := startLines(t, true, "tasks", "logs", second, "-f", "--data-dir", dataDir)
	logs.expect(`^agent: waiting for task ` + second + `: the agent in .* has not claimed it yet$`)
	must(t, os.WriteFile(gate, nil, 0o600))
	logs.expect(`^-- turn_started  step 2 of 2 \(100%\)$`)
	must(t, os.WriteFile(gate2, nil, 0o600))
	// The title escape is dropped (state.PlainText): nothing reaches the
	// terminal, and the text is shown.
	logs.expect(`output +hello $`)
	logs.expect(`^-- failed  quota: `)
	if err := logs.cmd.Wait(); err != nil {
		t.Fatalf("tasks logs -f: %v", err)
	}
	if rest := logs.rest(); len(rest) != 0 {
		t.Errorf("lines after the final phase: %q", rest)
	}
	if v := c.waitDone(t, second); v.Phase != "failed" {
		t.Errorf("control plane: %s, want failed", v.Phase)
	}
}

// On a terminal, tasks watch draws the board in place on the alternate
// screen: the running task's progress card, then its end with the
// timeline; q (or Ctrl-C) ends it and gives the terminal back as it was.
func TestTasksWatchOnATerminal(t *testing.T) {
	t.Parallel()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux is not installed: these machines have it, and the test drives a real terminal with it")
	}
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	waitDataDir(t, dataDir)
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	// The pane runs the watch, then says how it ended and how the terminal
	// is set, and stays open (cat waits on the terminal) so that its modes
	// can be read: a dead pane's are tmux's own. The shell traps SIGINT so
	// that Ctrl-C ends only the watch.
	start := func(session string) {
		t.Helper()
		shell := fmt.Sprintf("trap : INT; env AGENT_TEST_BE_AGENT=1 AGENT_CONFIG= GORACE=atexit_sleep_ms=0 %q tasks watch --data-dir %q; echo watch-exited-$?; stty -a; echo end-of-pane; exec cat",
			os.Args[0], dataDir)
		tm("new-session", "-d", "-s", session, "-x", "100", "-y", "40", "sh", "-c", shell)
	}
	screen := func(session, what string, ok func(string) bool) string {
		t.Helper()
		var s string
		testkit.WaitFor(t, what, func() bool {
			s = tm("capture-pane", "-p", "-S", "-", "-t", session)
			return ok(s)
		})
		return s
	}
	flags := func(session string) string {
		return strings.TrimSpace(tm("display-message", "-p", "-t", session, "#{alternate_on} #{cursor_flag}"))
	}
	restored := func(session string) {
		t.Helper()
		s := screen(session, "the watch to exit", func(s string) bool { return strings.Contains(s, "end-of-pane") })
		if !strings.Contains(s, "watch-exited-0") {
			t.Errorf("the watch did not exit 0:\n%s", s)
		}
		if strings.Contains(s, "[>] Working") || strings.Contains(s, "q to quit") {
			t.Errorf("the board is still on the screen after the watch ended:\n%s", s)
		}
		if f := flags(session); f != "0 1" {
			t.Errorf("alternate screen and cursor after the watch: %q, want the main screen and a visible cursor (0 1)", f)
		}
		if !regexp.MustCompile(`(^|\s)icanon\s`).MatchString(s) || !regexp.MustCompile(`(^|\s)echo\s`).MatchString(s) {
			t.Errorf("the terminal modes were not restored (want icanon and echo):\n%s", s)
		}
	}

	t.Run("q", func(t *testing.T) {
		start("q")
		screen("q", "the board's header", func(s string) bool { return strings.Contains(s, "q to quit") })
		if f := flags("q"); f != "1 0" {
			t.Errorf("alternate screen and cursor while watching: %q, want 1 0", f)
		}
		gate := filepath.Join(t.TempDir(), "gate")
		id := submit(t, c, "Fix the flaky test\n@progress 3\n@wait-file "+gate+"\n@output fixed")
		s := screen("q", "the running task's progress card", func(s string) bool {
			return strings.Contains(s, "[x] Claimed  [x] Starting executor  [>] Working  [ ] Waiting for reply  [ ] Completing  [ ] Done") &&
				strings.Contains(s, "100%  step 3 of 3")
		})
		if !strings.Contains(s, id+"  Fix the flaky test  ·  turn_started  ·  attempt 1/3 with model-a") || !strings.Contains(s, "1 running") {
			t.Errorf("the running task is not shown as a person expects:\n%s", s)
		}
		must(t, os.WriteFile(gate, nil, 0o600))
		s = screen("q", "the task's end with its timeline", func(s string) bool {
			return strings.Contains(s, id+"  Fix the flaky test  ·  completed") && strings.Contains(s, "Attempt 1/3  completed  model-a")
		})
		if strings.Contains(s, "[>] Working") || !strings.Contains(s, "0 running") {
			t.Errorf("the ended task is still shown running:\n%s", s)
		}
		tm("send-keys", "-t", "q", "q")
		restored("q")
	})
	t.Run("ctrl-c", func(t *testing.T) {
		start("c")
		screen("c", "the board's header", func(s string) bool { return strings.Contains(s, "q to quit") })
		tm("send-keys", "-t", "c", "C-c")
		restored("c")
	})
}

// tasks watch --until-done ends, exit 0, once no task is left running;
// --timeout bounds that wait with exit 7, the tasks going on.
func TestTasksWatchUntilDone(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	waitDataDir(t, dataDir)
	gate := filepath.Join(t.TempDir(), "gate")
	id := submit(t, c, "Hold on\n@wait-file "+gate+"\n@output done")
	waitLocalPhase(t, dataDir, id, "turn_started")
	for _, args := range [][]string{{"--data-dir", dataDir}, {"--remote", "--control-plane", c.url(), "--token-file", c.operatorFile}} {
		r := runAgent(t, append([]string{"tasks", "watch", "--until-done", "--timeout", "500ms"}, args...)...)
		if r.code != taskfollow.ExitWaitTimeout || !strings.Contains(r.stderr, "--timeout 500ms passed; 1 tasks had not ended (they go on)") {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, r.code, taskfollow.ExitWaitTimeout, r.stdout, r.stderr)
		}
	}
	if v := c.task(t, id); v.Phase.Terminal() {
		t.Fatalf("the watch's timeout ended the task: %s", v.Phase)
	}
	w := startLines(t, false, "tasks", "watch", "--until-done", "--data-dir", dataDir)
	w.expect(regexp.QuoteMeta(id) + `  Hold on +turn_started`)
	must(t, os.WriteFile(gate, nil, 0o600))
	w.expect(`^    Attempt 1/3  completed  `)
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("tasks watch --until-done ended with %v, want exit 0 once the task ended", err)
	}
	if r := runAgent(t, "tasks", "watch", "--timeout", "1s", "--data-dir", dataDir); r.code != 2 || !strings.Contains(r.stderr, "--timeout bounds --until-done") {
		t.Errorf("--timeout without --until-done: exit %d\n%s", r.code, r.stderr)
	}
}
