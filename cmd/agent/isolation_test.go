package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/doctor"
	"github.com/edgeagent/agent/internal/agentsettings"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/internal/service"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// A task of a real agent (`agent run`, exec executor) tries what a prompt
// injection would, from its shell: read the agent's token and the
// registration secret, rewrite the config file (the next task would run its
// command) and the pid file, plant a task file in the data directory,
// signal the agent. None of it works; the task itself completes, in its
// work directory. The agent's health says how its attempts are confined.
func TestE2EATaskReachesNothingOfTheAgents(t *testing.T) {
	t.Parallel()
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	c := startCP(t, freeAddr(t), filepath.Join(dir, "cp"))
	dataDir := filepath.Join(dir, "agent")
	config := filepath.Join(dir, "agent.toml")
	script := filepath.Join(dir, "task.sh")
	writeFile(t, script, `#!/bin/sh
read -r task
cat "$DATA/agent-token" > stolen-token
cat "$SECRET" > stolen-secret
printf '[executor]\ncommand = "sh -c \\"echo pwned > %s/pwned\\""\n' "$DATA" > "$CONFIG"
echo 1 > "$DATA/agent.pid"
echo planted > "$DATA/tasks/planted.json"
kill -0 "$(cat "$DATA/../agent-pid")" && echo yes > signalled-agent
pwd > where
echo '{"type":"result","summary":"tried"}'
`)
	if err := os.Chmod(script, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, config, "[executor]\ncommand = \""+script+"\"\n")
	a := startProc(t, "agent", []string{"DATA=" + dataDir, "SECRET=" + c.tokenFile, "CONFIG=" + config, "AGENT_SECRET_MARKER=s3cret-in-env"},
		"run", "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir, "--config", config,
		"--executor", "exec", "--executor-env", "DATA,SECRET,CONFIG", "--heartbeat-interval", "300ms")
	writeFile(t, filepath.Join(dir, "agent-pid"), strconv.Itoa(a.cmd.Process.Pid)) // what the task signals
	testkit.WaitFor(t, "the agent's health", func() bool { return isolationHealth(t, dataDir) != "" })
	if line := isolationHealth(t, dataDir); !strings.HasPrefix(line, "landlock (ABI ") {
		t.Fatalf("health says isolation %q, want landlock", line)
	}
	id := submit(t, c, "attack")
	if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
		t.Fatalf("the task ended %s (%s):\n%s", v.Phase, v.PhaseReason, tail(a.output(), 3000))
	}
	work := filepath.Join(dataDir, "work", id)
	if b, _ := os.ReadFile(filepath.Join(work, "where")); strings.TrimSpace(string(b)) != work {
		t.Errorf("the task ran in %q, not its work directory %s", b, work)
	}
	for _, f := range []string{"stolen-token", "stolen-secret"} {
		if b, _ := os.ReadFile(filepath.Join(work, f)); len(b) > 0 {
			t.Errorf("the task read a secret (%s): %q", f, b)
		}
	}
	if b, _ := os.ReadFile(config); strings.Contains(string(b), "pwned") {
		t.Errorf("the task rewrote the config file: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "tasks", "planted.json")); err == nil {
		t.Errorf("the task planted a task file")
	}
	if b, _ := os.ReadFile(filepath.Join(dataDir, "agent.pid")); strings.TrimSpace(string(b)) != strconv.Itoa(a.cmd.Process.Pid) {
		t.Errorf("agent.pid holds %q, not the agent's pid %d", b, a.cmd.Process.Pid)
	}
	if _, err := os.Stat(filepath.Join(work, "signalled-agent")); err == nil {
		t.Errorf("the task could signal the agent")
	}
	if a.stop() != 0 {
		t.Fatalf("agent exit code != 0:\n%s", tail(a.output(), 3000))
	}
}

