package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/outbox"
)

// tomlString quotes a string as the config file takes it.
var tomlString = settings.QuoteTOML

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// printed finds a key's line in `agent config print`: its value and origin.
func printed(t *testing.T, out, key string) (value, origin string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` = (.*?)\s+# (.*)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in:\n%s", key, out)
	}
	return m[1], strings.TrimSuffix(m[2], " · live")
}

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.toml")
	writeFile(t, file, `# an operator's file
max-concurrent = 3
models = ["file-a", "file-b"]
token-file = "token"

[executor]
kind = "codex"
kill-grace = "7s"

[executor.codex]
sandbox = "read-only"
`)
	for _, tc := range []struct {
		name       string
		env        []string
		args       []string
		wantValue  string
		wantOrigin string
	}{
		{"default without a file", []string{"AGENT_CONFIG="}, nil, "2", "default"},
		{"file over default", []string{"AGENT_CONFIG=" + file}, nil, "3", "file " + file + ":2"},
		{"env over file", []string{"AGENT_CONFIG=" + file, "AGENT_MAX_CONCURRENT=4"}, nil, "4", "env AGENT_MAX_CONCURRENT"},
		{"flag over env", []string{"AGENT_CONFIG=" + file, "AGENT_MAX_CONCURRENT=4"}, []string{"--max-concurrent", "5"}, "5", "flag --max-concurrent"},
		{"--config over AGENT_CONFIG", []string{"AGENT_CONFIG=/nonexistent.toml"}, []string{"--config", file}, "3", "file " + file + ":2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAgentEnv(t, tc.env, append([]string{"config", "print"}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("config print: %+v", r)
			}
			v, o := printed(t, r.stdout, "max-concurrent")
			if v != tc.wantValue || o != tc.wantOrigin {
				t.Errorf("max-concurrent = %s from %q, want %s from %q", v, o, tc.wantValue, tc.wantOrigin)
			}
		})
	}

	r := runAgentEnv(t, []string{"AGENT_CONFIG=" + file, "AGENT_EXECUTOR_ARG=--x"}, "config", "print")
	for _, want := range []struct{ key, value, origin string }{
		{"models", `["file-a", "file-b"]`, "file " + file + ":3"},
		{"kind", `"codex"`, "file " + file + ":7"},
		{"kill-grace", `"7s"`, "file " + file + ":8"},
		{"sandbox", `"read-only"`, "file " + file + ":11"},
		// A relative path in the file is relative to the file.
		{"token-file", tomlString(filepath.Join(dir, "token")), "file " + file + ":4"},
		{"args", `["--x"]`, "env AGENT_EXECUTOR_ARG"},
	} {
		if v, o := printed(t, r.stdout, want.key); v != want.value || o != want.origin {
			t.Errorf("%s = %s from %q, want %s from %q", want.key, v, o, want.value, want.origin)
		}
	}
}

// The printed configuration is itself a valid config file that gives the
// same values, and it never shows the token.
func TestConfigPrintIsAConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"AGENT_CONFIG=", "AGENT_TOKEN=s3cret-token-value", "AGENT_MODELS=m1,m2", "AGENT_CONTROL_PLANE=https://ops:hunter2@cp.example.com"}
	r := runAgentEnv(t, env, "config", "print", "--attempt-timeout", "10m,20m", "--claude-allowed-tools", "Bash,Write")
	if r.code != 0 {
		t.Fatalf("config print: %+v", r)
	}
	for _, secret := range []string{"s3cret-token-value", "hunter2"} {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Fatalf("config print shows a secret %q:\n%s", secret, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "# token: from AGENT_TOKEN (not shown)") {
		t.Errorf("config print does not say where the token comes from:\n%s", r.stdout)
	}
	file := filepath.Join(dir, "printed.toml")
	writeFile(t, file, r.stdout)
	if c := runAgentEnv(t, nil, "config", "check", file); c.code != 0 || !strings.Contains(c.stdout, "ok") {
		t.Fatalf("config check of the printed file: %+v", c)
	}
	again := runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "config", "print")
	for _, key := range []string{"models", "attempt-timeout", "allowed-tools", "max-concurrent", "data-dir", "kind"} {
		v1, _ := printed(t, r.stdout, key)
		v2, o := printed(t, again.stdout, key)
		if v1 != v2 || !strings.HasPrefix(o, "file "+file+":") {
			t.Errorf("%s: printed %s, read back %s from %q", key, v1, v2, o)
		}
	}
}

func TestConfigErrorsNameFileLineAndKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"unknown key", "max-concurrent = 2\nmax-concurent = 3\n", `:2: unknown key "max-concurent"; did you mean "max-concurrent"?`},
		{"flag name in the wrong table", "[executor]\ncodex-sandbox = \"read-only\"\n", `:2: unknown key "executor.codex-sandbox"`},
		{"scalar for a table", "executor = \"codex\"\n", `:1: unknown key "executor"; did you mean "executor.kind"?`},
		{"wrong type", "\n\nmax-concurrent = \"two\"\n", `:3: max-concurrent: want an integer, got the string "two"`},
		{"not allowed", "[executor]\nkind = \"codex\"\napproval = \"sometimes\"\n", `:3: executor.approval = "sometimes": want never, accept, decline or ask`},
		{"below the minimum", "max-concurrent = 0\n", `:1: max-concurrent = 0: want at least 1`},
		{"bad duration", "[executor]\nkill-grace = 5\n", `:2: executor.kill-grace: want a duration string such as "30s" or "5m", got the integer 5`},
		{"not TOML", "models = [\"a\",\n", `:1: toml:`},
		{"unknown table", "[executr]\nkind = \"codex\"\n", `:2: unknown key "executr.kind"; did you mean "executor.kind"?`},
		{"unknown key in a repo table", "[[repo]]\nname = \"app\"\npath = \"/x\"\nbranch = \"main\"\n", `:4: unknown key "branch" in [[repo]]: want name, path, push, pull_request, api_url, token_env or project`},
		{"repo table without a path", "max-concurrent = 2\n\n[[repo]]\nname = \"app\"\n", `:3: [[repo]] has no path`},
		{"repo table with a number", "[[repo]]\nname = 7\npath = \"/x\"\n", `:2: repo.name: want a string, got the integer 7`},
		{"repo as a string", "repo = \"app\"\n", `:1: repo: want [[repo]] tables with name and path, got the string "app"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			writeFile(t, file, tc.text)
			// agent run refuses it as a configuration error: exit 2, so a
			// service manager does not restart it in a loop.
			r := runAgentEnv(t, nil, "run", "--config", file, "--control-plane", "http://127.0.0.1:1", "--data-dir", filepath.Join(dir, "data"))
			wantOneLineError(t, r, 2, "config "+file+tc.want)
			// Any command taking settings reads the same file.
			r = runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "tasks", "ls", "--data-dir", filepath.Join(dir, "data"))
			wantOneLineError(t, r, 2, "config "+file+tc.want)
			// config check says the same, exit 2 as agent run.
			r = runAgentEnv(t, nil, "config", "check", file)
			wantOneLineError(t, r, 2, "config "+file+tc.want)
		})
	}
	t.Run("missing file named", func(t *testing.T) {
		r := runAgentEnv(t, nil, "config", "print", "--config", filepath.Join(dir, "nope.toml"))
		wantOneLineError(t, r, 2, "no such file")
	})
	t.Run("bad environment value", func(t *testing.T) {
		r := runAgentEnv(t, []string{"AGENT_CONFIG=", "AGENT_MAX_CONCURRENT=lots"}, "config", "print")
		wantOneLineError(t, r, 2, `AGENT_MAX_CONCURRENT="lots"`)
		r = runAgentEnv(t, []string{"AGENT_CONFIG=", "AGENT_LOG_LEVEL=loud"}, "config", "print")
		wantOneLineError(t, r, 2, `AGENT_LOG_LEVEL: "loud": want debug, info, warn or error`)
	})
}

