package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/outbox"
)

func newOutboxStatsCmd() *cobra.Command {
	var (
		dataDir string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show outbox counts, size, oldest pending age and last compaction",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			snap, err := outbox.Inspect(outboxview.Dir(dataDir))
			if err != nil {
				return outboxview.Explain(dataDir, err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), snap.Stats)
			}
			return outboxview.WriteStats(cmd.OutOrStdout(), snap.Stats, time.Now())
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object (see docs/commands.md: JSON output)")
	return cmd
}