// The README's one-host layout: a control plane serving ./cp, an agent
// started beside it as the README shows (--token-file ./cp/token, its
// data in ./agent-data), and the person's SSH and AWS keys in the agent's
// home. A task goes for all of it: the operator token and the key that
// signs task tokens beside the token file (with which it would list every
// task, answer approvals and mint task tokens), and the keys. It reads
// none of it, into its files or its output, and lists no task; doctor
// says what is denied. Restarted with --isolation-allow of the AWS
// directory and of the SSH key, the agent's next task reads those two and
// still not the control plane's; --isolation-allow of the token file or
// of the operator token is refused in one line.
func TestE2EOneHostLayoutATaskReadsNoCredential(t *testing.T) {
	t.Parallel()
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(dir, "home")
	must(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	must(t, os.MkdirAll(filepath.Join(home, ".aws"), 0o700))
	writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), "ssh-private-key-of-the-person")
	writeFile(t, filepath.Join(home, ".aws", "credentials"), "aws-secret-of-the-person")
	c := startCP(t, freeAddr(t), filepath.Join(dir, "cp"))
	key, err := os.ReadFile(filepath.Join(dir, "cp", "secrets", "task-token"))
	if err != nil {
		t.Fatalf("the control plane keeps no task-token key where the task looks: %v", err)
	}
	operator, _ := os.ReadFile(c.operatorFile)
	secrets := map[string]string{"op": strings.TrimSpace(string(operator)), "key": strings.TrimSpace(string(key)),
		"ssh": "ssh-private-key-of-the-person", "aws": "aws-secret-of-the-person"}
	script := filepath.Join(dir, "task.sh")
	writeFile(t, script, `#!/bin/sh
read -r task
cat `+dir+`/cp/operator-token > op
cat `+dir+`/cp/secrets/task-token > key
cat `+home+`/.ssh/id_ed25519 > ssh
cat `+home+`/.aws/credentials > aws
cat op key ssh aws
curl -s -H "Authorization: Bearer $(cat op)" `+c.url()+`/v1/tasks > listed
echo '{"type":"result","summary":"tried"}'
`)
	must(t, os.Chmod(script, 0o700))
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", "XDG_STATE_HOME="}
	run := func(extra ...string) *proc {
		args := append([]string{"run", "--control-plane", c.url(), "--token-file", "./cp/token", "--data-dir", "./agent-data",
			"--executor", "exec", "--executor-command", script, "--heartbeat-interval", "300ms"}, extra...)
		return startProcIn(t, dir, "agent", env, args...)
	}
	attack := func(a *proc) (work string, events string) {
		t.Helper()
		id := submit(t, c, "steal")
		if v := c.waitDone(t, id); v.Phase != state.PhaseCompleted {
			t.Fatalf("the task ended %s (%s):\n%s", v.Phase, v.PhaseReason, tail(a.output(), 3000))
		}
		var b strings.Builder
		for _, e := range c.events(t, id) {
			b.Write(e.Payload)
		}
		return filepath.Join(dir, "agent-data", "work", id), b.String()
	}
	stolen := func(work, name string) bool {
		b, _ := os.ReadFile(filepath.Join(work, name))
		return len(b) > 0 && strings.TrimSpace(string(b)) == secrets[name]
	}

	a := run()
	work, events := attack(a)
	for name, secret := range secrets {
		if stolen(work, name) {
			t.Errorf("the task read %s", name)
		}
		if strings.Contains(events, secret) {
			t.Errorf("the task's output carries %s", name)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(work, "listed")); strings.Contains(string(b), `"id"`) {
		t.Errorf("the task listed tasks: %.200s", b)
	}
	if a.stop() != 0 {
		t.Fatalf("agent exit code != 0:\n%s", tail(a.output(), 3000))
	}
	r := runAgentEnv(t, env, "doctor", "--control-plane", c.url(), "--token-file", filepath.Join(dir, "cp", "token"), "--data-dir", filepath.Join(dir, "agent-data"), "--executor", "exec",
		"--executor-command", script, "--json")
	var checks []doctor.Check
	must(t, json.Unmarshal([]byte(r.stdout), &checks))
	var denied doctor.Check
	for _, ch := range checks {
		if ch.Name == doctor.CheckDenied {
			denied = ch
		}
	}
	if denied.Result != doctor.CheckPass || !strings.Contains(denied.Detail, filepath.Join(dir, "cp")+" (a control plane's state)") ||
		!strings.Contains(denied.Detail, "credentials: ~/.ssh, ~/.aws") {
		t.Errorf("doctor's denied check: %+v", denied)
	}

	a = run("--isolation-allow", filepath.Join(home, ".aws"), "--isolation-allow", "./home/.ssh/id_ed25519")
	work, _ = attack(a)
	for name, want := range map[string]bool{"op": false, "key": false, "ssh": true, "aws": true} {
		if stolen(work, name) != want {
			t.Errorf("with --isolation-allow of ~/.aws and the SSH key: read %s %v, want %v", name, !want, want)
		}
	}
	if a.stop() != 0 {
		t.Fatalf("agent exit code != 0:\n%s", tail(a.output(), 3000))
	}

	for _, allow := range []string{filepath.Join(dir, "cp", "token"), filepath.Join(dir, "cp", "operator-token")} {
		r := runWithin(t, 20*time.Second, "run", "--control-plane", c.url(), "--token-file", filepath.Join(dir, "cp", "token"), "--data-dir", filepath.Join(dir, "agent-data"),
			"--executor", "sample", "--isolation-allow", allow)
		wantOneLineError(t, r, 1, "isolation-allow "+allow+": it stays denied")
	}
}