// A file with several mistakes is told all of them, a line each in the
// file's order, by config check and by agent run alike (exit 2): a person
// fixes them at once rather than one run at a time.
func TestConfigErrorsAreAllReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.toml")
	writeFile(t, file, `max-concurrent = 2
max-concurent = 3

[executor]
kind = "codex"
approval = "sometimes"

[[repo]]
name = "app"
branch = "main"

[[repo]]
name = "site"
path = "/src/site"
`)
	want := []string{
		`agent: config ` + file + `:2: unknown key "max-concurent"; did you mean "max-concurrent"?`,
		`agent: config ` + file + `:6: executor.approval = "sometimes": want never, accept, decline or ask`,
		`agent: config ` + file + `:8: [[repo]] has no path`,
		`agent: config ` + file + `:10: unknown key "branch" in [[repo]]: want name, path, push, pull_request, api_url, token_env or project`,
	}
	for _, args := range [][]string{
		{"config", "check", file},
		{"run", "--config", file, "--control-plane", "http://127.0.0.1:1", "--data-dir", filepath.Join(dir, "data")},
	} {
		r := runAgentEnv(t, nil, args...)
		if got := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); r.code != 2 || r.stdout != "" || !slices.Equal(got, want) {
			t.Errorf("agent %s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and:\n%s", strings.Join(args[:2], " "), r.code, r.stdout, r.stderr, strings.Join(want, "\n"))
		}
	}
}

