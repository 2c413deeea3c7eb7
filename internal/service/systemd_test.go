package service

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

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

// A unit says what the agent needs of systemd, and is read back as it was
// made: the binary and agent run's flags, quoted where systemd would
// expand them, and the data directory.
func TestSystemdUnit(t *testing.T) {
	for _, c := range []struct {
		name    string
		system  bool
		want    map[string]string
		without []string
	}{
		{"user", false, map[string]string{
			"WantedBy": "default.target",
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
			tg := testTarget(t, Systemd, c.system)
			spec := testSpec(tg, "--control-plane", "https://cp.example.com", "--token-file", "/etc/agent/token",
				"--executor-command", `my-cli --json $HOME 100% "quoted" back\slash`)
			spec.Stop = StopTimeout(20*time.Second, 2*time.Second)
			spec.Limits = Limits{TasksMax: "512", MemoryMax: "8G"}
			unit := spec.SystemdUnit()
			v := unitValues(unit)
			want := map[string]string{
				"Type": "notify", "WatchdogSec": "60s", "Restart": "on-failure", "RestartPreventExitStatus": "2",
				"KillMode": "process", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
				// 20s drain + 3 x 2s kill grace + 5s flush + 2s offline + 5s margin
				"TimeoutStopSec":  "38s",
				"Environment":     "PATH=/usr/local/bin:/usr/bin:/bin",
				"EnvironmentFile": "-" + filepath.Join(tg.ConfigHome, "agent", "agent.env"),
				"TasksMax":        "512",
				"MemoryMax":       "8G",
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
			file := filepath.Join(t.TempDir(), UnitName)
			writeFile(t, file, unit)
			inst, err := ReadServiceFile(Systemd, file)
			must(t, err)
			if inst.Binary != spec.Binary || !slices.Equal(inst.Args, spec.Args) || inst.DataDir != spec.DataDir {
				t.Errorf("read back %+v\nwant binary %q, args %q, data directory %s", inst, spec.Binary, spec.Args, spec.DataDir)
			}
			if wantUser := map[bool]string{true: "root"}[c.system]; inst.User != wantUser {
				t.Errorf("read back User %q, want %q", inst.User, wantUser)
			}
		})
	}
}

// A unit whose agent re-attaches to running attempts (the default) kills
// only the agent on stop: systemd's mixed mode would SIGKILL the keepers
// left in the unit's cgroup, cutting every turn at a restart or an
// upgrade. With --reattach-grace 0 the agent stops its attempts itself,
// and what is left at the timeout is killed.
func TestSystemdUnitKillModeFollowsReattach(t *testing.T) {
	tg := testTarget(t, Systemd, false)
	for _, c := range []struct {
		grace []string
		want  string
	}{
		{nil, "process"},
		{[]string{"--reattach-grace", "2m"}, "process"},
		{[]string{"--reattach-grace", "0"}, "mixed"},
		{[]string{"--reattach-grace=0s"}, "mixed"},
		{[]string{"--reattach-grace=0"}, "mixed"},
	} {
		v := unitValues(testSpec(tg, append([]string{"--control-plane", "https://cp.example.com"}, c.grace...)...).SystemdUnit())
		if got := v["KillMode"]; len(got) != 1 || got[0] != c.want {
			t.Errorf("%v: KillMode=%q, want %q", c.grace, got, c.want)
		}
		if got := ReattachOff(c.grace); got != (c.want == "mixed") {
			t.Errorf("ReattachOff(%q) = %v", c.grace, got)
		}
	}
}

func TestSystemdWordsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, w := range []string{"plain", "two words", `back\slash`, `"quoted"`, "$HOME", "100%", "a;b", "", "tab\there"} {
		t.Run(w, func(t *testing.T) {
			if got := systemdWords("x " + systemdQuote(w) + " y"); !slices.Equal(got, []string{"x", w, "y"}) {
				t.Errorf("%q -> %q -> %q", w, systemdQuote(w), got)
			}
		})
	}
}

