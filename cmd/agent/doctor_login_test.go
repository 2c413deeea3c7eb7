package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeagent/agent/doctor"
	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/internal/mockmodel"
)

// freshCLIHome is an empty home for the real CLIs: HOME, CODEX_HOME (made:
// codex refuses one that is not there) and CLAUDE_CONFIG_DIR in a
// temporary directory, and every credential variable blanked so that
// none of the environment the tests run in leaks in.
func freshCLIHome(t *testing.T) (env []string, codexHome, claudeDir string) {
	t.Helper()
	home := t.TempDir()
	codexHome, claudeDir = filepath.Join(home, ".codex"), filepath.Join(home, ".claude")
	must(t, os.Mkdir(codexHome, 0o700))
	return []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "CLAUDE_CONFIG_DIR=" + claudeDir,
		"OPENAI_API_KEY=", "CODEX_API_KEY=", "ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=", "CLAUDE_CODE_OAUTH_TOKEN=", "MOCK_API_KEY="}, codexHome, claudeDir
}

// The first real task needs the executor's CLI logged in: agent doctor
// runs the real pinned CLIs, with an empty home, against a real control
// plane, and fails the login check with the command that logs in; with a
// key it passes. No key is ever printed, and nothing calls out: codex
// login status and claude auth status read their files only, and a key in
// the environment is decided on without running the CLI.
func TestDoctorLoginRealCLIs(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	const secret = "dummy-key-4f1c9e2a7b"
	for _, tc := range []struct {
		name     string
		executor string
		// setup returns more environment and flags, given the fresh
		// CLI home's environment, CODEX_HOME and CLAUDE_CONFIG_DIR.
		setup          func(t *testing.T, env []string, codexHome, claudeDir string) ([]string, []string)
		pass           bool
		detail, fixRE  string
		noOtherFailure bool
	}{
		{name: "codex not logged in", executor: "codex", detail: "codex is not logged in (codex login status, CODEX_HOME ",
			fixRE: `^CODEX_HOME=\S+/\.codex codex login, as the user agent run runs as`},
		{name: "codex with OPENAI_API_KEY only", executor: "codex",
			detail: "OPENAI_API_KEY is set, but codex reads its key from the login, not from the environment",
			fixRE:  `^printenv OPENAI_API_KEY \| CODEX_HOME=\S+ codex login --with-api-key`,
			setup: func(*testing.T, []string, string, string) ([]string, []string) {
				return []string{"OPENAI_API_KEY=" + secret}, nil
			}},
		{name: "codex logged in with an API key", executor: "codex", pass: true, detail: "logged in with an API key (codex login status; the key not shown)",
			setup: func(t *testing.T, env []string, _, _ string) ([]string, []string) {
				// codex login --with-api-key stores the key without a request.
				login := exec.Command(clitest.CodexBin(t), "login", "--with-api-key")
				login.Env, login.Stdin = append(os.Environ(), env...), strings.NewReader(secret+"\n")
				if out, err := login.CombinedOutput(); err != nil {
					t.Fatalf("codex login --with-api-key: %v\n%s", err, out)
				}
				return nil, nil
			}},
		{name: "codex provider key not passed on", executor: "codex", detail: "provider mock: MOCK_API_KEY is set in the agent's environment, but codex does not get it",
			fixRE: `^pass it on: --executor-env MOCK_API_KEY`,
			setup: func(t *testing.T, _ []string, codexHome, _ string) ([]string, []string) {
				writeMockProvider(t, codexHome)
				return []string{"MOCK_API_KEY=" + secret}, nil
			}},
		{name: "codex provider key", executor: "codex", pass: true, detail: "provider mock: MOCK_API_KEY is set (not shown)",
			setup: func(t *testing.T, _ []string, codexHome, _ string) ([]string, []string) {
				writeMockProvider(t, codexHome)
				return []string{"MOCK_API_KEY=" + secret}, []string{"--executor-env", "MOCK_API_KEY"}
			}},
		{name: "claude not logged in", executor: "claude", detail: "claude is not logged in (claude auth status: loggedIn false, config directory ",
			fixRE: `^CLAUDE_CONFIG_DIR=\S+/\.claude claude auth login, as the user agent run runs as; or set ANTHROPIC_API_KEY`},
		{name: "claude with ANTHROPIC_API_KEY", executor: "claude", pass: true, detail: "ANTHROPIC_API_KEY is set (not shown)",
			setup: func(*testing.T, []string, string, string) ([]string, []string) {
				return []string{"ANTHROPIC_API_KEY=" + secret}, nil
			}},
		{name: "claude with ANTHROPIC_AUTH_TOKEN", executor: "claude", pass: true, detail: "ANTHROPIC_AUTH_TOKEN is set (not shown)",
			setup: func(*testing.T, []string, string, string) ([]string, []string) {
				return []string{"ANTHROPIC_AUTH_TOKEN=" + secret}, nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, codexHome, claudeDir := freshCLIHome(t)
			bin := clitest.CodexBin(t)
			if tc.executor == "claude" {
				bin = clitest.ClaudeBin(t)
			}
			args := []string{"--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", privateDir(t),
				"--executor", tc.executor, "--executor-bin", bin}
			if tc.setup != nil {
				moreEnv, moreArgs := tc.setup(t, env, codexHome, claudeDir)
				env, args = append(env, moreEnv...), append(args, moreArgs...)
			}
			code, checks := doctorChecks(t, env, args...)
			login := findCheck(checks, doctor.CheckLogin)
			if !strings.Contains(login.Detail, tc.detail) {
				t.Errorf("login: %s %q, want it to say %q", login.Result, login.Detail, tc.detail)
			}
			for _, ch := range checks {
				if ch.Name != doctor.CheckLogin && ch.Result == doctor.CheckFail {
					t.Errorf("%s fails too: %q", ch.Name, ch.Detail)
				}
			}
			if tc.pass {
				if login.Result != doctor.CheckPass || login.Fix != "" || code != 0 {
					t.Errorf("exit %d; login: %s %q (fix %q), want a pass and exit 0", code, login.Result, login.Detail, login.Fix)
				}
			} else if login.Result != doctor.CheckFail || !regexp.MustCompile(tc.fixRE).MatchString(login.Fix) || code != 1 {
				t.Errorf("exit %d; login: %s (fix %q), want a failure whose fix matches %s and exit 1", code, login.Result, login.Fix, tc.fixRE)
			}

			// The table: the failure's fix under it, and never the key.
			r := runAgentEnv(t, env, append([]string{"doctor", "--timeout", "5m"}, args...)...)
			if strings.Contains(r.stdout+r.stderr, secret) || strings.Contains(r.stdout, secret[len(secret)-5:]) { // codex login status shows its ends
				t.Errorf("doctor printed the key:\n%s%s", r.stdout, r.stderr)
			}
			if !tc.pass {
				fix := strings.TrimPrefix(tc.fixRE, "^")
				if r.code != 1 || !regexp.MustCompile(`(?m)^  login\s+`+fix).MatchString(r.stdout) {
					t.Errorf("doctor: exit %d, stdout:\n%s", r.code, r.stdout)
				}
			}
		})
	}
}

