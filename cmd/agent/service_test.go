package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/service"
	"github.com/edgeagent/agent/state"
)

// fakeCtl is a fake systemctl or launchctl first on PATH: a real
// subprocess that records each call's argv, one line per call, the
// arguments ended by "|", and prints what the test put in its answer file
// (or fails, saying what is in its fail file).
type fakeCtl struct {
	dir, calls, answer string
	fail               string // if it exists, its text goes to stderr and the fake exits 1
}

func newFakeCtl(t *testing.T, name string) *fakeCtl {
	t.Helper()
	dir := t.TempDir()
	f := &fakeCtl{dir: dir, calls: filepath.Join(dir, "calls"), answer: filepath.Join(dir, "answer"), fail: filepath.Join(dir, "fail")}
	script := "#!/bin/sh\nprintf '%s|' \"$@\" >> '" + f.calls + "'\necho >> '" + f.calls + "'\n" +
		"[ -f '" + f.fail + "' ] && cat '" + f.fail + "' >&2 && exit 1\n" +
		"[ -f '" + f.answer + "' ] && cat '" + f.answer + "'\nexit 0\n"
	must(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o700))
	return f
}

// took returns the calls recorded since the last took, and forgets them.
func (f *fakeCtl) took(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.calls)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	must(t, err)
	must(t, os.Remove(f.calls))
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func (f *fakeCtl) wantCalls(t *testing.T, what string, want ...string) {
	t.Helper()
	got := f.took(t)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: systemctl calls\n got %q\nwant %q", what, got, want)
	}
}

