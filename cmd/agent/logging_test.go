package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// At --log-level debug the agent says why it decided what it did: what a
// claim got, and how a failed attempt was judged (retried, then blocked
// by the gate after a side effect). The start banner names the real
// executor.
func TestDebugLogsExplainDecisions(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	ag := startAgentProc(t, c, t.TempDir(), "--log-level", "debug")
	retried := submit(t, c, "Summarize\n@fail rate_limit")
	gated := submit(t, c, "Deploy\n@side-effect wrote deploy.yaml\n@fail network\n@no-session")
	if v := c.waitDone(t, retried); v.Phase != state.PhaseCompleted {
		t.Fatalf("retried task ended %s", v.Phase)
	}
	if v := c.waitDone(t, gated); v.Phase != state.PhaseRecoverableFailed {
		t.Fatalf("gated task ended %s", v.Phase)
	}
	ag.stop()
	out := ag.output()
	for _, want := range []string{
		`"msg":"agent starting"`,
		`"executor":"exec (` + os.Args[0],
		`"msg":"claim answered"`,
		`"msg":"attempt judged","task":"` + retried + `","attempt":1,"code":"rate_limit","technically_retryable":true,"gate":"allowed","decision":"retried"`,
		`"msg":"attempt judged","task":"` + gated + `","attempt":1,"code":"network","technically_retryable":true,"gate":"side_effect","decision":"stopped"`,
		`"then":"recoverable_failed"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the debug log lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("agent log:\n%s", tail(out, 6000))
	}
}

func TestTokenMustBeOneToken(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "agent.toml")
	must(t, os.WriteFile(file, []byte("control-plane = \"x\"\nmodels = []\n"), 0o600))
	r := runAgent(t, "run", "--control-plane", "http://127.0.0.1:1", "--token-file", file, "--data-dir", t.TempDir(), "--executor", "sample")
	wantOneLineError(t, r, 1, "token file "+file+" does not hold one token")
	r = runAgentEnv(t, []string{"AGENT_TOKEN=two words"}, "submit", "--control-plane", "http://127.0.0.1:1", "--prompt", "x")
	wantOneLineError(t, r, 1, "AGENT_TOKEN does not hold one token")
}

// journalStream is JOURNAL_STREAM naming f, as systemd sets it.
func journalStream(t *testing.T, f *os.File) string {
	t.Helper()
	info, err := f.Stat()
	must(t, err)
	st := info.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", uint64(st.Dev), uint64(st.Ino))
}

// runLogged runs agent run against a control plane nobody serves, with
// an executor that is not there, its stderr the file log, until it has
// logged an error and a warning; then stops it and returns what it wrote.
func runLogged(t *testing.T, log *os.File, env ...string) string {
	t.Helper()
	cmd := agentCmd(context.Background(), env, "run", "--control-plane", "http://"+freeAddr(t), "--token-file", tokenFile(t),
		"--data-dir", t.TempDir(), "--executor", "exec", "--executor-command", "/nonexistent/cli")
	cmd.Stdout, cmd.Stderr = log, log
	must(t, cmd.Start())
	testkit.WaitFor(t, "a warning in the log", func() bool {
		b, _ := os.ReadFile(log.Name())
		return strings.Contains(string(b), "heartbeat failed")
	})
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent run: %v", err)
	}
	b, err := os.ReadFile(log.Name())
	must(t, err)
	return string(b)
}

// Under systemd's journal (JOURNAL_STREAM names stderr) auto is text
// with the journal's <N> priority on every line, no time of its own and
// no colour, so that journalctl -p warning filters by level; when the
// variable names another file (a child that inherited it), auto is JSON.
func TestLogFormatOnJournal(t *testing.T) {
	t.Parallel()
	log, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	must(t, err)
	defer log.Close()
	out := runLogged(t, log, "JOURNAL_STREAM="+journalStream(t, log))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	prefix := regexp.MustCompile(`^<([3467])>(ERR|WRN|INF|DBG) `)
	want := map[string]string{"3": "ERR", "4": "WRN", "6": "INF", "7": "DBG"}
	seen := map[string]bool{}
	for _, l := range lines {
		m := prefix.FindStringSubmatch(l)
		if m == nil || want[m[1]] != m[2] {
			t.Errorf("line without a matching journal priority: %q", l)
			continue
		}
		seen[m[1]] = true
		if regexp.MustCompile(`\d\d:\d\d:\d\d`).MatchString(l[:min(len(l), 30)]) || strings.Contains(l, "\x1b[") {
			t.Errorf("journal line with a time or colour: %q", l)
		}
	}
	for _, p := range []string{"3", "4", "6"} {
		if !seen[p] {
			t.Errorf("no line at priority %s in:\n%s", p, out)
		}
	}
	if !strings.Contains(out, "<3>ERR the executor cannot start") || !strings.Contains(out, "<4>WRN heartbeat failed") {
		t.Errorf("the error and the warning are not at their priorities:\n%s", out)
	}

	other, err := os.Create(filepath.Join(t.TempDir(), "other"))
	must(t, err)
	defer other.Close()
	log2, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	must(t, err)
	defer log2.Close()
	out = runLogged(t, log2, "JOURNAL_STREAM="+journalStream(t, other))
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(l, `{"time":"`) {
			t.Errorf("JOURNAL_STREAM naming another file: want JSON lines, got %q", l)
		}
	}
}
