package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// runHint runs a command a view printed, as a person pasting it would:
// through sh, from dir, with the test binary standing in for the agent
// (AGENT_TEST_BE_AGENT) and no config file of the person running the
// tests. Nothing is substituted here: the caller substitutes only what
// the hint itself says to.
func runHint(t *testing.T, dir, command string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENT_TEST_BE_AGENT=1", "GORACE=atexit_sleep_ms=0", "AGENT_CONFIG=", "AGENT_CP_CONFIG=", "AGENT_TOKEN=", "AGENT_CONTROL_PLANE=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); err != nil {
		if !errors.As(err, &ee) {
			t.Fatalf("sh -c %q: %v", command, err)
		}
		code = ee.ExitCode()
	}
	return result{out.String(), errb.String(), code}
}

// hintAfter is the command printed after marker in out: the rest of the
// marker's line, or, when the view broke the command over lines ending in
// " \", those lines as they are (the shell joins them).
func hintAfter(t *testing.T, out, marker string) string {
	t.Helper()
	i := strings.Index(out, marker)
	if i < 0 {
		t.Fatalf("no %q in:\n%s", marker, out)
	}
	rest := strings.SplitAfter(out[i+len(marker):], "\n")
	command := strings.TrimSpace(rest[0])
	if command != "" {
		return command
	}
	var lines []string
	for _, l := range rest[1:] {
		l = strings.TrimRight(l, "\n ")
		lines = append(lines, strings.TrimSpace(l))
		if !strings.HasSuffix(l, `\`) {
			break
		}
	}
	return strings.Join(lines, "\n")
}

// TestEveryHintWorksAsPrinted collects the commands the views suggest, in
// the context each is printed in, and runs them against a real control
// plane and agent: tasks show's retry and continue (with the control
// plane flags given, and without, where the hint names placeholders),
// the watch screen's retry (in a terminal), and the demo's closing lines
// (run as bin/agent, as make demo does). Each must exit 0 and do what it
// says. The reply hint needs a real CLI's approval request; the watch
// renders it through the same hint.tasks as retry.
func TestEveryHintWorksAsPrinted(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir)
	cpArgs := []string{"--control-plane", c.url(), "--token-file", c.operatorFile}
	stopped := func() string {
		return submit(t, c, "Rotate the staging credentials\n@side-effect rotated the staging key\n@fail network\n@no-session")
	}
	blockedShow, blockedBare, blockedWatch := stopped(), stopped(), stopped()
	failed := submit(t, c, "Migrate the billing database\n@side-effect applied migration 0042\n@fail quota")
	for _, id := range []string{blockedShow, blockedBare, blockedWatch} {
		waitLocalPhase(t, dataDir, id, state.PhaseRecoverableFailed)
	}
	waitLocalPhase(t, dataDir, failed, state.PhaseFailed)
	here := t.TempDir()
	ran := 0
	mustRun := func(what, dir, command string) {
		t.Helper()
		ran++
		if strings.Contains(command, "URL") || strings.Contains(command, "FILE") {
			t.Fatalf("%s: a placeholder left in %q", what, command)
		}
		if r := runHint(t, dir, command); r.code != 0 {
			t.Fatalf("%s: %q exited %d: %s%s", what, command, r.code, r.stdout, r.stderr)
		}
	}
	completes := func(id string) {
		t.Helper()
		c.waitPhase(t, id, "completed after the hint", func(p state.Phase) bool { return p == state.PhaseCompleted })
	}

	t.Run("tasks show with the control plane given", func(t *testing.T) {
		r := runAgent(t, append([]string{"tasks", "show", blockedShow, "--data-dir", dataDir}, cpArgs...)...)
		retry := hintAfter(t, r.stdout, "run it again with:")
		if strings.Contains(r.stdout, "(with ") {
			t.Errorf("placeholders explained where every value was known:\n%s", r.stdout)
		}
		mustRun("show's retry", here, retry)
		completes(blockedShow)
		r = runAgent(t, append([]string{"tasks", "show", failed, "--remote"}, cpArgs...)...)
		mustRun("show's continue", here, hintAfter(t, r.stdout, "session with:"))
		completes(failed)
	})

	t.Run("tasks show without the control plane", func(t *testing.T) {
		r := runAgent(t, "tasks", "show", blockedBare, "--data-dir", dataDir)
		retry := hintAfter(t, r.stdout, "run it again with:")
		// The hint says what URL and FILE stand for; that is all that is
		// substituted.
		if !strings.Contains(r.stdout, "(with URL the control plane's address; FILE a file holding a person's token") {
			t.Fatalf("the placeholders are not explained:\n%s", r.stdout)
		}
		retry = strings.Replace(retry, " URL", " "+c.url(), 1)
		retry = strings.Replace(retry, " FILE", " "+c.operatorFile, 1)
		mustRun("show's retry, placeholders filled", here, retry)
		completes(blockedBare)
	})

	t.Run("the watch screen", func(t *testing.T) {
		tmux, err := exec.LookPath("tmux")
		if err != nil {
			t.Fatal("tmux is not installed: these machines have it, and the test drives a real terminal with it")
		}
		sock := filepath.Join(t.TempDir(), "tmux.sock")
		t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
		shell := fmt.Sprintf("env AGENT_TEST_BE_AGENT=1 AGENT_CONFIG= %q tasks watch --recent 10 --data-dir %q --control-plane %q --token-file %q",
			os.Args[0], dataDir, c.url(), c.operatorFile)
		// Narrow, so that the command is broken over lines, not cut.
		if out, err := exec.Command(tmux, "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "70", "-y", "60", "sh", "-c", shell).CombinedOutput(); err != nil {
			t.Fatalf("tmux: %v: %s", err, out)
		}
		var screen string
		testkit.WaitFor(t, "the watch to show the stopped task", func() bool {
			out, _ := exec.Command(tmux, "-S", sock, "capture-pane", "-p", "-t", "w").CombinedOutput()
			screen = string(out)
			return strings.Contains(screen, blockedWatch) && strings.Contains(screen, "a person decides:")
		})
		if regexp.MustCompile(`\d+ queued`).MatchString(screen) {
			t.Errorf("the local watch counts a queue it cannot see:\n%s", screen)
		}
		retry := hintAfter(t, screen, "a person decides:")
		if !strings.Contains(retry, blockedWatch) || !strings.Contains(retry, "\\\n") {
			t.Fatalf("the watch's hint is not the stopped task's, broken over lines: %q\n%s", retry, screen)
		}
		mustRun("watch's retry", here, retry)
		completes(blockedWatch)
	})

	t.Run("the demo's closing lines, run as bin/agent", func(t *testing.T) {
		demoDir := t.TempDir()
		must(t, os.Mkdir(filepath.Join(demoDir, "bin"), 0o755))
		must(t, os.Symlink(os.Args[0], filepath.Join(demoDir, "bin", "agent")))
		r := runHint(t, demoDir, "bin/agent demo --data-dir demo-data")
		if r.code != 0 {
			t.Fatalf("demo: %+v", r)
		}
		_, try, ok := strings.Cut(r.stdout, "Try:\n")
		if !ok {
			t.Fatalf("the demo suggests nothing:\n%s", r.stdout)
		}
		var n int
		for _, l := range strings.Split(strings.TrimSpace(try), "\n") {
			l = strings.TrimSpace(l)
			if !strings.HasPrefix(l, "bin/agent ") {
				t.Errorf("the demo's hint %q does not start with the binary as invoked", l)
				continue
			}
			mustRun("demo's "+l, demoDir, l)
			n++
		}
		if n != 3 {
			t.Errorf("ran %d of the demo's hints, want 3:\n%s", n, try)
		}
	})
	if ran == 0 {
		t.Fatal("no hint was run")
	}
}