func TestServiceLifecycleSystemd(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	configHome, stateHome, home := t.TempDir(), t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + configHome, "XDG_STATE_HOME=" + stateHome, "PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	tok := tokenFile(t)
	dataDir := seedOutbox(t) // 2 records pending, 1 dead
	store, err := state.OpenStore(filepath.Join(dataDir, "tasks"))
	must(t, err)
	must(t, store.Save(&state.Task{ID: "t-1", Prompt: "p", Phase: state.PhaseTurnStarted}))
	must(t, store.Save(&state.Task{ID: "t-0", Prompt: "p", Phase: state.PhaseCompleted}))
	install := []string{"service", "install", "--", "--control-plane", "https://cp.example.com", "--token-file", tok, "--data-dir", dataDir}
	unit := filepath.Join(configHome, "systemd", "user", service.UnitName)
	envFile := filepath.Join(configHome, "agent", "agent.env")

	// Dry run: nothing written, nothing run.
	r := runAgentEnv(t, env, append([]string{"service", "install", "--dry-run"}, install[2:]...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "would write "+unit) || !strings.Contains(r.stdout, "systemctl --user enable --now agent.service") {
		t.Fatalf("install --dry-run: %+v", r)
	}
	if _, err := os.Stat(unit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run wrote the unit: %v", err)
	}
	ctl.wantCalls(t, "dry run")

	// --no-start: written, not run; the commands are said.
	r = runAgentEnv(t, env, append([]string{"service", "install", "--no-start"}, install[2:]...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "systemctl --user daemon-reload") {
		t.Fatalf("install --no-start: %+v", r)
	}
	ctl.wantCalls(t, "install --no-start")
	must(t, os.Remove(unit))

	r = runAgentEnv(t, env, install...)
	if r.code != 0 {
		t.Fatalf("install: %+v", r)
	}
	ctl.wantCalls(t, "install", "--user|daemon-reload|", "--user|enable|--now|agent.service|")
	for path, mode := range map[string]os.FileMode{unit: 0o644, envFile: 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v, mode %v, want %v", path, err, st.Mode().Perm(), mode)
		}
	}
	if !strings.Contains(r.stdout, "journalctl --user -u agent") || !strings.Contains(r.stdout, dataDir) {
		t.Errorf("install does not say where the logs and data are:\n%s", r.stdout)
	}

	// Again: a running service is restarted to take the new unit.
	if r = runAgentEnv(t, env, install...); r.code != 0 {
		t.Fatalf("reinstall: %+v", r)
	}
	ctl.wantCalls(t, "reinstall", "--user|daemon-reload|", "--user|try-restart|agent.service|", "--user|enable|--now|agent.service|")

	must(t, os.WriteFile(ctl.answer, []byte("LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=0\nStatusText=running: 1 of 2 tasks running, 2 records pending\n"), 0o600))
	r = runAgentEnv(t, env, "service", "status")
	if r.code != 0 {
		t.Errorf("status of a running service: exit %d, want 0: %+v", r.code, r)
	}
	for _, want := range []string{"installed (" + unit + ")", "active (running)", "4242", "1 running: t-1", "2 records pending, 1 dead", "running: 1 of 2 tasks running", "data directory:", dataDir} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status does not say %q:\n%s", want, r.stdout)
		}
	}
	ctl.wantCalls(t, "status", "--user|show|agent.service|--property=LoadState,ActiveState,SubState,MainPID,NRestarts,StatusText|")

	must(t, os.WriteFile(ctl.answer, []byte("LoadState=loaded\nActiveState=inactive\nSubState=dead\nMainPID=0\n"), 0o600))
	if r = runAgentEnv(t, env, "service", "status"); r.code != 3 || !strings.Contains(r.stdout, "inactive (dead)") {
		t.Errorf("status of a stopped service: want exit 3 and inactive (dead): %+v", r)
	}
	ctl.took(t)
	must(t, os.Remove(ctl.answer))

	// The manager out of reach: the local state is still shown.
	must(t, os.WriteFile(ctl.fail, []byte("Failed to connect to bus: No medium found\n"), 0o600))
	if r = runAgentEnv(t, env, "service", "status"); r.code != 1 || !strings.Contains(r.stdout, "unknown: ") ||
		!strings.Contains(r.stdout, "No medium found") || !strings.Contains(r.stdout, "2 records pending") {
		t.Errorf("status without the manager: want exit 1, the state unknown and why, and the outbox: %+v", r)
	}
	ctl.took(t)
	must(t, os.Remove(ctl.fail))

	for _, c := range []struct{ verb, want string }{{"stop", "--user|stop|agent.service|"}, {"start", "--user|start|agent.service|"}} {
		t.Run(c.verb, func(t *testing.T) {
			if r := runAgentEnv(t, env, "service", c.verb); r.code != 0 {
				t.Fatalf("%s: %+v", c.verb, r)
			}
			ctl.wantCalls(t, c.verb, c.want)
		})
	}

	r = runAgentEnv(t, env, "service", "uninstall")
	if r.code != 0 {
		t.Fatalf("uninstall: %+v", r)
	}
	ctl.wantCalls(t, "uninstall", "--user|disable|--now|agent.service|", "--user|daemon-reload|")
	if _, err := os.Stat(unit); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unit is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "outbox")); err != nil {
		t.Errorf("uninstall touched the data directory: %v", err)
	}
	if !strings.Contains(r.stdout, "kept the data directory "+dataDir) {
		t.Errorf("uninstall does not say where the data directory is:\n%s", r.stdout)
	}

	if r = runAgentEnv(t, env, "service", "status"); r.code != 4 || !strings.Contains(r.stdout, "not installed") {
		t.Errorf("status when not installed: want exit 4: %+v", r)
	}
	wantOneLineError(t, runAgentEnv(t, env, "service", "start"), 1, "not installed")
	ctl.wantCalls(t, "after uninstall")
}

// A system unit is made the same way; --system's calls have no --user.
func TestServiceSystemDryRun(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "SUDO_USER=", "PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	r := runAgentEnv(t, env, "service", "install", "--system", "--run-as", "root", "--dry-run", "--", "--control-plane", "https://cp.example.com", "--token-file", tokenFile(t))
	for _, want := range []string{"would write /etc/systemd/system/agent.service", "WantedBy=multi-user.target", "EnvironmentFile=-/etc/agent/agent.env", "\n  systemctl daemon-reload\n"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("install --system --dry-run does not say %q: %+v", want, r)
		}
	}
	wantOneLineError(t, runAgentEnv(t, env, "service", "install", "--run-as", "nobody", "--dry-run", "--", "--control-plane", "https://x"), 2, "--run-as is for a system service")
	ctl.wantCalls(t, "system dry run")
}

