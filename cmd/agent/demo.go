package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/agent"
)

func newDemoCmd() *cobra.Command {
	var dataDir string
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

With --data-dir the files stay there for inspection with agent tasks and
agent outbox; without it they go in a temporary directory, removed at the end.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := executorFlags{kind: "sample", killGrace: 5 * time.Second}
			exe, err := f.build()
			if err != nil {
				return err
			}
			return agent.Demo(cmd.Context(), agent.DemoOptions{DataDir: dataDir, Out: cmd.OutOrStdout(), Executor: exe, Version: agentVersion()})
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep the demo's files here (default: a temporary directory)")
	return cmd
}