// --retention refuses less than an hour, and its help says so before
// anyone hits the refusal, on the command line and in the file alike.
func TestRetentionMinimumIsInItsHelp(t *testing.T) {
	t.Parallel()
	help := runAgent(t, "run", "--help")
	line := ""
	for _, l := range strings.Split(help.stdout, "\n") {
		if strings.Contains(l, "--retention ") {
			line = l
		}
	}
	if !strings.Contains(line, "at least 1h") {
		t.Errorf("agent run --help on --retention: %q, want it to say at least 1h", line)
	}
	dir := t.TempDir()
	r := runAgent(t, "run", "--retention", "59m", "--control-plane", "http://127.0.0.1:1", "--data-dir", filepath.Join(dir, "data"))
	wantOneLineError(t, r, 2, "--retention 59m0s: want at least 1h0m0s")
	file := filepath.Join(dir, "agent.toml")
	writeFile(t, file, "retention = \"30m\"\n")
	wantOneLineError(t, runAgent(t, "config", "check", file), 2, ":1: retention = 30m0s: want at least 1h0m0s")
}

// The repositories are [[repo]] tables in the file (a relative path
// relative to the file, ~/ the home directory), --repo NAME=PATH on the
// command line and AGENT_REPO in the environment; config print writes
// them back as [[repo]] tables that read back the same.
func TestConfigRepoTables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home, _ := os.UserHomeDir()
	file := filepath.Join(dir, "agent.toml")
	writeFile(t, file, `max-concurrent = 3

[log]
level = "debug"

[[repo]]
name = "app"
path = "src/app"

[[repo]]
path = "~/docs"
name = "docs"
`)
	r := runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "config", "print")
	want := "\n[[repo]]                                     # file " + file + ":6\nname = \"app\"\npath = " + tomlString(filepath.Join(dir, "src", "app")) + "\n" +
		"\n[[repo]]                                     # file " + file + ":6\nname = \"docs\"\npath = " + tomlString(filepath.Join(home, "docs")) + "\n"
	if r.code != 0 || !strings.HasSuffix(r.stdout, want) {
		t.Fatalf("config print: %+v\nwant it to end with:\n%s", r, want)
	}
	printedFile := filepath.Join(t.TempDir(), "printed.toml")
	writeFile(t, printedFile, r.stdout)
	again := runAgentEnv(t, []string{"AGENT_CONFIG=" + printedFile}, "config", "print")
	for _, pair := range []string{"name = \"app\"\npath = " + tomlString(filepath.Join(dir, "src", "app")), "name = \"docs\"\npath = " + tomlString(filepath.Join(home, "docs"))} {
		if again.code != 0 || !strings.Contains(again.stdout, pair) {
			t.Errorf("printed file read back: no %q in\n%s", pair, again.stdout)
		}
	}
	r = runAgentEnv(t, []string{"AGENT_CONFIG=" + file, "AGENT_REPO=env=/from/env"}, "config", "print")
	if !strings.Contains(r.stdout, "[[repo]]                                     # env AGENT_REPO\nname = \"env\"\npath = \"/from/env\"\n") ||
		strings.Contains(r.stdout, `"app"`) {
		t.Errorf("AGENT_REPO over the file:\n%s", r.stdout)
	}
	r = runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "config", "print", "--repo", "a=/x", "--repo", "b=/y")
	if strings.Count(r.stdout, "# flag --repo") != 2 || !strings.Contains(r.stdout, "name = \"b\"\npath = \"/y\"") {
		t.Errorf("--repo twice:\n%s", r.stdout)
	}
	r = runAgentEnv(t, []string{"AGENT_CONFIG="}, "config", "print", "--repo", "just-a-name")
	wantOneLineError(t, r, 2, `--repo "just-a-name": want NAME=PATH`)
}

