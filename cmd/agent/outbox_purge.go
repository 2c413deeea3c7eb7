package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/outboxview"
)

func newOutboxPurgeCmd() *cobra.Command {
	var (
		dataDir   string
		dead      bool
		olderThan time.Duration
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "purge --dead",
		Short: "Remove dead records (rejected for good by the control plane) from the outbox",
		Long: `purge --dead removes the outbox's dead records, those the control plane
rejected for good, which the outbox otherwise keeps for inspection; with
--older-than only those marked dead longer ago than that. Pending records are
never touched. The outbox is then compacted, so their bytes go.

The agent purges dead records on its own once they are older than its
--retention. Run this by hand with the agent stopped (it takes the lock).`,
		Example: `  agent outbox purge --dead
  agent outbox purge --dead --older-than 72h`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !dead {
				return usagef("say what to purge: --dead (the only records purge removes)")
			}
			if olderThan < 0 {
				return usagef("--older-than %s: want a duration of zero or more", olderThan)
			}
			var cutoff time.Time // zero: every dead record
			if olderThan > 0 {
				cutoff = time.Now().Add(-olderThan)
			}
			res, err := outboxview.PurgeDead(dataDir, cutoff)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Line(olderThan))
			return nil
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&dead, "dead", false, "purge dead records (required)")
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "only records marked dead longer ago than this, e.g. 72h (default: every dead record)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (see docs/commands.md: JSON output)")
	return cmd
}
