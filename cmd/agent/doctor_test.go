package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeagent/agent/doctor"
	"github.com/edgeagent/agent/internal/testkit"
)

// doctorChecks runs agent doctor --json and returns its exit code and
// checks, after checking their order.
func doctorChecks(t *testing.T, env []string, args ...string) (int, []doctor.Check) {
	t.Helper()
	r := runAgentEnv(t, env, append([]string{"doctor", "--json", "--timeout", "5m"}, args...)...)
	var checks []doctor.Check
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
		t.Fatalf("doctor --json: %v: %+v", err, r)
	}
	if r.stderr != "" {
		t.Errorf("doctor wrote on stderr: %q", r.stderr)
	}
	want := []doctor.CheckName{doctor.CheckConfig, doctor.CheckToken, doctor.CheckDataDir, doctor.CheckLock, doctor.CheckOutbox,
		doctor.CheckDisk, doctor.CheckExecutor, doctor.CheckLogin, doctor.CheckIsolation, doctor.CheckDenied, doctor.CheckEgress, doctor.CheckTaskUser, doctor.CheckWorkspaces, doctor.CheckControlPlane, doctor.CheckAuth, doctor.CheckClock}
	models := 8
	if findCheck(checks, doctor.CheckAgent).Name != "" { // only for an ACP agent
		want = slices.Insert(want, 7, doctor.CheckAgent)
		models++
	}
	if findCheck(checks, doctor.CheckModels).Name != "" { // only where the CLI can tell
		want = slices.Insert(want, models, doctor.CheckModels)
	}
	if len(checks) != len(want) {
		t.Fatalf("%d checks, want %d: %+v", len(checks), len(want), checks)
	}
	for i, c := range checks {
		if c.Name != want[i] {
			t.Errorf("check %d is %s, want %s", i, c.Name, want[i])
		}
	}
	return r.code, checks
}

func findCheck(checks []doctor.Check, name doctor.CheckName) doctor.Check {
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	return doctor.Check{}
}

// privateDir is a directory of the test's with mode 0700 (t.TempDir's
// own directories follow the umask).
func privateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	must(t, os.Mkdir(dir, 0o700))
	return dir
}