// The data directory from the config file serves every command: the
// outbox commands find the outbox there.
func TestConfigDataDirServesEveryCommand(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	file := filepath.Join(t.TempDir(), "agent.toml")
	writeFile(t, file, "data-dir = "+tomlString(dataDir)+"\n")
	r := runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "outbox", "stats", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"pending"`) {
		t.Fatalf("outbox stats with the data dir from the file: %+v", r)
	}
	r = runAgentEnv(t, []string{"AGENT_CONFIG=" + file, "AGENT_DATA_DIR=" + filepath.Join(t.TempDir(), "empty")}, "outbox", "stats")
	wantOneLineError(t, r, 1, "no outbox in data directory")
}

// A running agent follows its config file: a live setting applies, a bad
// edit keeps the running configuration and says why, a setting that needs
// a restart is reported, and SIGHUP reloads too.
func TestConfigReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := startCP(t, freeAddr(t), filepath.Join(dir, "cp"))
	file := filepath.Join(dir, "agent.toml")
	writeFile(t, file, "max-concurrent = 1\n")
	a := startAgentProc(t, c, filepath.Join(dir, "agent"), "--config", file, "--log-level", "debug")
	capacity := func() int { return agentCapacity(c) }
	testkit.WaitFor(t, "the agent's heartbeat with capacity 1", func() bool { return capacity() == 1 })

	// An editor's save: a new file renamed over the old one.
	replace := func(text string) {
		tmp := file + ".swp"
		writeFile(t, tmp, text)
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	replace("max-concurrent = 3\n")
	testkit.WaitFor(t, "capacity 3 after the edit", func() bool { return capacity() == 3 })
	if !strings.Contains(a.output(), `"applied":["max-concurrent"]`) {
		t.Errorf("the reload is not logged with what it applied:\n%s", tail(a.output(), 3000))
	}

	replace("max-concurrent = \"many\"\n")
	testkit.WaitFor(t, "the bad edit to be refused", func() bool {
		return strings.Contains(a.output(), `max-concurrent: want an integer, got the string \"many\"`)
	})
	if !strings.Contains(a.output(), "config not reloaded; the running configuration stays") {
		t.Errorf("a refused reload does not say the running configuration stays:\n%s", tail(a.output(), 3000))
	}

	// Written in place, without the watcher's help: SIGHUP.
	// What decides a task's reach is not live either: a file a task could
	// write must not change what the next task runs.
	writeFile(t, file, "max-concurrent = 2\nagent-id = \"renamed\"\n[executor]\ncommand = \"sh -c pwned\"\napproval = \"accept\"\n")
	a.cmd.Process.Signal(syscall.SIGHUP)
	testkit.WaitFor(t, "capacity 2 after SIGHUP", func() bool { return capacity() == 2 })
	testkit.WaitFor(t, "the restart-only setting to be reported", func() bool {
		return strings.Contains(a.output(), `"msg":"config changed a setting that needs a restart to apply","setting":"agent-id"`)
	})
	for _, key := range []string{"executor.command", "executor.approval"} {
		if !strings.Contains(a.output(), `"msg":"config changed a setting that needs a restart to apply","setting":"`+key+`"`) {
			t.Errorf("a change of %s is not reported as needing a restart:\n%s", key, tail(a.output(), 3000))
		}
	}
	if strings.Contains(a.output(), `"applied":["executor`) {
		t.Errorf("an executor setting was applied live:\n%s", tail(a.output(), 3000))
	}
	if a.stop() != 0 {
		t.Fatalf("agent exit code != 0:\n%s", tail(a.output(), 3000))
	}
}

// agentCapacity is the max-concurrent the control plane last heard from
// its one agent, 0 before it has heard from it.
func agentCapacity(c *cp) int {
	agents, err := c.client.Agents(context.Background())
	if err != nil || len(agents) == 0 {
		return 0
	}
	return agents[0].Capacity.Max
}

// A SIGHUP that comes while the agent is still starting (here: opening an
// outbox with a backlog) is kept for the reloader, not the end of the
// process, as it was by Go's default before the reloader ran.
func TestSIGHUPWhileStartingIsKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := startCP(t, freeAddr(t), filepath.Join(dir, "cp"))
	dataDir := filepath.Join(dir, "agent")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(datadir.Layout{Dir: dataDir}.Outbox(), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := range 200 {
				p := json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				if _, err := o.Append(outbox.Record{Kind: outbox.KindProgress, TaskID: "t-gone", Attempt: 1, Payload: p}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	a := startAgentProc(t, c, dataDir, "--log-level", "debug")
	// The moment the agent has its outbox open, it is still starting.
	fds := fmt.Sprintf("/proc/%d/fd", a.cmd.Process.Pid)
	opened := func() bool {
		ents, _ := os.ReadDir(fds)
		for _, e := range ents {
			if l, _ := os.Readlink(filepath.Join(fds, e.Name())); strings.HasSuffix(l, outbox.FileName) {
				return true
			}
		}
		return false
	}
	testkit.WaitFor(t, "the agent to open its outbox", opened)
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the reload the SIGHUP asked for", func() bool {
		select {
		case <-a.done:
			t.Fatalf("the agent ended on a SIGHUP at start (%v):\n%s", a.err, tail(a.output(), 3000))
		default:
		}
		return strings.Contains(a.output(), `"why":"SIGHUP"`)
	})
	if code := a.stop(); code != 0 {
		t.Fatalf("agent exit code %d after a SIGHUP at start:\n%s", code, tail(a.output(), 3000))
	}
}

