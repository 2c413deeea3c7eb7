package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/service"
)

// serviceEnv points the service commands run in this process at temporary
// directories: the user's config (units, environment file) and state
// (the default data directory).
func serviceEnv(t *testing.T) (configHome, stateHome string) {
	t.Helper()
	configHome, stateHome = t.TempDir(), t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", configHome)
	t.Setenv("XDG_STATE_HOME", stateHome)
	return configHome, stateHome
}

// tokenFile makes a token file and returns its path.
func tokenFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(p, []byte("secret-token-value-0123456789abcdef\n"), 0o600))
	return p
}

func testSpec(t *testing.T, system bool, manager service.Manager, env map[string]string, args ...string) service.Spec {
	t.Helper()
	f := serviceFlags{manager: string(manager), system: system, writes: true}
	if system {
		f.runAs = "root" // said, as a system unit needs
	}
	tg, err := f.target()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := runFlagsOfService.SpecFrom(args, tg, env)
	if err != nil {
		t.Fatalf("specFrom %q: %v", args, err)
	}
	return spec
}

// unitWords are the words of the unit's ExecStart=, as the service
// package reads them back.
func unitWords(t *testing.T, unit string) []string {
	t.Helper()
	file := filepath.Join(t.TempDir(), service.UnitName)
	must(t, os.WriteFile(file, []byte(unit), 0o644))
	inst, err := service.ReadServiceFile(service.Systemd, file)
	must(t, err)
	return append([]string{inst.Binary, "run"}, inst.Args...)
}

// unitValues are the unit's Key=value lines, by key.
func unitValues(unit string) map[string][]string {
	v := map[string][]string{}
	for _, l := range strings.Split(unit, "\n") {
		if k, val, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			v[k] = append(v[k], val)
		}
	}
	return v
}

func TestSystemdUnit(t *testing.T) {
	configHome, stateHome := serviceEnv(t)
	tok := tokenFile(t)
	for _, c := range []struct {
		name    string
		system  bool
		want    map[string]string
		without []string
	}{
		{"user", false, map[string]string{
			"EnvironmentFile": "-" + filepath.Join(configHome, "agent", "agent.env"),
			"WantedBy":        "default.target",
		}, []string{"User", "After", "StateDirectory"}},
		{"system", true, map[string]string{
			"EnvironmentFile": "-/etc/agent/agent.env",
			"WantedBy":        "multi-user.target",
			"After":           "network-online.target",
			"User":            "root",
			"StateDirectory":  "agent",
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"--control-plane", "https://cp.example.com", "--token-file", tok,
				"--drain-timeout", "20s", "--kill-grace=2s", "--executor-command", "my-cli --json $HOME 100%"}
			spec := testSpec(t, c.system, service.Systemd, nil, args...)
			unit := spec.SystemdUnit()
			v := unitValues(unit)
			want := map[string]string{
				"Type": "notify", "WatchdogSec": "60s", "Restart": "on-failure", "RestartPreventExitStatus": "2",
				"KillMode": "process", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
				// 20s drain + 3 x 2s kill grace + 5s flush + 2s offline + 5s margin
				"TimeoutStopSec": "38s",
				"Environment":    "PATH=" + service.ServicePath(os.Getenv("PATH")),
			}
			for k, val := range c.want {
				want[k] = val
			}
			for k, val := range want {
				if got := v[k]; len(got) != 1 || got[0] != val {
					t.Errorf("%s=%q, want %q", k, got, val)
				}
			}
			for _, k := range c.without {
				if _, ok := v[k]; ok {
					t.Errorf("unit has %s=%q", k, v[k])
				}
			}
			dataDir := filepath.Join(stateHome, "agent")
			if c.system {
				dataDir = "/var/lib/agent"
			}
			wantWords := append(append([]string{spec.Binary, "run"}, args...), "--data-dir", dataDir)
			if got := unitWords(t, unit); !slices.Equal(got, wantWords) {
				t.Errorf("ExecStart words\n got %q\nwant %q", got, wantWords)
			}
			if strings.Contains(unit, "secret-token-value") {
				t.Error("the unit holds the token")
			}
		})
	}
}