// writeMockProvider makes the codex home's configuration send the turns
// to a provider of the user's own, whose key is MOCK_API_KEY.
func writeMockProvider(t *testing.T, codexHome string) {
	t.Helper()
	writeFile(t, filepath.Join(codexHome, "config.toml"), `model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "http://127.0.0.1:9/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
`)
}

// With --models, doctor checks them against codex's bundled catalog (no
// request): a model it lacks warns. Claude Code cannot list its models
// offline, so there is no models check for it.
func TestDoctorModels(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	for _, tc := range []struct {
		executor, models string
		result           doctor.CheckResult // "" for no models check
		detail           string
	}{
		{"codex", "gpt-5.5", doctor.CheckPass, "gpt-5.5 in codex's model catalog"},
		{"codex", "gpt-5.5,no-such-model", doctor.CheckWarn, "no-such-model is not in codex's model catalog ("},
		{"claude", "no-such-model", "", ""},
	} {
		t.Run(tc.executor+" "+tc.models, func(t *testing.T) {
			env, _, _ := freshCLIHome(t)
			bin := clitest.CodexBin(t)
			if tc.executor == "claude" {
				bin = clitest.ClaudeBin(t)
			}
			_, checks := doctorChecks(t, env, "--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", privateDir(t),
				"--executor", tc.executor, "--executor-bin", bin, "--models", tc.models)
			got := findCheck(checks, doctor.CheckModels)
			if got.Result != tc.result || !strings.Contains(got.Detail, tc.detail) {
				t.Errorf("models: %s %q, want %q saying %q", got.Result, got.Detail, tc.result, tc.detail)
			}
		})
	}
}

