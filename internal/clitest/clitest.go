// Package clitest runs the real AI CLIs in tests: the pinned binaries that
// `make tools` installs under .tools/, each with a fresh home and a
// configuration that points it at a mockmodel server on loopback, and
// nowhere else.
package clitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/mockmodel"
)

var (
	installOnce sync.Once
	installErr  error
)

// Root finds the repository: the directory holding go.mod, upwards from
// the working directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// bin returns the pinned binary .tools/NAME, installing the tools once
// (scripts/tools.sh) when it is missing.
func bin(t testing.TB, name string) string {
	t.Helper()
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r, ".tools", name)
	if _, err := os.Stat(path); err != nil {
		installOnce.Do(func() {
			out, err := exec.Command(filepath.Join(r, "scripts", "tools.sh")).CombinedOutput()
			if err != nil {
				installErr = fmt.Errorf("scripts/tools.sh: %v\n%s", err, out)
			}
		})
		if installErr != nil {
			t.Fatalf("the pinned CLIs are not installed and could not be (run make tools): %v", installErr)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing after make tools: %v", path, err)
	}
	return path
}

// CodexBin is the pinned codex binary.
func CodexBin(t testing.TB) string { return bin(t, "codex") }

// ClaudeBin is the pinned Claude Code binary.
func ClaudeBin(t testing.TB) string { return bin(t, "claude") }

// CodexOptions tune CodexEnv.
type CodexOptions struct {
	// StreamIdleMS is Codex's stream idle timeout. Default 5000.
	StreamIdleMS int
	// NoRetryCaps leaves the mock provider's retries at Codex's defaults,
	// for a test that checks the agent caps them itself.
	NoRetryCaps bool
	// UserSandbox leaves sandbox_mode out of config.toml, as a person's
	// config usually does: Codex then looks for its own sandbox at start.
	UserSandbox bool
}

