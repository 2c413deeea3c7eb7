package service

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testTarget is a service of the current user's with its config and
// state below temporary directories; system makes it a system service run
// as root (its files below SystemUnitDir, which the test does not write).
func testTarget(t *testing.T, m Manager, system bool) Target {
	t.Helper()
	me, err := user.Current()
	must(t, err)
	tg := Target{Manager: m, System: system, Account: me, ConfigHome: t.TempDir(), StateHome: t.TempDir()}
	if system {
		tg.Account, err = user.LookupId("0")
		must(t, err)
	}
	return tg
}

// testSpec is a spec for tg running agent run with args and its default
// data directory, as the command makes one.
func testSpec(tg Target, args ...string) Spec {
	dataDir := tg.DefaultDataDir()
	return Spec{Target: tg, Binary: "/opt/agent bin/agent", Source: "/opt/agent bin/agent",
		Args: append(args, "--data-dir", dataDir), DataDir: dataDir, Path: "/usr/local/bin:/usr/bin:/bin",
		Stop: StopTimeout(0, 0), Sandbox: true, Files: map[string][]string{}}
}

// writeFile writes text to path, 0600, its directory made.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o700))
	must(t, os.WriteFile(path, []byte(text), 0o600))
}

// The names of a service follow --name and --system, and the managers'
// places for them.
func TestTargetNames(t *testing.T) {
	user := testTarget(t, Systemd, false)
	named := user
	named.Name = "b"
	system := testTarget(t, Systemd, true)
	launchdUser := testTarget(t, Launchd, false)
	launchdSystem := testTarget(t, Launchd, true)
	launchdSystem.Name = "c"
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"user unit", user.File(), filepath.Join(user.ConfigHome, "systemd", "user", "agent.service")},
		{"user env file", user.EnvFile(), filepath.Join(user.ConfigHome, "agent", "agent.env")},
		{"user data", user.DefaultDataDir(), filepath.Join(user.StateHome, "agent")},
		{"user config", user.ConfigFile(), map[bool]string{false: filepath.Join(user.ConfigHome, "agent", "agent.toml"), true: "/etc/agent/agent.toml"}[user.Account.Uid == "0"]},
		{"named unit", named.File(), filepath.Join(named.ConfigHome, "systemd", "user", "agent-b.service")},
		{"named env file", named.EnvFile(), filepath.Join(named.ConfigHome, "agent", "agent-b.env")},
		{"named data", named.DefaultDataDir(), filepath.Join(named.StateHome, "agent-b")},
		{"system unit", system.File(), filepath.Join(SystemUnitDir, "agent.service")},
		{"system env file", system.EnvFile(), "/etc/agent/agent.env"},
		{"root system data", system.DefaultDataDir(), "/var/lib/agent"},
		{"launch agent", launchdUser.File(), filepath.Join(launchdUser.Account.HomeDir, "Library", "LaunchAgents", "dev.edgeagent.agent.plist")},
		{"launch agent log", launchdUser.LogFile(), filepath.Join(launchdUser.Account.HomeDir, "Library", "Logs", "agent", "agent.log")},
		{"launch daemon", launchdSystem.File(), filepath.Join(LaunchDaemonsDir, "dev.edgeagent.agent.c.plist")},
		{"launch daemon data", launchdSystem.DefaultDataDir(), filepath.Join(launchdSystem.Account.HomeDir, ".local", "state", "agent-c")},
		{"launch daemon log", launchdSystem.LogFile(), "/Library/Logs/agent/agent-c.log"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	if err := user.Installed(); err == nil || !strings.Contains(err.Error(), "not installed: there is no "+user.File()) {
		t.Errorf("Installed with no unit: %v", err)
	}
	writeFile(t, user.File(), "[Service]\n")
	must(t, user.Installed())
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"": true, "b": true, "build-2_x": true, strings.Repeat("a", 32): true,
		strings.Repeat("a", 33): false, "-b": false, "B": false, "a b": false, "a/b": false, "a.b": false, "a\n": false} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