// A --run-as account the agent's own lookup cannot see (it reads
// /etc/passwd; LDAP and sssd accounts are not there) is asked of getent,
// as libc would; one nobody knows is an error naming it.
func TestServiceRunAsFromNameServices(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	getent := "#!/bin/sh\n" +
		`[ "$1 $2" = "passwd ldapagent" ] && echo "ldapagent:*:4242:4343:LDAP Agent,,,:/srv/ldapagent:/bin/sh" && exit 0` + "\nexit 2\n"
	if err := os.WriteFile(filepath.Join(ctl.dir, "getent"), []byte(getent), 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	run := []string{"--", "--control-plane", "https://cp.example.com", "--token-file", tokenFile(t)}
	r := runAgentEnv(t, env, append([]string{"service", "install", "--system", "--run-as", "ldapagent", "--dry-run"}, run...)...)
	for _, want := range []string{"User=ldapagent", "/srv/ldapagent/"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("install --run-as ldapagent does not say %q: %+v", want, r)
		}
	}
	wantOneLineError(t, runAgentEnv(t, env, append([]string{"service", "install", "--system", "--run-as", "nosuchagentuser", "--dry-run"}, run...)...), 1, "nosuchagentuser")
	ctl.wantCalls(t, "run-as dry run")
}

// launchd's plist can be made anywhere; what needs launchctl says it runs
// only on macOS, before anything is written.
func TestServiceLaunchdOffMacOS(t *testing.T) {
	t.Parallel()
	if service.HostManager() == service.Launchd {
		t.Skip("this is macOS")
	}
	ctl := newFakeCtl(t, "launchctl")
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	run := []string{"--", "--control-plane", "https://cp.example.com", "--token-file", tokenFile(t)}
	r := runAgentEnv(t, env, append([]string{"service", "install", "--manager", "launchd", "--dry-run"}, run...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "<key>ProgramArguments</key>") || !strings.Contains(r.stdout, "launchctl bootstrap gui/") {
		t.Errorf("install --manager launchd --dry-run: %+v", r)
	}
	wantOneLineError(t, runAgentEnv(t, env, append([]string{"service", "install", "--manager", "launchd"}, run...)...), 1, "launchd runs only on macOS")
	ctl.wantCalls(t, "launchd off macOS")
}

// A flag that would inject a line into the unit, or that agent run would
// refuse, is refused when the unit is made, not when it fails to start.
func TestServiceRefusesBadFlags(t *testing.T) {
	t.Parallel()
	tok := tokenFile(t)
	base := []string{"service", "print", "--", "--control-plane", "https://cp.example.com", "--token-file", tok}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"newline injects a line", []string{"--agent-id", "x\nExecStartPre=/bin/rm -rf /"}, "control character"},
		{"unknown flag", []string{"--no-such-flag"}, "unknown flag"},
		{"bad value", []string{"--max-concurrent", "many"}, "max-concurrent"},
		{"value out of range", []string{"--max-concurrent", "0"}, "max-concurrent"},
		{"stray argument", []string{"extra"}, "no arguments"},
		{"missing token file", []string{"--token-file", "/no/such/token"}, "--token-file /no/such/token: no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantOneLineError(t, runAgent(t, append(append([]string{}, base...), c.args...)...), 2, c.want)
		})
	}
	wantOneLineError(t, runAgent(t, "service", "print", "--", "--token-file", tok), 2, "--control-plane")
}

// install makes the data and work directories, 0700, so that the sandbox
// can name them writable; --no-sandbox leaves the sandbox out.
func TestServiceInstallMakesDirs(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	configHome, top := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + configHome, "PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	data, work := filepath.Join(top, "data"), filepath.Join(top, "work")
	r := runAgentEnv(t, env, "service", "install", "--no-start", "--no-sandbox", "--", "--control-plane", "https://cp.example.com",
		"--token-file", tokenFile(t), "--data-dir", data, "--work-dir", work)
	if r.code != 0 {
		t.Fatalf("install: %+v", r)
	}
	for _, d := range []string{data, work} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a directory 0700", d, err, st)
		}
	}
	unit, err := os.ReadFile(filepath.Join(configHome, "systemd", "user", service.UnitName))
	if err != nil || strings.Contains(string(unit), "NoNewPrivileges") || !strings.Contains(string(unit), "Type=notify") {
		t.Errorf("--no-sandbox unit: %v\n%s", err, unit)
	}
	ctl.wantCalls(t, "install --no-start")
}