// The agent is not dumpable: a process of the same (non-root) user reads
// neither its environment nor its memory through /proc, while it reads a
// dumpable process's of that user. Root reads both, whatever: run agents
// as a user of their own (service install does).
func TestTheAgentsProcessIsClosedToItsUsersOthers(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the agent and the reader as another user")
	}
	const nobody = 65534
	// A directory nobody can enter, with a copy of the test binary in it:
	// the test's own are private.
	dir, err := os.MkdirTemp("", "undumpable-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "agent")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cpDir := filepath.Join(dir, "cp")
	if err := os.Mkdir(cpDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(cpDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	as := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	addr := freeAddr(t)
	agentProc := agentCmd(t.Context(), []string{"AGENT_SECRET_MARKER=s3cret-in-env"}, "controlplane", "serve", "--data-dir", cpDir, "--addr", addr)
	agentProc.Path, agentProc.Args[0] = bin, bin
	agentProc.SysProcAttr = as
	if err := agentProc.Start(); err != nil {
		t.Fatalf("run the test binary as nobody: %v", err)
	}
	defer func() { agentProc.Process.Kill(); agentProc.Wait() }()
	plain := exec.Command("sleep", "60")
	plain.Env = []string{"AGENT_SECRET_MARKER=dumpable"}
	plain.SysProcAttr = as
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { plain.Process.Kill(); plain.Wait() }()
	read := func(pid int) (string, error) {
		cat := exec.Command("cat", "/proc/"+strconv.Itoa(pid)+"/environ")
		cat.SysProcAttr = as
		out, err := cat.Output()
		return string(out), err
	}
	// Listening: main has long made itself undumpable.
	testkit.WaitFor(t, "the agent to listen", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	if out, err := read(plain.Process.Pid); err != nil || !strings.Contains(out, "dumpable") {
		t.Fatalf("a process of the same user could not read a dumpable process's environment (%v): the check proves nothing", err)
	}
	if out, err := read(agentProc.Process.Pid); err == nil || strings.Contains(out, "s3cret") {
		t.Errorf("a process of the same user read the agent's environment: %q", out)
	}
}

// isolationHealth reads the isolation line the agent recorded.
func isolationHealth(t *testing.T, dataDir string) string {
	t.Helper()
	h, err := datadir.ReadHealth(dataDir)
	if err != nil {
		return ""
	}
	return h.Isolation
}

// Every token file the agent learns of is denied to its tasks: its own
// (--token-file), the one the environment or the config file names when
// the command line chose another, a control plane's the environment names
// (the shell that started one), and those of the other agents installed
// on this machine, with their data directories; so is the control plane's
// state directory the environment names, and its default in the working
// directory.
func TestTheAgentDeniesTheTokenFilesItLearnsOf(t *testing.T) {
	me, err := user.Current()
	must(t, err)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no user units
	defer func(d string) { service.SystemUnitDir = d }(service.SystemUnitDir)
	service.SystemUnitDir = t.TempDir()
	writeFile(t, filepath.Join(service.SystemUnitDir, "agent-other.service"), "[Service]\nExecStart=/usr/local/bin/agent run --control-plane https://x "+
		"--data-dir /srv/other-agent --token-file=/srv/other-token\nUser="+me.Username+"\n")
	dir := t.TempDir()
	config := filepath.Join(dir, "agent.toml")
	writeFile(t, config, "token-file = \"ops-token\"\n")
	for name, value := range map[string]string{"AGENT_TOKEN_FILE": "/env/token", "AGENT_CP_TOKEN_FILE": "/cp/registration",
		"AGENT_CP_OPERATOR_TOKEN_FILE": "/cp/people", "AGENT_CP_NOTIFY_SECRET_FILE": "/cp/notify", "AGENT_CP_TLS_KEY": "/cp/tls.key",
		"AGENT_CP_DATA_DIR": "/srv/cp"} {
		t.Setenv(name, value)
	}
	f := runFlags{tokenFile: "/flag/token", Run: agentsettings.Run{IsolationAllow: []string{"/home/me/.aws"}}}
	iso := f.isolationOf(config)
	want := []string{config, "/flag/token", "/env/token", filepath.Join(dir, "ops-token"), "/cp/registration", "/cp/people", "/cp/notify", "/cp/tls.key",
		"/srv/other-agent", "/srv/other-token"}
	if !slices.Equal(iso.Protect, want) {
		t.Errorf("protected %v, want %v", iso.Protect, want)
	}
	if !slices.Equal(iso.ControlPlaneDirs, []string{"/srv/cp", "controlplane-data"}) {
		t.Errorf("control plane directories %v", iso.ControlPlaneDirs)
	}
	if !slices.Equal(iso.Allow, []string{"/home/me/.aws"}) {
		t.Errorf("allowed %v", iso.Allow)
	}
}
