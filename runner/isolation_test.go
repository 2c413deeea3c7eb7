package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/runner/runnertest"
	"github.com/edgeagent/agent/state"
)

// agentFiles lays out what a hostile task goes for: a data directory with
// the agent's token, a config file and the registration secret's file,
// each with a known content. The work root is in the data directory, as
// the agent has it.
type agentFiles struct {
	data, token, config, secret, pid, workRoot string
}

func newAgentFiles(t *testing.T) agentFiles {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := agentFiles{data: filepath.Join(root, "data"), config: filepath.Join(root, "agent.toml"), secret: filepath.Join(root, "registration-token")}
	f.token, f.pid, f.workRoot = filepath.Join(f.data, "agent-token"), filepath.Join(f.data, "agent.pid"), filepath.Join(f.data, "work")
	if err := os.MkdirAll(filepath.Join(f.workRoot, "other-task"), 0o700); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{f.token: "agent-token-content", f.config: "[executor]\nkind = \"exec\"\n",
		f.secret: "registration-secret-content", f.pid: "4242\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f agentFiles) isolation() *runner.Isolation {
	return &runner.Isolation{Deny: []string{f.data, f.config, f.secret}}
}

// attack is what a prompt-injected task tries, as one shell script: read
// each secret into its work directory, write the config, the pid file and
// the data directory, and signal the agent (this test process).
func (f agentFiles) attack() string {
	return `cat ` + f.token + ` > stolen-token; cat ` + f.secret + ` > stolen-secret; ` +
		`echo 'command = "evil"' >> ` + f.config + `; echo 1 > ` + f.pid + `; ` +
		`echo planted > ` + filepath.Join(f.data, "tasks-planted.json") + `; ` +
		`echo x > ` + filepath.Join(f.workRoot, "other-task", "planted") + `; ` +
		`kill -0 ` + strconv.Itoa(os.Getpid()) + ` && echo yes > signalled-agent; pwd > where; echo done`
}

// check fails the test for every part of the attack that worked.
func (f agentFiles) check(t *testing.T, workDir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(workDir, "signalled-agent")); err == nil {
		t.Errorf("the task could signal the agent")
	}
	for _, stolen := range []string{"stolen-token", "stolen-secret"} {
		if b, _ := os.ReadFile(filepath.Join(workDir, stolen)); len(b) > 0 {
			t.Errorf("the task read a secret into %s: %q", stolen, b)
		}
	}
	if b, _ := os.ReadFile(f.config); strings.Contains(string(b), "evil") {
		t.Errorf("the task rewrote the config file: %q", b)
	}
	if b, _ := os.ReadFile(f.pid); string(b) != "4242\n" {
		t.Errorf("the task rewrote the pid file: %q", b)
	}
	for _, p := range []string{filepath.Join(f.data, "tasks-planted.json"), filepath.Join(f.workRoot, "other-task", "planted")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the task wrote %s", p)
		}
	}
}

// An exec task that tries, from its shell, everything a prompt injection
// would: it reads no secret, writes nothing of the agent's, cannot stop the
// agent, and runs in its own work directory.
func TestAConfinedExecTaskReachesNothingOfTheAgents(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	files := newAgentFiles(t)
	exe, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", files.attack()}})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "attack")
	f.Runner.WorkRoot, f.Runner.Isolation = files.workRoot, files.isolation()
	f.Run(t, context.Background())
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s (%s): logs %v", f.Task.Phase, f.Task.PhaseReason, f.Rec.Logs())
	}
	work := filepath.Join(files.workRoot, f.Task.ID)
	files.check(t, work)
	if b, _ := os.ReadFile(filepath.Join(work, "where")); strings.TrimSpace(string(b)) != work {
		t.Errorf("the attempt ran in %q, not its work directory %s", b, work)
	}
	if entries, _ := os.ReadDir(filepath.Join(files.workRoot, ".tmp")); len(entries) > 0 {
		t.Errorf("the attempt's temporary directory outlived it: %v", entries)
	}
}

// Every attempt of an exec executor runs in its task's work directory,
// confined or not.
func TestAnExecAttemptRunsInItsWorkDirectory(t *testing.T) {
	exe, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", "pwd > where"}})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "where")
	f.Runner.WorkRoot = t.TempDir()
	f.Run(t, context.Background())
	work := filepath.Join(f.Runner.WorkRoot, f.Task.ID)
	b, err := os.ReadFile(filepath.Join(work, "where"))
	if err != nil {
		t.Fatalf("the attempt left nothing in its work directory %s: %v", work, err)
	}
	if real, _ := filepath.EvalSymlinks(work); strings.TrimSpace(string(b)) != real {
		t.Errorf("the attempt ran in %q, not %s", b, real)
	}
}