func TestDoctorHealthy(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := filepath.Join(t.TempDir(), "data") // agent run makes it
	args := []string{"--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir, "--executor", "sample"}
	allPass := func(t *testing.T, checks []doctor.Check) {
		t.Helper()
		for _, ch := range checks {
			if ch.Name == doctor.CheckLogin && ch.Result == doctor.CheckSkip && strings.Contains(ch.Detail, "sample executor has no CLI login") {
				continue
			}
			if ch.Result != doctor.CheckPass || ch.Fix != "" {
				t.Errorf("%s: %s %q (fix %q), want a pass", ch.Name, ch.Result, ch.Detail, ch.Fix)
			}
		}
	}
	code, checks := doctorChecks(t, nil, args...)
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	allPass(t, checks)
	for name, detail := range map[doctor.CheckName]string{
		doctor.CheckToken:     "from " + c.tokenFile + " (mode 0600, not shown)",
		doctor.CheckDataDir:   "does not exist yet",
		doctor.CheckExecutor:  "sample: exec (",
		doctor.CheckIsolation: "landlock (ABI ",
		doctor.CheckEgress:    "network: tasks reach their executor's model API, through the agent's proxy",
		doctor.CheckTaskUser:  "tasks run as ",
		doctor.CheckAuth:      "the token from " + c.tokenFile + " accepted",
		doctor.CheckClock:     "within 1s",
	} {
		if got := findCheck(checks, name).Detail; !strings.Contains(got, detail) {
			t.Errorf("%s: %q does not say %q", name, got, detail)
		}
	}
	tok, err := os.ReadFile(c.tokenFile)
	must(t, err)

	// The table, for people.
	r := runAgent(t, append([]string{"doctor", "--timeout", "5m"}, args...)...)
	if r.code != 0 || r.stderr != "" || !regexp.MustCompile(`(?m)^CHECK\s+RESULT\s+DETAIL$`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "all 15 checks passed, 1 skipped") || strings.Contains(r.stdout, "to fix:") {
		t.Errorf("doctor: %+v", r)
	}
	if strings.Contains(r.stdout, strings.TrimSpace(string(tok))) {
		t.Error("doctor printed the token")
	}

	// An agent running on the data directory holds the lock: a pass that
	// names it, and doctor leaves it running.
	a := startAgentProc(t, c, dataDir)
	pidFile := filepath.Join(dataDir, "agent.pid")
	testkit.WaitFor(t, "the agent's pid file", func() bool { _, err := os.Stat(pidFile); return err == nil })
	code, checks = doctorChecks(t, nil, args...)
	if code != 0 {
		t.Errorf("with the agent running: exit %d, want 0", code)
	}
	allPass(t, checks)
	if got, want := findCheck(checks, doctor.CheckLock).Detail, "agent running, pid "+strconv.Itoa(a.cmd.Process.Pid); !strings.Contains(got, want) {
		t.Errorf("lock: %q, want %q", got, want)
	}
	if got := findCheck(checks, doctor.CheckDataDir).Detail; !strings.Contains(got, "mode 0700, yours") {
		t.Errorf("data-dir: %q", got)
	}
	select {
	case <-a.done:
		t.Fatalf("the agent stopped after doctor ran: %s", a.output())
	default:
	}
	if code := a.stop(); code != 0 {
		t.Errorf("the agent exited %d after doctor ran", code)
	}
}

func TestDoctorFindsWhatIsBroken(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	for _, tc := range []struct {
		name string
		// setup returns the flags that break it, given the healthy ones'
		// data directory and token file.
		setup        func(t *testing.T, dataDir, tokenFile string) []string
		failing      doctor.CheckName
		detail, fix  string
		skipped      []doctor.CheckName
		stillPassing []doctor.CheckName
	}{
		{name: "wrong token", failing: doctor.CheckAuth, detail: "refused the token from ", fix: "(agent controlplane serve prints the file that holds it",
			setup: func(t *testing.T, _, _ string) []string {
				bad := filepath.Join(privateDir(t), "token")
				writeFile(t, bad, "not-the-token-0123456789abcdef0123456789\n")
				return []string{"--token-file", bad}
			}},
		{name: "a person's operator token", failing: doctor.CheckAuth, detail: "it is an operator token, not the registration secret",
			fix:   "keep " + c.operatorFile + " for what it is; give --token-file the file of the control plane's registration secret",
			setup: func(t *testing.T, _, _ string) []string { return []string{"--token-file", c.operatorFile} }},
		{name: "control plane down", failing: doctor.CheckControlPlane, detail: "connection refused", fix: "start the control plane",
			skipped: []doctor.CheckName{doctor.CheckAuth, doctor.CheckClock},
			setup: func(t *testing.T, _, _ string) []string {
				return []string{"--control-plane", "http://" + freeAddr(t)}
			}},
		{name: "data dir 0755", failing: doctor.CheckDataDir, detail: "is open to others (mode 0755)", fix: "chmod 700 ",
			setup: func(t *testing.T, dataDir, _ string) []string {
				must(t, os.Chmod(dataDir, 0o755))
				return nil
			}},
		{name: "executor missing", failing: doctor.CheckExecutor, detail: "executor not found: /nonexistent/codex",
			fix: "npm install -g @openai/codex@0.169.0, or give --executor-bin",
			setup: func(t *testing.T, _, _ string) []string {
				return []string{"--executor", "codex", "--executor-bin", "/nonexistent/codex"}
			}},
		{name: "token file 0644", failing: doctor.CheckToken, detail: "readable by every user (mode 0644)", fix: "chmod 600 ",
			stillPassing: []doctor.CheckName{doctor.CheckAuth},
			setup: func(t *testing.T, _, tokenFile string) []string {
				open := filepath.Join(privateDir(t), "token")
				b, err := os.ReadFile(tokenFile)
				must(t, err)
				writeFile(t, open, string(b))
				must(t, os.Chmod(open, 0o644))
				return []string{"--token-file", open}
			}},
		{name: "bad config file", failing: doctor.CheckConfig, detail: `agent.toml:2: unknown key "max-concurent"; did you mean "max-concurrent"?`,
			fix:          "agent config check ",
			stillPassing: []doctor.CheckName{doctor.CheckControlPlane, doctor.CheckAuth, doctor.CheckExecutor, doctor.CheckDataDir},
			setup: func(t *testing.T, _, _ string) []string {
				file := filepath.Join(privateDir(t), "agent.toml")
				writeFile(t, file, "max-retries = 1\nmax-concurent = 3\n")
				return []string{"--config", file}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := privateDir(t)
			args := append([]string{"--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", dataDir, "--executor", "sample"},
				tc.setup(t, dataDir, c.tokenFile)...)
			code, checks := doctorChecks(t, nil, args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, ch := range checks {
				switch {
				case ch.Name == tc.failing:
					if ch.Result != doctor.CheckFail || !strings.Contains(ch.Detail, tc.detail) || !strings.Contains(ch.Fix, tc.fix) {
						t.Errorf("%s: %s %q (fix %q), want a failure saying %q (fix %q)", ch.Name, ch.Result, ch.Detail, ch.Fix, tc.detail, tc.fix)
					}
				case ch.Result == doctor.CheckFail:
					t.Errorf("%s fails too: %q", ch.Name, ch.Detail)
				}
			}
			for _, name := range tc.skipped {
				if ch := findCheck(checks, name); ch.Result != doctor.CheckSkip {
					t.Errorf("%s: %s %q, want it skipped", name, ch.Result, ch.Detail)
				}
			}
			for _, name := range tc.stillPassing {
				if ch := findCheck(checks, name); ch.Result != doctor.CheckPass {
					t.Errorf("%s: %s %q, want it still checked and passing", name, ch.Result, ch.Detail)
				}
			}

			// The table says the same, with the fix under it.
			r := runAgent(t, append([]string{"doctor", "--timeout", "5m"}, args...)...)
			fixLine := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(string(tc.failing)) + `\s+.*` + regexp.QuoteMeta(tc.fix))
			if r.code != 1 || r.stderr != "" || !strings.Contains(r.stdout, "\nto fix:\n") || !fixLine.MatchString(r.stdout) ||
				!strings.Contains(r.stdout, "1 of 16 checks failed") {
				t.Errorf("doctor: exit %d, stderr %q, stdout:\n%s", r.code, r.stderr, r.stdout)
			}
		})
	}
}

// What doctor prints of paths and answers goes through visible(): an
// escape sequence in a data directory's name is shown, not obeyed.
func TestDoctorEscapesUntrustedText(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "evil\x1b[2Jdir")
	must(t, os.Mkdir(dataDir, 0o755))
	r := runAgent(t, "doctor", "--data-dir", dataDir, "--executor", "sample")
	if r.code != 1 || strings.ContainsRune(r.stdout, 0x1b) || !strings.Contains(r.stdout, `evil\x1b[2Jdir`) {
		t.Errorf("doctor: exit %d, stdout %q", r.code, r.stdout)
	}
}
