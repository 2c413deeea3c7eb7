package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/store/filestore"
	"github.com/edgeagent/agent/demo"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/opencode"
)

func newDemoCmd() *cobra.Command {
	var dataDir, kind, bin string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole system on embedded defaults and show what happens",
		Long: `demo starts a reference control plane on loopback, submits a few sample
tasks, and runs an agent with the built-in sample executor (a real
subprocess that behaves like an AI CLI). One task succeeds, one fails with a
rate limit and succeeds on the retry with the next model, and one has a side
effect before a network error, so the safety gate stops it for a person to
decide. It shows live progress, then each task's attempt timeline and the
outbox's figures, and exits 0 once every task has ended.

With --executor codex, claude or opencode it runs the same story through the
real CLI (Codex app server, Claude Code, or OpenCode in its ACP mode),
pointed at a mock model server the demo embeds on loopback: no account, no
network. The CLI must be installed: npm install -g @openai/codex@0.169.0,
@anthropic-ai/claude-code@2.1.330 or opencode-ai@1.18.33, or make tools in
the repository, or give --executor-bin.

With --data-dir the files stay there for inspection with agent tasks and
agent outbox; without it they go in a temporary directory, removed at the end.`,
		Example: `  agent demo
  agent demo --executor codex
  agent demo --executor opencode
  agent demo --executor claude --data-dir ./demo-data`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := demo.Options{DataDir: dataDir, Out: cmd.OutOrStdout(), Version: agentVersion(), Command: invokedAs(), StartControlPlane: startDemoControlPlane, ExecutorKind: kind}
			switch kind {
			case "sample":
				f := executorFlags{kind: "sample", killGrace: 5 * time.Second}
				exe, err := f.build()
				if err != nil {
					return err
				}
				opts.Executor = exe
				// Subtasks: the sample executor runs this binary's agent subtask.
				if self, err := os.Executable(); err == nil {
					opts.SelfBin = self
				}
				return demo.Run(cmd.Context(), opts)
			case "codex", "claude", "opencode":
				path, err := demoBinary(kind, bin)
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
				if opts.Executor, err = demoExecutor(kind, path, home, mock); err != nil {
					return err
				}
				if err := opts.Executor.Probe(cmd.Context()); err != nil {
					return fmt.Errorf("%s cannot start: %v; %s", kind, err, installHint(kind))
				}
				opts.Tasks, opts.Models = demoCLITasks(kind)
				opts.Timeout = 5 * time.Minute
				fmt.Fprintf(cmd.OutOrStdout(), "Running %s (%s) against a mock model on %s\n", kind, path, mock.URL())
				return demo.Run(cmd.Context(), opts)
			}
			return usagef("--executor %q: want sample, codex, claude or opencode", kind)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep the demo's files here (default: a temporary directory)")
	cmd.Flags().StringVar(&kind, "executor", "sample", "sample (built in), codex, claude or opencode (the real CLI against an embedded mock model)")
	cmd.Flags().StringVar(&bin, "executor-bin", "", "the codex, claude or opencode binary (default: on PATH, else .tools/ after make tools)")
	return cmd
}

// startDemoControlPlane runs the reference control plane the demo asks for
// on a free port of loopback.
func startDemoControlPlane(cp demo.ControlPlane) (url string, stop func(), err error) {
	st, err := filestore.Open(cp.Dir, filestore.Options{Logger: cp.Logger})
	if err != nil {
		return "", nil, err
	}
	srv, err := server.New(server.Options{Store: st, Token: cp.Token, OperatorTokens: []string{cp.OperatorToken},
		HeartbeatInterval: cp.HeartbeatInterval, Logger: cp.Logger})
	if err != nil {
		st.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		st.Close()
		return "", nil, err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String(), func() { hs.Close(); srv.Close(); st.Close() }, nil
}

// demoBinary finds the CLI: the flag, PATH, or the repository's .tools/.
func demoBinary(kind, bin string) (string, error) {
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

// demoExecutor builds the CLI's executor with a home of its own in home,
// pointed at the mock model and nowhere else.
func demoExecutor(kind, path, home string, mock *mockmodel.Server) (runner.Executor, error) {
	if kind == "opencode" {
		return demoOpenCode(path, home, mock)
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

// demoOpenCode builds the OpenCode executor with a home of its own in
// home, its anthropic provider pointed at the mock model. Its
// configuration directory is as OpenCode leaves it after a first run
// online (its plugin package named installed), so that it does not try
// the npm registry.
func demoOpenCode(path, home string, mock *mockmodel.Server) (runner.Executor, error) {
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

// demoCLITasks tell the sample's story through a real CLI: the mock line
// in each prompt says how the mock model answers.
func demoCLITasks(kind string) ([]api.CreateTaskRequest, []string) {
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