// The sandbox keeps the home directory and what the agent writes
// writable; a path it hides (a private /tmp) is said, and so is one it
// opens beyond the home directory. --no-sandbox leaves it all out.
func TestSystemdSandbox(t *testing.T) {
	tg := testTarget(t, Systemd, false)
	home := tg.Account.HomeDir
	spec := testSpec(tg)
	spec.DataDir = "/srv/agent data"
	spec.WorkDir = filepath.Join(home, "work")
	spec.Repos = []string{"/srv/repos/app", filepath.Join(home, "src", "lib")}
	spec.Files = map[string][]string{"token-file": {"/tmp/token"}, "isolation-write": {"/srv/repos/app/cache"}}
	v := unitValues(spec.SystemdUnit())
	want := systemdValue("-"+home) + ` "-/srv/agent data" -/srv/repos/app`
	if got := v["ReadWritePaths"]; len(got) != 1 || got[0] != want {
		t.Errorf("ReadWritePaths=%q, want %q", got, want)
	}
	hidden, opened := spec.Unreachable()
	if len(hidden) != 1 || !strings.HasPrefix(hidden[0], "--token-file /tmp/token: the service has a private /tmp") {
		t.Errorf("hidden: %q, want the token file in /tmp", hidden)
	}
	wantOpened := []string{
		"--isolation-write /srv/repos/app/cache is outside " + home + ": the unit makes it writable (ReadWritePaths=)",
		"--repo /srv/repos/app is outside " + home + ": the unit makes it writable (ReadWritePaths=)",
	}
	if !slices.Equal(opened, wantOpened) {
		t.Errorf("opened:\n got %q\nwant %q", opened, wantOpened)
	}
	if n := spec.Notices(); len(n) != 3 || n[0] != "agent: warning: "+hidden[0] || n[1] != "agent: note: "+wantOpened[0] || n[2] != "agent: note: "+wantOpened[1] {
		t.Errorf("notices %q", n)
	}

	spec.Sandbox = false
	if unit := spec.SystemdUnit(); strings.Contains(unit, "ProtectSystem") || strings.Contains(unit, "ReadWritePaths") {
		t.Errorf("--no-sandbox unit has sandboxing:\n%s", unit)
	}
	if hidden, opened := spec.Unreachable(); hidden != nil || opened != nil {
		t.Errorf("--no-sandbox: hidden %q, opened %q", hidden, opened)
	}
}

// systemd-analyze, where it is installed, accepts the units, and scores
// their sandboxing below 5 (lower is safer).
func TestSystemdAnalyze(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze")
	}
	score := regexp.MustCompile(`Overall exposure level for agent\.service: ([0-9.]+)`)
	for _, system := range []bool{false, true} {
		name := map[bool]string{false: "user", true: "system"}[system]
		t.Run(name, func(t *testing.T) {
			tg := testTarget(t, Systemd, system)
			spec := testSpec(tg, "--control-plane", "https://cp.example.com", "--token-file", "/etc/agent/token")
			dir := t.TempDir()
			spec.Binary = filepath.Join(dir, "agent") // verify wants one it can run
			must(t, os.WriteFile(spec.Binary, []byte("#!/bin/sh\n"), 0o755))
			unit := filepath.Join(dir, UnitName)
			must(t, os.WriteFile(unit, []byte(spec.SystemdUnit()), 0o644))
			// The user manager's mode needs a runtime directory of its own.
			runtimeDir := filepath.Join(dir, "run")
			must(t, os.Mkdir(runtimeDir, 0o700))
			analyze := func(args ...string) (string, error) {
				if !system {
					args = append([]string{"--user"}, args...)
				}
				cmd := exec.Command("systemd-analyze", args...)
				cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtimeDir, "SYSTEMD_LOG_COLOR=0")
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			if out, err := analyze("verify", unit); err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("systemd-analyze verify: %v\n%s\nunit:\n%s", err, out, spec.SystemdUnit())
			}
			out, err := analyze("security", "--offline=true", unit)
			m := score.FindStringSubmatch(out)
			if err != nil || m == nil {
				t.Fatalf("systemd-analyze security --offline=true: %v\n%s", err, out)
			}
			n, _ := strconv.ParseFloat(m[1], 64)
			t.Logf("systemd-analyze security: %s unit scores %.1f", name, n)
			if n >= 5.0 {
				t.Errorf("exposure %.1f, want below 5.0:\n%s", n, out)
			}
		})
	}
}
