package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/outbox"
)

// TestMain makes the test binary the agent itself when asked to, so that
// tests run the real command line in a real process.
func TestMain(m *testing.M) {
	keeper.Main() // attempts run under a keeper: this test binary is it
	// The test binary is the agent, and the sample executor the agent
	// starts (as os.Executable sample-executor, with the executor's
	// environment allowlist, which does not carry AGENT_TEST_BE_AGENT);
	// the agent subtask commands an executor runs ($AGENT_BIN); and
	// Claude Code's permission prompt tool (claude-approval-mcp), which
	// Claude Code starts.
	if os.Getenv("AGENT_TEST_BE_AGENT") == "1" || len(os.Args) > 1 && (os.Args[1] == "sample-executor" || os.Args[1] == "subtask" || os.Args[1] == "claude-approval-mcp") {
		main()
		return
	}
	// pgtest.Run stops the shared PostgreSQL cluster the store's tests
	// started, if any, before the check for leaked goroutines.
	code := pgtest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// agentCmd prepares the agent as a subprocess.
func agentCmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	// The race detector would sleep a second at every clean exit. A config
	// file of the person running the tests is not read (AGENT_CONFIG empty).
	cmd.Env = append(append(os.Environ(), "AGENT_TEST_BE_AGENT=1", "GORACE=atexit_sleep_ms=0", "AGENT_CONFIG=", "AGENT_CP_CONFIG="), env...)
	return cmd
}

// runAgent runs the agent to completion.
func runAgent(t *testing.T, args ...string) result {
	t.Helper()
	return runAgentEnv(t, nil, args...)
}

// runAgentEnv runs the agent to completion with more environment.
func runAgentEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runAgentWithin(t, 2*time.Minute, env, args...)
}

// runAgentWithin runs the agent to completion with more environment,
// killed after limit: a guard against a hang, for a command that takes
// long on a loaded machine.
func runAgentWithin(t *testing.T, limit time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := agentCmd(ctx, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agent %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// wantOneLineError checks the shape every failure has: exit code, one line
// on stderr starting "agent: ", nothing on stdout.
func wantOneLineError(t *testing.T, r result, code int, contains string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "agent: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr is not one line starting with 'agent: ': %q", r.stderr)
	}
	if !strings.Contains(r.stderr, contains) {
		t.Errorf("stderr %q does not say %q", r.stderr, contains)
	}
	if r.stdout != "" {
		t.Errorf("stdout on failure: %q", r.stdout)
	}
}

// seedOutbox makes a data directory whose outbox holds records in every
// state: seqs 1-2 sent, 3 dead, 4 failed once, 5 pending.
func seedOutbox(t *testing.T) string {
	t.Helper()
	dataDir := t.TempDir()
	o, err := outbox.Open(outboxview.Dir(dataDir), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	kinds := []outbox.Kind{outbox.KindPhase, outbox.KindProgress, outbox.KindComplete, outbox.KindLog, outbox.KindProgress}
	for i, k := range kinds {
		task := "t-1"
		if i >= 3 {
			task = "t-2"
		}
		if _, err := o.Append(outbox.Record{Kind: k, TaskID: task, Attempt: 1, Payload: json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	must(t, o.MarkSent(1, 2))
	must(t, o.MarkDead("terminal", 3))
	must(t, o.MarkFailed("dial tcp 127.0.0.1:9: connection refused", 4))
	return dataDir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"outbox", "ls", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"outbox", "ls", "extra-arg"}, "takes no arguments"},
		{[]string{"outbox", "ls", "--kind", "Chat!"}, "Chat!"},
		{[]string{"no-such-command"}, `unknown command "no-such-command"`},
		{[]string{"taks"}, "Did you mean this? tasks"},
		{[]string{"tasks", "lss"}, `unknown command "lss" for "agent tasks"; did you mean logs or ls?`},
		{[]string{"outbox", "stast"}, `did you mean stats?`},
		{[]string{"config", "chek"}, `did you mean check?`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runAgent(t, tc.args...)
			wantOneLineError(t, r, 2, tc.want)
		})
	}
	// A group without a subcommand shows its help.
	if r := runAgent(t, "tasks"); r.code != 0 || !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("agent tasks: %+v", r)
	}
}

// agent version and agent --version print the same line: the version,
// the platform and the Go it was built with. (The README's test checks it
// on a binary built with a version, as make build makes one.)
func TestVersion(t *testing.T) {
	t.Parallel()
	want := "agent dev " + runtime.GOOS + "/" + runtime.GOARCH + " " + runtime.Version() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		if r := runAgent(t, args...); r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("agent %s: %+v, want %q", args[0], r, want)
		}
	}
}

// agent health says unavailable in its exit code, for scripts.
func TestHealthExitsOneWhenUnavailable(t *testing.T) {
	t.Parallel()
	for grade, code := range map[string]int{"available": 0, "degraded": 0, "unavailable": 1} {
		t.Run(grade, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.WriteFile(filepath.Join(dir, "health.json"), []byte(`{"executor":"codex","grade":"`+grade+`","agent_id":"a"}`), 0o600))
			r := runAgent(t, "health", "--data-dir", dir)
			if r.code != code || !strings.Contains(r.stdout, "grade:          "+grade) || r.stderr != "" {
				t.Fatalf("exit %d, want %d: %+v", r.code, code, r)
			}
		})
	}
}