// A failure that is the person's is a UsageError (the command exits 2);
// one of the machine is not.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	var ue UsageError
	if err := NeedFile("token-file", filepath.Join(t.TempDir(), "nope")); !errors.As(err, &ue) || !strings.HasSuffix(err.Error(), ": no such file") {
		t.Errorf("NeedFile of a missing file: %v, want a UsageError saying no such file", err)
	}
	if _, err := AbsolutePath("executor-bin", "no-such-cli-anywhere"); !errors.As(err, &ue) || err.Error() != "--executor-bin no-such-cli-anywhere: not found on PATH" {
		t.Errorf("AbsolutePath of a CLI not on PATH: %v", err)
	}
	if _, err := AbsolutePath("bin", ""); !errors.As(err, &ue) || err.Error() != "--bin is empty" {
		t.Errorf("AbsolutePath of nothing: %v", err)
	}
	// A name that is no unit name is said as the task views say text
	// (taskview.Visible), quoted.
	want := `--name "b\\x1b[2J": want up to 32 lower-case letters, digits, - and _, starting with a letter or digit`
	if _, err := NewTarget(Request{Manager: Systemd, Name: "b\x1b[2J"}); !errors.As(err, &ue) || err.Error() != want {
		t.Errorf("NewTarget of a bad name: %q", err)
	}
}

// A system service that writes a unit names who runs it: --run-as, else
// the user who ran sudo, never root unless --run-as root says so. A user
// service runs as the caller.
func TestNewTarget(t *testing.T) {
	configHome := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", configHome)
	me, err := user.Current()
	must(t, err)
	for _, c := range []struct {
		name    string
		r       Request
		account string // the account's name, or the usage error's start
		usage   bool
	}{
		{"user service", Request{Manager: Systemd, Writes: true}, me.Username, false},
		{"system, run as the sudo user", Request{Manager: Systemd, System: true, SudoUser: "nobody", Writes: true}, "nobody", false},
		{"system, --run-as over sudo", Request{Manager: Systemd, System: true, RunAs: "daemon", SudoUser: "nobody", Writes: true}, "daemon", false},
		{"system, --run-as root", Request{Manager: Launchd, System: true, RunAs: "root", Writes: true}, "root", false},
		{"system status: root's own", Request{Manager: Systemd, System: true}, "root", false},
		{"system status: the sudo user's", Request{Manager: Systemd, System: true, SudoUser: "nobody"}, "nobody", false},
		{"system, no one named", Request{Manager: Systemd, System: true, Writes: true}, "--system needs --run-as USER (sudo names you in SUDO_USER)", true},
		{"system, sudo from root", Request{Manager: Systemd, System: true, SudoUser: "root", Writes: true}, "--system needs --run-as USER (sudo names you in SUDO_USER)", true},
		{"--run-as for a user service", Request{Manager: Systemd, RunAs: "nobody", Writes: true}, "--run-as is for a system service", true},
		{"another manager", Request{Manager: "upstart"}, `--manager "upstart": want systemd or launchd`, true},
		{"a name that makes no unit", Request{Manager: Systemd, Name: "../x"}, `--name "../x": want up to 32`, true},
	} {
		tg, err := NewTarget(c.r)
		var ue UsageError
		switch {
		case c.usage && (!errors.As(err, &ue) || !strings.HasPrefix(err.Error(), c.account)):
			t.Errorf("%s: %v, want a usage error starting %q", c.name, err, c.account)
		case !c.usage && (err != nil || tg.Account.Username != c.account || tg.ConfigHome != configHome):
			t.Errorf("%s: %+v %v, want it run as %s", c.name, tg, err, c.account)
		}
	}
	if _, err := NewTarget(Request{Manager: Systemd, System: true, RunAs: "no-such-user-here", Writes: true}); err == nil || !strings.HasPrefix(err.Error(), "the service's user: ") {
		t.Errorf("--run-as someone who is not: %v", err)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/someone")
	if tg, err := NewTarget(Request{Manager: Systemd}); err != nil || tg.ConfigHome != "/home/someone/.config" {
		t.Errorf("ConfigHome without XDG_CONFIG_HOME: %q %v", tg.ConfigHome, err)
	}
}
