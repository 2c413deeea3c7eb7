package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/agentview"
	"github.com/edgeagent/agent/internal/datadir"
)

func newHealthCmd() *cobra.Command {
	var (
		dataDir string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Show the executor's health grade and recent errors, as of the agent's last heartbeat (exit 1 when unavailable)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := datadir.ReadHealth(dataDir)
			if err != nil {
				return err
			}
			// A script can ask: exit 1 when the executor is unavailable.
			unavailable := exitCode(0)
			if h.Grade == health.Unavailable {
				unavailable = 1
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), h); err != nil {
					return err
				}
				return exitOr(unavailable)
			}
			agentview.WriteHealth(cmd.OutOrStdout(), h, dataDir, time.Now())
			return exitOr(unavailable)
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the health record as JSON")
	return cmd
}