// A config file that is a symlink is followed to where it leads: an edit
// of the target in its own directory reloads, and so does re-pointing the
// link (as config management, or a mounted ConfigMap's "..data" swap, do).
func TestConfigReloadFollowsSymlinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := startCP(t, freeAddr(t), filepath.Join(dir, "cp"))
	real, links := filepath.Join(dir, "real"), filepath.Join(dir, "etc")
	for _, d := range []string{real, links} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(real, "agent.toml")
	writeFile(t, target, "max-concurrent = 1\n")
	// Through a directory link too: etc/..data -> real, etc/agent.toml -> ..data/agent.toml.
	if err := os.Symlink(real, filepath.Join(links, "..data")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(links, "agent.toml")
	if err := os.Symlink(filepath.Join("..data", "agent.toml"), file); err != nil {
		t.Fatal(err)
	}
	a := startAgentProc(t, c, filepath.Join(dir, "agent"), "--config", file)
	capacity := func() int { return agentCapacity(c) }
	testkit.WaitFor(t, "the agent's heartbeat with capacity 1", func() bool { return capacity() == 1 })

	// The target, saved where it lies (an editor's rename-over).
	tmp := filepath.Join(real, ".agent.toml.swp")
	writeFile(t, tmp, "max-concurrent = 3\n")
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "capacity 3 after the target was edited", func() bool { return capacity() == 3 })

	// The directory link swapped to a new directory, the files left alone.
	next := filepath.Join(dir, "real-2")
	if err := os.MkdirAll(next, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(next, "agent.toml"), "max-concurrent = 2\n")
	if err := os.Symlink(next, filepath.Join(links, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(links, "..data_tmp"), filepath.Join(links, "..data")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "capacity 2 after the link was re-pointed", func() bool { return capacity() == 2 })

	// And an edit in the new directory is followed too.
	writeFile(t, filepath.Join(next, "agent.toml"), "max-concurrent = 4\n")
	testkit.WaitFor(t, "capacity 4 after the new target was written in place", func() bool { return capacity() == 4 })
	if code := a.stop(); code != 0 {
		t.Fatalf("agent exit code %d:\n%s", code, tail(a.output(), 3000))
	}
}

// Several control plane replicas: comma-separated on the command line and
// in the environment, an array in the config file; a password in any is
// not printed, and a bad one is refused.
func TestConfigControlPlaneReplicas(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.toml")
	writeFile(t, file, "control-plane = [\"https://ops:hunter2@cp-a.example.com\", \"https://cp-b.example.com\"]\n")
	r := runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "config", "print")
	if r.code != 0 || strings.Contains(r.stdout, "hunter2") {
		t.Fatalf("config print: %+v", r)
	}
	if v, o := printed(t, r.stdout, "control-plane"); v != `"https://ops:REDACTED@cp-a.example.com,https://cp-b.example.com"` || !strings.HasPrefix(o, "file "+file+":") {
		t.Errorf("control-plane printed %s from %q", v, o)
	}
	writeFile(t, file, "control-plane = [\"https://cp-a.example.com\", 7]\n")
	wantOneLineError(t, runAgentEnv(t, nil, "config", "check", file), 2, "control-plane: want an array of strings without commas")
	tok := filepath.Join(dir, "token")
	writeFile(t, tok, "a-token-of-at-least-32-characters-0123456789\n")
	must(t, os.Chmod(tok, 0o600))
	r = runAgentEnv(t, nil, "run", "--control-plane", "https://cp-a.example.com,http://cp-b.example.com", "--data-dir", filepath.Join(dir, "data"),
		"--token-file", tok, "--executor", "sample")
	wantOneLineError(t, r, 1, "control plane URL http://cp-b.example.com is not https")
}