// A task that starts a process in a session of its own, without the
// attempt's mark in its environment, does not leave it running after the
// attempt.
func TestAProcessInItsOwnSessionWithoutTheMarkDiesWithItsAttempt(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "escaped")
	script := `env -u ` + proc.MarkEnv + ` setsid sh -c 'echo $$ > ` + pidFile + `; exec sleep 1000' </dev/null >/dev/null 2>&1 &
		while [ ! -s ` + pidFile + ` ]; do sleep 0.01; done; echo started`
	exe, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "escape")
	f.Runner.WorkRoot = t.TempDir()
	f.Run(t, context.Background())
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the task did not start its process: %v; logs %v", err, f.Rec.Logs())
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("process %d, in a session of its own without the mark, outlived its attempt", pid)
	}
}

// The real CLIs, prompt-injected: the mock model has their shell tool run
// the attack. Neither reads a secret or writes the agent's files.
func TestAConfinedCLIsShellReachesNothingOfTheAgents(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	for _, c := range []struct {
		name string
		exe  func(*testing.T, *mockmodel.Server) runner.Executor
	}{
		{"codex", func(t *testing.T, m *mockmodel.Server) runner.Executor {
			return runnertest.CodexExec(t, m, codex.Config{})
		}},
		{"codex workspace-write", func(t *testing.T, m *mockmodel.Server) runner.Executor {
			return runnertest.CodexExec(t, m, codex.Config{Sandbox: "workspace-write"})
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
			f := runnertest.NewCLIFixture(t, c.exe(t, mock), "Attack\nmock: shell\nmock-cmd: "+files.attack(), []string{"gpt-5.5"})
			f.Runner.WorkRoot, f.Runner.Isolation = files.workRoot, files.isolation()
			f.Run(t, context.Background())
			work := filepath.Join(files.workRoot, f.Task.ID)
			if _, err := os.Stat(filepath.Join(work, "where")); err != nil {
				t.Fatalf("the shell tool did not run in the work directory (task %s, %s): %v; logs:\n%s",
					f.Task.Phase, f.Task.PhaseReason, err, strings.Join(f.Rec.Logs(), "\n"))
			}
			files.check(t, work)
			runnertest.AssertNoMarkedProcess(t, f.Runner.Owner)
		})
	}
}

// A confined exec task goes for the person's credentials in a home
// directory: an SSH key that is there, and Google Cloud's credentials the
// person makes while the task runs, in a ~/.config that held none when it
// started (the denial holds for a path made after the attempt started).
// It reads neither, nor anything through a link to them; it reads the
// deploy key it is allowed, and the rest of the home directory.
func TestAConfinedTaskReadsNoCredential(t *testing.T) {
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	files := newAgentFiles(t)
	home := filepath.Join(filepath.Dir(files.data), "home")
	for path, content := range map[string]string{".ssh/id_ed25519": "ssh-private-key", ".ssh/deploy": "deploy-key", "notes": "notes", ".config/other/x": "x"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(home, path)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, path), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gate := t.TempDir()
	started, made := filepath.Join(gate, "started"), filepath.Join(gate, "made")
	script := `ln -s ` + home + `/.ssh/id_ed25519 link; cat link > via-link; cat ` + home + `/.ssh/id_ed25519 > ssh; cat ` + home + `/.ssh/deploy > deploy; cat ` + home + `/notes > notes; ` +
		`touch ` + started + `; while [ ! -e ` + made + ` ]; do sleep 0.01; done; cat ` + home + `/.config/gcloud/credentials.db > gcloud; echo done`
	exe, err := exec.New(exec.Config{Argv: []string{"/bin/sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	f := runnertest.NewFixture(t, exe, "steal")
	iso := files.isolation()
	iso.Credentials = []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".config", "gcloud")}
	iso.Allow = []string{filepath.Join(home, ".ssh", "deploy")}
	f.Runner.WorkRoot, f.Runner.Isolation = files.workRoot, iso
	done := make(chan struct{})
	go func() { defer close(done); f.Run(t, context.Background()) }()
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("the task ended before it started waiting: %s (%s), logs %v", f.Task.Phase, f.Task.PhaseReason, f.Rec.Logs())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := os.MkdirAll(filepath.Join(home, ".config", "gcloud"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "gcloud", "credentials.db"), []byte("gcloud-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(made, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	<-done
	if f.Task.Phase != state.PhaseCompleted {
		t.Fatalf("task %s (%s): logs %v", f.Task.Phase, f.Task.PhaseReason, f.Rec.Logs())
	}
	work := filepath.Join(files.workRoot, f.Task.ID)
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(work, name)); return string(b) }
	for _, name := range []string{"ssh", "via-link", "gcloud"} {
		if got := read(name); got != "" {
			t.Errorf("the task read a credential into %s: %q", name, got)
		}
	}
	if read("deploy") != "deploy-key" || read("notes") != "notes" {
		t.Errorf("the task could not read the allowed deploy key (%q) or the rest of the home directory (%q)", read("deploy"), read("notes"))
	}
}
