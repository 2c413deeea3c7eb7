package main

import (
	"fmt"
	"time"

	"github.com/edgeagent/agent/outbox"
	"github.com/spf13/cobra"
)

// purgeResult is what `outbox purge --json` prints.
type purgeResult struct {
	outbox.PurgeResult
	Compaction outbox.CompactResult `json:"compaction"`
}

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
			if err := requireOutbox(dataDir); err != nil {
				return err
			}
			o, err := outbox.Open(outboxDir(dataDir), outbox.Options{})
			if err != nil {
				return explainOutboxErr(dataDir, err)
			}
			defer o.Close()
			var cutoff time.Time // zero: every dead record
			if olderThan > 0 {
				cutoff = time.Now().Add(-olderThan)
			}
			var res purgeResult
			if res.PurgeResult, err = o.PurgeDead(cutoff); err != nil {
				return err
			}
			if res.Purged > 0 {
				if res.Compaction, err = o.Compact(nil); err != nil {
					return err
				}
			}
			if err := o.Close(); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "purged %d dead records (%s)", res.Purged, bytesHuman(res.Bytes))
			if res.Kept > 0 {
				fmt.Fprintf(out, "; %d dead for less than %s kept", res.Kept, olderThan)
			}
			if res.Purged > 0 {
				fmt.Fprintf(out, "; outbox compacted from %s to %s", bytesHuman(res.Compaction.BytesBefore), bytesHuman(res.Compaction.BytesAfter))
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&dead, "dead", false, "purge dead records (required)")
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "only records marked dead longer ago than this, e.g. 72h (default: every dead record)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (see docs/commands.md: JSON output)")
	return cmd
}