// CodexEnv makes a fresh CODEX_HOME whose config.toml points Codex at the
// mock (provider "mock", model gpt-5.5, approval policy never, full
// access, no analytics, plugins, update check or endless connection
// retries; request and stream retries 1), and returns the environment
// Codex needs: HOME, CODEX_HOME, MOCK_API_KEY=dummy and PATH. Codex
// warns on stderr that it will not create helper binaries under the
// temporary directory; that is harmless.
func CodexEnv(t testing.TB, mock *mockmodel.Server, opts CodexOptions) []string {
	t.Helper()
	home := t.TempDir()
	if opts.StreamIdleMS <= 0 {
		opts.StreamIdleMS = 5000
	}
	sandboxMode := "sandbox_mode = \"danger-full-access\"\n"
	if opts.UserSandbox {
		sandboxMode = ""
	}
	retries := "request_max_retries = 1\nstream_max_retries = 1\n"
	if opts.NoRetryCaps {
		retries = ""
	}
	cfg := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "mock"
approval_policy = "never"
%scheck_for_update_on_startup = false

[features]
plugins = false
unbounded_connection_retries = false

[analytics]
enabled = false

[model_providers.mock]
name = "Mock"
base_url = %q
wire_api = "responses"
env_key = "MOCK_API_KEY"
supports_websockets = false
stream_idle_timeout_ms = %d
%s`, sandboxMode, mock.OpenAIBaseURL(), opts.StreamIdleMS, retries)
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "MOCK_API_KEY=dummy", "PATH=" + os.Getenv("PATH")}
}

// ClaudeOptions tune ClaudeEnv. Their zero values set nothing, because
// the agent's claude executor sets both variables itself (from its own
// options) and a value here would override it; a test that runs the CLI
// directly sets them.
type ClaudeOptions struct {
	// MaxRetries is CLAUDE_CODE_MAX_RETRIES, the CLI's own retries
	// (its default is 10); negative for 0.
	MaxRetries int
	// APITimeout is API_TIMEOUT_MS, the CLI's wait for response headers
	// (its default is 10 minutes).
	APITimeout time.Duration
}

// ClaudeEnv makes a fresh HOME and CLAUDE_CONFIG_DIR and returns the
// environment that points Claude Code at the mock with no other traffic
// (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1): HOME, CLAUDE_CONFIG_DIR,
// ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY=dummy, PATH, and the options'.
func ClaudeEnv(t testing.TB, mock *mockmodel.Server, opts ClaudeOptions) []string {
	t.Helper()
	home := t.TempDir()
	env := []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=dummy", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"PATH=" + os.Getenv("PATH")}
	if opts.MaxRetries != 0 {
		env = append(env, fmt.Sprintf("CLAUDE_CODE_MAX_RETRIES=%d", max(opts.MaxRetries, 0)))
	}
	if opts.APITimeout > 0 {
		env = append(env, fmt.Sprintf("API_TIMEOUT_MS=%d", opts.APITimeout.Milliseconds()))
	}
	return env
}

// Env merges overrides into base: a NAME=VALUE in overrides replaces
// base's NAME.
func Env(base []string, overrides ...string) []string {
	out := make([]string, 0, len(base)+len(overrides))
	names := map[string]bool{}
	for _, kv := range overrides {
		n, _, _ := strings.Cut(kv, "=")
		names[n] = true
	}
	for _, kv := range base {
		if n, _, _ := strings.Cut(kv, "="); !names[n] {
			out = append(out, kv)
		}
	}
	return append(out, overrides...)
}

// OpenCodeBin is the pinned OpenCode binary.
func OpenCodeBin(t testing.TB) string { return bin(t, "opencode") }

// GeminiBin is the pinned Gemini CLI (a Node.js script).
func GeminiBin(t testing.TB) string { return bin(t, "gemini") }

// CodexACPBin is the pinned codex-acp binary.
func CodexACPBin(t testing.TB) string { return bin(t, "codex-acp") }

// ClaudeCodeACPBin is the pinned claude-code-acp (a Node.js script).
func ClaudeCodeACPBin(t testing.TB) string { return bin(t, "claude-code-acp") }

// OpenCodeModels are the models OpenCodeEnv's configuration gives its
// anthropic provider besides its catalog's, as --models names them: the
// mock answers any model by the prompt's scenario.
var OpenCodeModels = []string{"anthropic/claude-a", "anthropic/claude-b"}

// OpenCodeEnv makes a fresh HOME whose OpenCode configuration
// (~/.config/opencode/opencode.json) points its anthropic provider at
// the mock, with a dummy key and the models claude-a and claude-b, and
// makes anthropic/claude-a its model; it returns the environment: HOME and
// PATH.
func OpenCodeEnv(t testing.TB, mock *mockmodel.Server) []string {
	t.Helper()
	home := OpenCodeHome(t, fmt.Sprintf(`{
  "provider": {"anthropic": {"options": {"baseURL": %q, "apiKey": "dummy"},
    "models": {"claude-a": {"name": "Claude A (mock)"}, "claude-b": {"name": "Claude B (mock)"}}}},
  "model": "anthropic/claude-a"
}
`, mock.URL()+"/v1"))
	return []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
}

// OpenCodeHome makes a fresh home whose OpenCode configuration file
// (~/.config/opencode/opencode.json) holds config, and returns it. The
// configuration directory is as OpenCode leaves it after its first run
// online (its plugin package installed, as package.json and
// package-lock.json name it): on one it never installed into, OpenCode
// tries the npm registry at every start, even where it cannot write.
func OpenCodeHome(t testing.TB, config string) string {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o700); err != nil {
		t.Fatal(err)
	}
	installed := map[string]string{
		"opencode.json":     config,
		"package.json":      `{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}` + "\n",
		"package-lock.json": `{"lockfileVersion":3,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}}}` + "\n",
	}
	for name, content := range installed {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// GeminiEnv makes a fresh HOME for Gemini CLI and returns the environment
// that points it at the mock (GOOGLE_GEMINI_BASE_URL) with a dummy key
// (GEMINI_API_KEY): HOME, the two and PATH (its node among it).
func GeminiEnv(t testing.TB, mock *mockmodel.Server) []string {
	t.Helper()
	return []string{"HOME=" + t.TempDir(), "GEMINI_API_KEY=dummy", "GOOGLE_GEMINI_BASE_URL=" + mock.URL(), "PATH=" + os.Getenv("PATH")}
}

// PrivateTempDir points the process's temporary directory (TMPDIR, so
// t.TempDir) at a directory no other user may write, under the user's
// cache directory, for the tests of a CLI that refuses files under a
// directory others may write (Gemini CLI its settings, under /tmp). It
// returns a function that removes it and restores TMPDIR; call it from
// TestMain.
func PrivateTempDir() (restore func(), err error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "agent-tests-")
	if err != nil {
		return nil, err
	}
	old, had := os.LookupEnv("TMPDIR")
	os.Setenv("TMPDIR", dir)
	return func() {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
		os.RemoveAll(dir)
	}, nil
}