// A system unit never runs as root by default: without --run-as, and
// without sudo naming the user who ran it, install and print are refused
// (a root service's tasks could write /root/.ssh/authorized_keys). sudo's
// SUDO_USER is used; root takes an explicit --run-as root, with a warning.
func TestServiceSystemNeverDefaultsToRoot(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	run := []string{"--", "--control-plane", "https://cp.example.com", "--token-file", tokenFile(t)}
	envWith := func(sudoUser string) []string {
		return []string{"XDG_CONFIG_HOME=" + t.TempDir(), "SUDO_USER=" + sudoUser, "PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	}
	for _, c := range []struct{ name, sudoUser string }{{"no sudo", ""}, {"sudo from root", "root"}} {
		// --dry-run and print write nothing, whatever the outcome: a test
		// must not put a unit into /etc when it fails.
		for _, verb := range [][]string{{"install", "--dry-run"}, {"print"}} {
			t.Run(c.name+" "+verb[0], func(t *testing.T) {
				args := append(append([]string{"service"}, verb...), "--system")
				r := runAgentEnv(t, envWith(c.sudoUser), append(args, run...)...)
				wantOneLineError(t, r, 2, "--system needs --run-as USER")
			})
		}
	}

	t.Run("sudo names the user", func(t *testing.T) {
		u, err := service.LookupUser("nobody")
		if err != nil || u.Uid == "0" {
			t.Skip("no account nobody")
		}
		r := runAgentEnv(t, envWith("nobody"), append([]string{"service", "print", "--system"}, run...)...)
		v := unitValues(r.stdout)
		if r.code != 0 || len(v["User"]) != 1 || v["User"][0] != "nobody" || strings.Contains(strings.Join(v["ReadWritePaths"], " "), "/root") {
			t.Errorf("print --system under sudo -u nobody: want User=nobody and /root not writable: %+v", r)
		}
	})
	t.Run("--run-as root said", func(t *testing.T) {
		r := runAgentEnv(t, envWith(""), append([]string{"service", "install", "--system", "--run-as", "root", "--dry-run"}, run...)...)
		v := unitValues(strings.TrimPrefix(r.stdout, "would write "))
		if r.code != 0 || len(v["User"]) != 1 || v["User"][0] != "root" {
			t.Errorf("install --system --run-as root: want User=root: %+v", r)
		}
		// (The token file is in this test's /tmp, which is warned of too.)
		if !regexp.MustCompile(`(?m)^agent: warning: the service runs as root \(--run-as root\): its tasks can write /root, ~/.ssh included$`).MatchString(r.stderr) {
			t.Errorf("install --run-as root does not warn, in one line: %q", r.stderr)
		}
	})
	ctl.wantCalls(t, "refused installs")
}

// install copies the agent binary out of where it was built to
// ~/.local/bin/agent and the unit runs that copy; --name installs a second
// agent beside the first, with a unit, an environment file and a data
// directory of its own; restart and logs reach the named unit.
func TestServiceNamedBesideTheFirst(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	journal := newFakeCtl(t, "journalctl")
	configHome, stateHome, home := t.TempDir(), t.TempDir(), t.TempDir()
	path := ctl.dir + string(filepath.ListSeparator) + journal.dir + string(filepath.ListSeparator) + os.Getenv("PATH")
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + configHome, "XDG_STATE_HOME=" + stateHome, "PATH=" + path}
	run := []string{"--", "--control-plane", "https://cp.example.com", "--token-file", tokenFile(t)}
	bin := filepath.Join(home, ".local", "bin", "agent")

	for _, c := range []struct{ name, unit, data, envFile string }{
		{"", "agent.service", "agent", "agent.env"},
		{"b", "agent-b.service", "agent-b", "agent-b.env"},
	} {
		args := []string{"service", "install"}
		if c.name != "" {
			args = append(args, "--name", c.name)
		}
		r := runAgentEnv(t, env, append(args, run...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "copied ") || !strings.Contains(r.stdout, " to "+bin) {
			t.Fatalf("install --name %q: want the binary copied to %s: %+v", c.name, bin, r)
		}
		ctl.wantCalls(t, "install "+c.name, "--user|daemon-reload|", "--user|enable|--now|"+c.unit+"|")
		unit, err := os.ReadFile(filepath.Join(configHome, "systemd", "user", c.unit))
		must(t, err)
		v := unitValues(string(unit))
		words := unitWords(t, string(unit))
		if words[0] != bin || words[len(words)-1] != filepath.Join(stateHome, c.data) {
			t.Errorf("%s runs %q, want %s with --data-dir %s", c.unit, words, bin, filepath.Join(stateHome, c.data))
		}
		if got := v["EnvironmentFile"]; len(got) != 1 || got[0] != "-"+filepath.Join(configHome, "agent", c.envFile) {
			t.Errorf("%s: EnvironmentFile=%q, want %s", c.unit, got, c.envFile)
		}
		if st, err := os.Stat(filepath.Join(configHome, "agent", c.envFile)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", c.envFile, err, st)
		}
	}
	// The copy is the agent, whole and runnable.
	cmd := agentCmd(t.Context(), nil, "version")
	cmd.Path = bin
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), "agent ") {
		t.Errorf("%s version: %v %q", bin, err, out)
	}

	for _, c := range []struct {
		args []string
		ctl  *fakeCtl
		want string
	}{
		{[]string{"restart", "--name", "b"}, ctl, "--user|restart|agent-b.service|"},
		{[]string{"restart"}, ctl, "--user|restart|agent.service|"},
		{[]string{"logs", "--name", "b"}, journal, "--user|-u|agent-b.service|-n|100|-f|"},
		{[]string{"logs", "--no-follow"}, journal, "--user|-u|agent.service|-n|100|"},
	} {
		if r := runAgentEnv(t, env, append([]string{"service"}, c.args...)...); r.code != 0 {
			t.Errorf("service %q: %+v", c.args, r)
		}
		c.ctl.wantCalls(t, strings.Join(c.args, " "), c.want)
	}
	must(t, os.WriteFile(ctl.answer, []byte("ActiveState=active\nSubState=running\nMainPID=7\n"), 0o600))
	r := runAgentEnv(t, env, "service", "status", "--name", "b")
	if r.code != 0 || !strings.Contains(r.stdout, filepath.Join(stateHome, "agent-b")) || !strings.Contains(r.stdout, "agent service logs --name b") {
		t.Errorf("status --name b: want its data directory and how to read its logs: %+v", r)
	}
	ctl.took(t)

	wantOneLineError(t, runAgentEnv(t, env, "service", "status", "--name", "B/../x"), 2, `--name "B/../x"`)
	wantOneLineError(t, runAgentEnv(t, env, "service", "logs", "--name", "c"), 1, "not installed: there is no "+filepath.Join(configHome, "systemd", "user", "agent-c.service"))
	wantOneLineError(t, runAgentEnv(t, env, append([]string{"service", "print", "--bin", "/x", "--no-copy"}, run...)...), 2, "--bin and --no-copy")
	ctl.wantCalls(t, "refusals")
	journal.wantCalls(t, "refusals")
}

