package demo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/opencode"
)

// CLIs are the real CLIs the demo runs its story through.
var CLIs = []string{"codex", "claude", "opencode"}

// RunCLI is Run through a real CLI, opts.ExecutorKind (one of CLIs):
// bin, else the one on PATH, else the repository's .tools/; pointed at a
// mock model the demo embeds on loopback, with a home of its own, so that
// it needs no account and no network.
func RunCLI(ctx context.Context, opts Options, bin string) error {
	kind := opts.ExecutorKind
	path, err := cliBinary(kind, bin)
	if err != nil {
		return err
	}
	mock, err := mockmodel.Start()
	if err != nil {
		return fmt.Errorf("start the mock model: %w", err)
	}
	defer mock.Close()
	home, err := os.MkdirTemp("", "agent-demo-"+kind+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	if opts.Executor, err = cliExecutor(kind, path, home, mock); err != nil {
		return err
	}
	if err := opts.Executor.Probe(ctx); err != nil {
		return fmt.Errorf("%s cannot start: %v; %s", kind, err, installHint(kind))
	}
	opts.Tasks, opts.Models = cliTasks(kind)
	opts.Timeout = 5 * time.Minute
	fmt.Fprintf(opts.Out, "Running %s (%s) against a mock model on %s\n", kind, path, mock.URL())
	return Run(ctx, opts)
}

// cliBinary finds the CLI: bin, PATH, or the repository's .tools/.
func cliBinary(kind, bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	if p, err := exec.LookPath(kind); err == nil {
		return p, nil
	}
	local := filepath.Join(".tools", kind)
	if _, err := os.Stat(local); err == nil {
		return filepath.Abs(local)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return "", fmt.Errorf("%s is not installed: %s", kind, installHint(kind))
}

// installHint says how to get a CLI.
func installHint(kind string) string {
	tested := cli.Tested[kind]
	return "npm install -g " + tested.Package + "@" + tested.Version + " (or make tools in the repository), or give --executor-bin"
}

// cliExecutor builds the CLI's executor with a home of its own in home,
// pointed at the mock model and nowhere else.
func cliExecutor(kind, path, home string, mock *mockmodel.Server) (runner.Executor, error) {
	if kind == "opencode" {
		return openCode(path, home, mock)
	}
	if kind == "claude" {
		return claude.New(claude.Config{AllowedTools: []string{"Bash"}, Base: cli.Base{Bin: path, Grace: 2 * time.Second,
			Env: []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"), "ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=demo"}}})
	}
	cfg := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "mock"
check_for_update_on_startup = false

[features]
plugins = false

[analytics]
enabled = false

[model_providers.mock]
name = "Mock"
base_url = %q
wire_api = "responses"
env_key = "MOCK_API_KEY"
supports_websockets = false
stream_idle_timeout_ms = 5000
`, mock.OpenAIBaseURL())
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return codex.New(codex.Config{Provider: "mock", Sandbox: "danger-full-access", Base: cli.Base{Bin: path, Grace: 2 * time.Second,
		Env: []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "MOCK_API_KEY=demo"}}})
}

// openCode builds the OpenCode executor with a home of its own in home,
// its anthropic provider pointed at the mock model. Its configuration
// directory is as OpenCode leaves it after a first run online (its plugin
// package named installed), so that it does not try the npm registry.
func openCode(path, home string, mock *mockmodel.Server) (runner.Executor, error) {
	dir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o700); err != nil {
		return nil, err
	}
	files := map[string]string{
		"opencode.json":     fmt.Sprintf(`{"provider": {"anthropic": {"options": {"baseURL": %q, "apiKey": "demo"}}}}`+"\n", mock.URL()+"/v1"),
		"package.json":      `{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}` + "\n",
		"package-lock.json": `{"lockfileVersion":3,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}}}` + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	return opencode.New(opencode.Config{Base: cli.Base{Bin: path, Grace: 2 * time.Second, Env: []string{"HOME=" + home}}})
}

// cliTasks tell the sample's story through a real CLI: the mock line in
// each prompt says how the mock model answers.
func cliTasks(kind string) ([]api.CreateTaskRequest, []string) {
	small, big := "gpt-5.4-mini", "gpt-5.5"
	models := []string{small, big}
	// OpenCode retries a 5xx itself for about a minute before it says
	// so: its story's failure after the side effect is a 429.
	transient := "r500"
	switch kind {
	case "claude":
		small, big = "claude-haiku-4-5", "claude-opus-5-5"
		models = []string{small, big}
	case "opencode":
		small, big = "claude-haiku-4-5", "claude-opus-4-5"
		models = []string{"anthropic/" + small, "anthropic/" + big}
		transient = "r429"
	}
	return []api.CreateTaskRequest{
		{Title: "Say hello", Prompt: "Say hello to the operator."},
		{Title: "Summarize this week's issues", Prompt: "Summarize this week's issues.\nmock: " + small + "=r429 " + big + "=text"},
		{Title: "Rotate the staging logs", Prompt: "Rotate the staging logs.\nmock: shell\nmock-cmd: echo rotated > rotated.txt"},
		{Title: "Rotate the staging credentials", Prompt: "Rotate the staging credentials.\nmock: shell after=" + transient + "\nmock-cmd: echo rotated > credentials.txt"},
		{Title: "Migrate the billing database", Prompt: "Migrate the billing database.\nmock: shell after=quota\nmock-cmd: echo migrated > migration.txt"},
	}, models
}