// Every path flag given after -- is made absolute against the current
// directory; a file the service needs that is not there is refused by name.
func TestServicePathsAbsolute(t *testing.T) {
	serviceEnv(t)
	dir := t.TempDir()
	t.Chdir(dir)
	must(t, os.WriteFile("token", []byte("x\n"), 0o600))
	must(t, os.WriteFile("agent.toml", []byte("max-concurrent = 3\n"), 0o600))
	must(t, os.WriteFile("my-codex", []byte("#!/bin/sh\n"), 0o700))
	bin := t.TempDir()
	must(t, os.WriteFile(filepath.Join(bin, "codex-on-path"), []byte("#!/bin/sh\n"), 0o700))
	t.Setenv("PATH", bin+string(filepath.ListSeparator)+os.Getenv("PATH"))

	base := []string{"--control-plane", "https://cp.example.com"}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"separate values", []string{"--token-file", "token", "--data-dir", "data", "--work-dir", "../w", "--config", "agent.toml"},
			[]string{"--token-file", filepath.Join(dir, "token"), "--data-dir", filepath.Join(dir, "data"),
				"--work-dir", filepath.Join(filepath.Dir(dir), "w"), "--config", filepath.Join(dir, "agent.toml")}},
		{"with =", []string{"--token-file=./token", "--insecure", "--executor-bin=./my-codex", "--data-dir=/abs/data"},
			[]string{"--token-file=" + filepath.Join(dir, "token"), "--insecure", "--executor-bin=" + filepath.Join(dir, "my-codex"), "--data-dir=/abs/data"}},
		{"binary on PATH", []string{"--token-file", "token", "--executor-bin", "codex-on-path", "--data-dir", "d"},
			[]string{"--token-file", filepath.Join(dir, "token"), "--executor-bin", filepath.Join(bin, "codex-on-path"), "--data-dir", filepath.Join(dir, "d")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := testSpec(t, false, service.Systemd, nil, append(slices.Clone(base), c.args...)...)
			if want := append(slices.Clone(base), c.want...); !slices.Equal(spec.Args, want) {
				t.Errorf("args\n got %q\nwant %q", spec.Args, want)
			}
		})
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing token file", []string{"--token-file", "nope"}, "--token-file " + filepath.Join(dir, "nope") + ": no such file"},
		{"missing executor binary", []string{"--token-file", "token", "--executor-bin", "./gone"}, "--executor-bin " + filepath.Join(dir, "gone") + ": no such file"},
		{"executor binary not on PATH", []string{"--token-file", "token", "--executor-bin", "no-such-cli"}, "--executor-bin no-such-cli: not found on PATH"},
		{"missing config", []string{"--token-file", "token", "--config=other.toml"}, "--config " + filepath.Join(dir, "other.toml") + ": no such file"},
		{"no token", nil, "AGENT_TOKEN in "},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := serviceFlags{manager: string(service.Systemd)}
			tg, err := f.target()
			must(t, err)
			_, err = runFlagsOfService.SpecFrom(append(slices.Clone(base), c.args...), tg, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// The token may come from the environment file instead of a token file;
// the unit names the file, never the token.
func TestServiceTokenInEnvFile(t *testing.T) {
	serviceEnv(t)
	spec := testSpec(t, false, service.Systemd, map[string]string{"AGENT_TOKEN": "secret-token-value"}, "--control-plane", "https://cp.example.com")
	unit := spec.SystemdUnit()
	if strings.Contains(unit, "secret-token-value") || strings.Contains(unit, "--token-file") {
		t.Errorf("unit:\n%s", unit)
	}
}

// A unit whose agent re-attaches to running attempts (the default) kills
// only the agent on stop: systemd's mixed mode would SIGKILL the keepers
// left in the unit's cgroup, cutting every turn at a restart or an
// upgrade. With --reattach-grace 0 the agent stops its attempts itself,
// and what is left at the timeout is killed.
func TestSystemdUnitKillModeFollowsReattach(t *testing.T) {
	serviceEnv(t)
	tok := tokenFile(t)
	for _, c := range []struct {
		grace []string
		want  string
	}{
		{nil, "process"},
		{[]string{"--reattach-grace", "2m"}, "process"},
		{[]string{"--reattach-grace", "0"}, "mixed"},
		{[]string{"--reattach-grace=0s"}, "mixed"},
	} {
		args := append([]string{"--control-plane", "https://cp.example.com", "--token-file", tok}, c.grace...)
		v := unitValues(testSpec(t, false, service.Systemd, nil, args...).SystemdUnit())
		if got := v["KillMode"]; len(got) != 1 || got[0] != c.want {
			t.Errorf("%v: KillMode=%q, want %q", c.grace, got, c.want)
		}
	}
}
