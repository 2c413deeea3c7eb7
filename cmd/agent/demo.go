package main

import (
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/serve"
	"github.com/edgeagent/agent/demo"
	"github.com/edgeagent/agent/runner/executors"
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
			opts := demo.Options{DataDir: dataDir, Out: cmd.OutOrStdout(), Version: agentVersion(), Command: invokedAs(), ExecutorKind: kind,
				StartControlPlane: func(cp demo.ControlPlane) (string, func(), error) {
					return serve.Loopback(cp.Dir, cp.Token, cp.OperatorToken, cp.HeartbeatInterval, cp.Logger)
				}}
			if slices.Contains(demo.CLIs, kind) {
				return demo.RunCLI(cmd.Context(), opts, bin)
			}
			if kind != "sample" {
				return usagef("--executor %q: want sample, codex, claude or opencode", kind)
			}
			exe, err := executors.Settings{Kind: "sample", KillGrace: 5 * time.Second}.Build()
			if err != nil {
				return err
			}
			opts.Executor = exe
			// Subtasks: the sample executor runs this binary's agent subtask.
			if self, err := os.Executable(); err == nil {
				opts.SelfBin = self
			}
			return demo.Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep the demo's files here (default: a temporary directory)")
	cmd.Flags().StringVar(&kind, "executor", "sample", "sample (built in), codex, claude or opencode (the real CLI against an embedded mock model)")
	cmd.Flags().StringVar(&bin, "executor-bin", "", "the codex, claude or opencode binary (default: on PATH, else .tools/ after make tools)")
	return cmd
}