// A work directory or a repository's git directory this user may not
// write fails the workspaces check, naming it: a task's worktree, branch
// and commits go there.
func TestDoctorWorkspacesWritable(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	for _, tc := range []struct {
		name   string
		lock   func(repo, work string) string // returns the directory made read-only
		detail string
	}{
		{"git directory", func(repo, _ string) string { return filepath.Join(repo, ".git", "objects") }, `repository "app": `},
		{"work directory", func(_, work string) string { return work }, "work directory "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, work := gittest.NewRepo(t), filepath.Join(t.TempDir(), "work")
			must(t, os.Mkdir(work, 0o700))
			args := []string{"--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", privateDir(t), "--executor", "sample",
				"--repo", "app=" + repo, "--work-dir", work}
			code, checks := doctorChecks(t, nil, args...)
			if ws := findCheck(checks, doctor.CheckWorkspaces); code != 0 || ws.Result != doctor.CheckPass {
				t.Fatalf("before: exit %d, workspaces %s %q", code, ws.Result, ws.Detail)
			}
			dir := tc.lock(repo, work)
			readOnly(t, dir)
			code, checks = doctorChecks(t, nil, args...)
			ws := findCheck(checks, doctor.CheckWorkspaces)
			if code != 1 || ws.Result != doctor.CheckFail || !strings.Contains(ws.Detail, tc.detail+dir+": not writable by uid") || !strings.Contains(ws.Fix, "chown -R USER DIR") {
				t.Errorf("exit %d, workspaces %s %q (fix %q), want a failure naming %s", code, ws.Result, ws.Detail, ws.Fix, dir)
			}
		})
	}
}