// --bin puts the copy elsewhere (a directory takes agent below it);
// --no-copy runs the binary where it is, and says what that means.
func TestServiceBinaryPlace(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	home, dir := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + t.TempDir(), "XDG_STATE_HOME=" + t.TempDir(), "PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	run := []string{"--", "--control-plane", "https://cp.example.com", "--token-file", tokenFile(t)}
	self, err := os.Executable()
	must(t, err)
	self, err = filepath.EvalSymlinks(self)
	must(t, err)

	r := runAgentEnv(t, env, append([]string{"service", "install", "--no-start", "--bin", dir}, run...)...)
	if _, err := os.Stat(filepath.Join(dir, "agent")); r.code != 0 || err != nil {
		t.Errorf("install --bin DIR: want DIR/agent: %v %+v", err, r)
	}
	r = runAgentEnv(t, env, append([]string{"service", "print", "--no-copy"}, run...)...)
	if words := unitWords(t, r.stdout); r.code != 0 || words[0] != self {
		t.Errorf("print --no-copy runs %q, want %s", words[0], self)
	}
	r = runAgentEnv(t, env, append([]string{"service", "install", "--no-start", "--no-copy"}, run...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "the service runs "+self+" where it is") {
		t.Errorf("install --no-copy does not say it runs the binary where it is: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(home, ".local")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--bin and --no-copy wrote below the home directory: %v", err)
	}
	ctl.wantCalls(t, "no start")
}

// service print and install resolve --repo NAME=PATH as agent run reads
// it: the path made absolute against the installer's directory (the
// service's is another), ~/ the home directory, the name left as it is;
// a path that is not there is refused at install, not at the service's
// first start.
func TestServiceRepoPathsAbsolute(t *testing.T) {
	t.Parallel()
	dir, home := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "app"), 0o700))
	must(t, os.MkdirAll(filepath.Join(home, "src", "docs"), 0o700))
	tok := tokenFile(t)
	run := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := agentCmd(ctx, []string{"HOME=" + home}, append([]string{"service", "print", "--", "--control-plane", "https://cp.example.com", "--token-file", tok}, args...)...)
		cmd.Dir = dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{stdout: out.String(), stderr: errb.String(), code: code}
	}
	r := run("--repo", "app=./app", "--repo=docs=~/src/docs")
	if r.code != 0 {
		t.Fatalf("service print: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"--repo app=" + filepath.Join(dir, "app"), "--repo=docs=" + filepath.Join(home, "src", "docs")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the unit lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, dir+"/app=") {
		t.Errorf("the repository's name was made a path:\n%s", r.stdout)
	}
	// The agent writes the repository's git directory: the unit lets it,
	// and says which paths its private /tmp hides (these tests' are there).
	if !regexp.MustCompile(`(?m)^ReadWritePaths=.* -` + regexp.QuoteMeta(filepath.Join(dir, "app")) + `( |$)`).MatchString(r.stdout) {
		t.Errorf("the unit does not let the service write the repository:\n%s", r.stdout)
	}
	for _, want := range []string{"warning: --repo " + filepath.Join(dir, "app") + ": the service has a private /tmp", "warning: --token-file " + tok + ": the service has a private /tmp"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("service print does not warn %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "note: --repo") {
		t.Errorf("a repository in the home directory is noted as opened:\n%s", r.stderr)
	}
	wantOneLineError(t, run("--repo", "gone=./gone"), 2, "--repo "+filepath.Join(dir, "gone")+": no such file")
	wantOneLineError(t, run("--repo", "./app"), 2, "--repo ./app: want NAME=PATH")
}

// An install the service manager refuses (no user manager, say) is
// undone: a first install leaves no unit, environment file, binary or
// directory it made; a reinstall puts the unit and binary it replaced
// back. Nothing is left half installed.
func TestServiceInstallUndoneWhenItCannotFinish(t *testing.T) {
	t.Parallel()
	ctl := newFakeCtl(t, "systemctl")
	configHome, home, top := t.TempDir(), t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + configHome, "PATH=" + ctl.dir + string(filepath.ListSeparator) + os.Getenv("PATH")}
	data := filepath.Join(top, "state", "agent")
	bin := filepath.Join(home, ".local", "bin", "agent")
	unit := filepath.Join(configHome, "systemd", "user", service.UnitName)
	envFile := filepath.Join(configHome, "agent", "agent.env")
	install := []string{"service", "install", "--", "--control-plane", "https://cp.example.com", "--token-file", tokenFile(t), "--data-dir", data}

	must(t, os.WriteFile(ctl.fail, []byte("Failed to connect to bus: No medium found\n"), 0o600))
	r := runAgentEnv(t, env, install...)
	if r.code == 0 || !strings.Contains(r.stderr, "Failed to connect to bus") || !strings.Contains(r.stderr, "install undone: removed "+unit) {
		t.Fatalf("install without a user manager: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, p := range []string{unit, envFile, bin, data, filepath.Join(top, "state")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the failed install left %s (%v)", p, err)
		}
	}

	// Installed once, then a reinstall that fails: the first is put back.
	must(t, os.Remove(ctl.fail))
	if r := runAgentEnv(t, env, install...); r.code != 0 {
		t.Fatalf("install: %+v", r)
	}
	before, err := os.ReadFile(unit)
	must(t, err)
	must(t, os.WriteFile(ctl.fail, []byte("Failed to connect to bus\n"), 0o600))
	again := append(append([]string{}, install...), "--max-concurrent", "3")
	if r := runAgentEnv(t, env, again...); r.code == 0 || !strings.Contains(r.stderr, "install undone: put back "+unit) {
		t.Fatalf("a reinstall that fails: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	after, err := os.ReadFile(unit)
	if err != nil || string(after) != string(before) {
		t.Errorf("the unit after a failed reinstall: %v\n%s", err, after)
	}
	if st, err := os.Stat(bin); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("the binary after a failed reinstall: %v", err)
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), ".agent-*")); len(matches) > 0 {
		t.Errorf("left behind: %v", matches)
	}
}
