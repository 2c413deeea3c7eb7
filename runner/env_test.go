package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// The executor's environment is an allowlist: the agent's token and the
// service manager's variables never reach it; what the operator names
// does.
func TestExecutorEnvironmentIsAnAllowlist(t *testing.T) {
	t.Setenv("AGENT_TOKEN", "secret-token-123")
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("SOME_OTHER_SECRET", "hunter2")
	t.Setenv("MY_TOOL_HOME", "/opt/tool")
	t.Setenv("LANG", "C.UTF-8")
	exe, err := exec.New(exec.Config{Argv: []string{"/usr/bin/env"}, EnvPass: []string{"MY_TOOL_*"}, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "")
	f.Run(t, context.Background())
	env := strings.Join(f.Rec.Logs(), "\n")
	for _, gone := range []string{"secret-token-123", "NOTIFY_SOCKET", "WATCHDOG_USEC", "hunter2"} {
		if strings.Contains(env, gone) {
			t.Errorf("the executor's environment holds %s:\n%s", gone, env)
		}
	}
	for _, kept := range []string{"stdout: PATH=", "stdout: LANG=C.UTF-8", "stdout: MY_TOOL_HOME=/opt/tool", "stdout: AGENT_TASK_ID=t-1", "stdout: AGENT_ATTEMPT=1", "stdout: " + proc.MarkEnv + "="} {
		if !strings.Contains(env, kept) {
			t.Errorf("the executor's environment lacks %s:\n%s", kept, env)
		}
	}
}

// The runner's Env (the task token and where to use it) reaches the
// executor over the agent's own variables of the same name, and cannot
// carry the agent's token.
func TestTaskEnvironmentReachesTheExecutor(t *testing.T) {
	t.Setenv("AGENT_TOKEN", "secret-token-123")
	exe, err := exec.New(exec.Config{Argv: []string{"/usr/bin/env"}, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "")
	f.Runner.Env = []string{"AGENT_TASK_TOKEN=tt_t-1.lease-1.abc", "PATH=/opt/agent/bin:/usr/bin:/bin", "AGENT_TOKEN=leaked"}
	f.Run(t, context.Background())
	env := strings.Join(f.Rec.Logs(), "\n")
	if !strings.Contains(env, "stdout: AGENT_TASK_TOKEN=tt_t-1.lease-1.abc") || !strings.Contains(env, "stdout: PATH=/opt/agent/bin:/usr/bin:/bin") {
		t.Errorf("the executor's environment lacks the task's variables:\n%s", env)
	}
	if strings.Count(env, "stdout: PATH=") != 1 || strings.Contains(env, "AGENT_TOKEN=") {
		t.Errorf("PATH twice, or the agent's token:\n%s", env)
	}
}

func TestEnvNamesCannotPassTheAgentsSecrets(t *testing.T) {
	for _, c := range []struct {
		names []string
		ok    bool
	}{
		{[]string{"OPENAI_API_KEY", "MY_*"}, true},
		{[]string{"AGENT_TOKEN"}, false},
		{[]string{"AGENT_*"}, false},
		{[]string{"NOTIFY_*"}, false},
		{[]string{"*"}, false},
		{[]string{"A=B"}, false},
	} {
		t.Run(strings.Join(c.names, ","), func(t *testing.T) {
			if err := runner.CheckEnvNames(c.names); (err == nil) != c.ok {
				t.Errorf("CheckEnvNames(%v) = %v, want ok %v", c.names, err, c.ok)
			}
		})
	}
}

// A CLI that is not installed makes the executor unavailable at once.
func TestMissingCLIIsUnavailable(t *testing.T) {
	for name, exe := range map[string]func() (runner.Executor, error){
		"codex": func() (runner.Executor, error) {
			return codex.New(codex.Config{Base: cli.Base{Bin: "/nonexistent/codex"}})
		},
		"claude": func() (runner.Executor, error) {
			return claude.New(claude.Config{Base: cli.Base{Bin: "/nonexistent/claude"}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := exe()
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Probe(context.Background()); err == nil {
				t.Fatal("Probe found a binary that is not there")
			}
			f := runnertest.NewFixture(t, e, "hello")
			f.Run(t, context.Background())
			a := f.Task.Attempts[0]
			if a.Error == nil || a.Error.Code != "executor_not_found" || len(f.Task.Attempts) != 1 {
				t.Fatalf("attempts %s, want one executor_not_found", runnertest.AttemptsText(f.Task))
			}
			if g := f.Health.Snapshot().Grade; g != "unavailable" {
				t.Errorf("health %s, want unavailable", g)
			}
		})
	}
}

// A binary given by a relative path is found although the attempt runs in
// its own work directory.
func TestRelativeBinaryRunsInTheWorkDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cli"), []byte("#!/bin/sh\necho '{\"type\":\"result\",\"summary\":\"ran\"}'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	exe, err := exec.New(exec.Config{Argv: []string{"./cli"}})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "")
	f.Runner.WorkRoot = t.TempDir()
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s: %s", f.Task.Phase, runnertest.AttemptsText(f.Task))
	}
}

// What the runner withholds (a forge's token the agent opens pull
// requests with) reaches no executor, even one whose allowlist or
// explicit variables name it.
func TestWithheldVariablesReachNoExecutor(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_withheld0123456789")
	t.Setenv("GITHUB_HOST", "github.com")
	exe, err := exec.New(exec.Config{Argv: []string{"/usr/bin/env"}, EnvPass: []string{"GITHUB_*"}, Env: []string{"GITLAB_TOKEN=glpat-set"}, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "")
	f.Runner.Withhold = []string{"GITHUB_TOKEN", "GITLAB_TOKEN"}
	f.Run(t, context.Background())
	env := strings.Join(f.Rec.Logs(), "\n")
	if strings.Contains(env, "ghp_withheld") || strings.Contains(env, "glpat-set") {
		t.Errorf("a withheld token reached the executor:\n%s", env)
	}
	if !strings.Contains(env, "stdout: GITHUB_HOST=github.com") {
		t.Errorf("the allowlist's other variable is gone:\n%s", env)
	}
}