// readOnly makes dir unwritable to this process until the test ends: mode
// 0555, and for root, whom modes do not stop, the immutable attribute.
func readOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Getuid() != 0 {
		must(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Fatalf("root, and chattr +i is not available here to make %s read-only: %v %s", dir, err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
}

// OpenCode's login and models, as agent doctor checks them on the real
// pinned binary (opencode models: no request): no provider with a key
// fails with what gives it one; a key in the environment passes, naming
// the provider and never the key; --models are checked against what it
// lists.
func TestDoctorOpenCode(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	const secret = "dummy-key-9d2e41b7c3"
	for _, tc := range []struct {
		name, models    string
		key             bool
		login, modelsIs doctor.CheckResult
		detail          string // the login's, or the models'
	}{
		{name: "no provider logged in", login: doctor.CheckFail, detail: "no provider has a credential OpenCode can use"},
		{name: "a key in the environment", key: true, login: doctor.CheckPass, detail: "providers with a credential: anthropic (opencode models; keys not shown)"},
		{name: "a model it lists", key: true, models: "anthropic/claude-sonnet-4-5", login: doctor.CheckPass, modelsIs: doctor.CheckPass,
			detail: "anthropic/claude-sonnet-4-5 in opencode's model catalog"},
		{name: "a model it does not list", key: true, models: "anthropic/no-such-model", login: doctor.CheckPass, modelsIs: doctor.CheckWarn,
			detail: "anthropic/no-such-model is not in opencode's model catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _, _ := freshCLIHome(t)
			env = append(env, "HOME="+clitest.OpenCodeHome(t, "{}\n"), "OPENROUTER_API_KEY=", "GEMINI_API_KEY=", "GOOGLE_GENERATIVE_AI_API_KEY=", "OPENCODE_API_KEY=")
			if tc.key {
				env = append(env, "ANTHROPIC_API_KEY="+secret)
			}
			args := []string{"--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", privateDir(t),
				"--executor", "opencode", "--executor-bin", clitest.OpenCodeBin(t)}
			if tc.models != "" {
				args = append(args, "--models", tc.models)
			}
			code, checks := doctorChecks(t, env, args...)
			login, models := findCheck(checks, doctor.CheckLogin), findCheck(checks, doctor.CheckModels)
			if login.Result != tc.login || models.Result != tc.modelsIs {
				t.Errorf("exit %d; login %s %q, models %s %q; want %s and %q", code, login.Result, login.Detail, models.Result, models.Detail, tc.login, tc.modelsIs)
			}
			if said := login.Detail + " " + models.Detail; !strings.Contains(said, tc.detail) {
				t.Errorf("doctor says %q, want %q", said, tc.detail)
			}
			if tc.login == doctor.CheckFail && !strings.Contains(login.Fix, "opencode auth login") {
				t.Errorf("the login's fix %q does not say how to log in", login.Fix)
			}
			if exe := findCheck(checks, doctor.CheckExecutor); exe.Result != doctor.CheckPass || !strings.Contains(exe.Detail, "opencode 1.18.33") {
				t.Errorf("executor: %s %q", exe.Result, exe.Detail)
			}
			for _, ch := range checks {
				if strings.Contains(ch.Detail+ch.Fix, secret) {
					t.Errorf("doctor --json printed the key in %s: %q %q", ch.Name, ch.Detail, ch.Fix)
				}
			}
			// The words a person reads, once: each run of OpenCode
			// costs seconds.
			if tc.key && tc.models == "" {
				r := runAgentEnv(t, env, append([]string{"doctor", "--timeout", "5m"}, args...)...)
				if strings.Contains(r.stdout+r.stderr, secret) {
					t.Errorf("doctor printed the key:\n%s%s", r.stdout, r.stderr)
				}
			}
		})
	}
}

// agent doctor initializes an ACP agent (no prompt, no request) and says
// who it is and what it does not support: an agent it knows nothing of
// reaches no model host of its own when confined; a command that does not
// speak ACP fails.
func TestDoctorACPAgents(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	renamed := filepath.Join(t.TempDir(), "some-agent")
	must(t, os.Symlink(clitest.CodexACPBin(t), renamed))
	for _, tc := range []struct {
		name, executor, bin string
		args                []string
		result              doctor.CheckResult
		detail              []string
	}{
		{"opencode", "opencode", clitest.OpenCodeBin(t), nil, doctor.CheckPass, []string{"OpenCode 1.18.33 (", ") speaks ACP; continues its sessions"}},
		{"opencode through acp", "acp", clitest.OpenCodeBin(t), []string{"--executor-arg", "acp"}, doctor.CheckPass, []string{"OpenCode 1.18.33", "continues its sessions"}},
		{"codex-acp", "acp", clitest.CodexACPBin(t), nil, doctor.CheckPass, []string{"codex-acp 0.16.0", "continues its sessions"}},
		{"gemini", "acp", clitest.GeminiBin(t), nil, doctor.CheckPass, []string{"gemini-cli 0.61.0", "continues its sessions"}},
		{"an agent it knows nothing of", "acp", renamed, nil, doctor.CheckWarn, []string{"codex-acp 0.16.0", "its model's hosts are not known to the agent"}},
		{"not an ACP agent", "acp", "/bin/cat", []string{"--executor-arg", "/dev/null"}, doctor.CheckFail, []string{"does not start as an ACP agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _, _ := freshCLIHome(t)
			env = append(env, "HOME="+clitest.OpenCodeHome(t, "{}\n"))
			args := append([]string{"--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", privateDir(t),
				"--executor", tc.executor, "--executor-bin", tc.bin}, tc.args...)
			_, checks := doctorChecks(t, env, args...)
			got := findCheck(checks, doctor.CheckAgent)
			if got.Result != tc.result {
				t.Errorf("agent: %s %q, want %s", got.Result, got.Detail, tc.result)
			}
			for _, d := range tc.detail {
				if !strings.Contains(got.Detail, d) {
					t.Errorf("agent: %q, want it to say %q", got.Detail, d)
				}
			}
		})
	}
}

// agent doctor asks an ACP agent for a session, without a prompt, in the
// environment an attempt's agent gets: Gemini CLI and codex-acp refuse
// one without a credential, which fails the login check with what gives
// them one; a key their sign-in takes passes (codex-acp is not signed in
// by doctor: it would keep the key); the models a session offers check
// --models. No key is printed, and no model is asked (the mock sees no
// request).
func TestDoctorACPAgentLoginAndModels(t *testing.T) {
	c := startCP(t, freeAddr(t), t.TempDir())
	mock, err := mockmodel.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Close()
	const secret = "dummy-key-7a3e51c0"
	codexMock := func(t *testing.T) []string {
		return clitest.CodexEnv(t, mock, clitest.CodexOptions{})
	}
	// Gemini CLI with its API moved needs no key (it takes the base URL
	// for a gateway's): the key cases move it to the mock.
	geminiKey := func(*testing.T) []string {
		return []string{"GEMINI_API_KEY=" + secret, "GOOGLE_GEMINI_BASE_URL=" + mock.URL()}
	}
	for _, tc := range []struct {
		name, bin, models string
		env               func(t *testing.T) []string
		login, modelsIs   doctor.CheckResult
		detail, fix       string
	}{
		{name: "gemini without a key", bin: clitest.GeminiBin(t), login: doctor.CheckFail,
			detail: "Gemini API key is missing or not configured", fix: "GEMINI_API_KEY"},
		{name: "gemini with a key", bin: clitest.GeminiBin(t), env: geminiKey,
			login: doctor.CheckPass, detail: "opened a session"},
		{name: "gemini with a model it offers", bin: clitest.GeminiBin(t), models: "gemini-2.5-pro",
			env: geminiKey, login: doctor.CheckPass, modelsIs: doctor.CheckPass,
			detail: "gemini-2.5-pro in acp's model catalog"},
		{name: "gemini with a model it does not offer", bin: clitest.GeminiBin(t), models: "gemini-0-nano",
			env: geminiKey, login: doctor.CheckPass, modelsIs: doctor.CheckWarn,
			detail: "gemini-0-nano is not in acp's model catalog"},
		{name: "codex-acp not logged in", bin: clitest.CodexACPBin(t), login: doctor.CheckFail, detail: "Authentication required", fix: "codex login"},
		{name: "codex-acp with a key its sign-in takes", bin: clitest.CodexACPBin(t),
			env: func(*testing.T) []string { return []string{"OPENAI_API_KEY=" + secret} }, login: doctor.CheckPass,
			detail: "an attempt signs it in with OPENAI_API_KEY"},
		{name: "codex-acp with a provider of its own", bin: clitest.CodexACPBin(t), models: "gpt-5.5", env: codexMock,
			login: doctor.CheckPass, modelsIs: doctor.CheckPass, detail: "gpt-5.5 in acp's model catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _, _ := freshCLIHome(t)
			env = append(env, "GEMINI_API_KEY=", "GOOGLE_API_KEY=", "GOOGLE_GEMINI_BASE_URL=")
			if tc.env != nil {
				env = append(env, tc.env(t)...)
			}
			args := []string{"--control-plane", c.url(), "--token-file", c.tokenFile, "--data-dir", privateDir(t),
				"--executor", "acp", "--executor-bin", tc.bin}
			if tc.models != "" {
				args = append(args, "--models", tc.models)
			}
			before := len(mock.Requests())
			code, checks := doctorChecks(t, env, args...)
			login, models := findCheck(checks, doctor.CheckLogin), findCheck(checks, doctor.CheckModels)
			if login.Result != tc.login || models.Result != tc.modelsIs {
				t.Errorf("exit %d; login %s %q, models %s %q; want %s and %q", code, login.Result, login.Detail, models.Result, models.Detail, tc.login, tc.modelsIs)
			}
			if said := login.Detail + " " + models.Detail; !strings.Contains(said, tc.detail) {
				t.Errorf("doctor says %q, want %q", said, tc.detail)
			}
			if !strings.Contains(login.Fix, tc.fix) {
				t.Errorf("the login's fix %q, want it to say %q", login.Fix, tc.fix)
			}
			for _, ch := range checks {
				if strings.Contains(ch.Detail+ch.Fix, secret) {
					t.Errorf("doctor printed the key in %s: %q %q", ch.Name, ch.Detail, ch.Fix)
				}
			}
			if n := len(mock.Requests()) - before; n != 0 {
				t.Errorf("doctor asked the model %d times", n)
			}
		})
	}
}
