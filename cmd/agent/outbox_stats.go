package main

import (
	"fmt"
	"time"

	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/outbox"
	"github.com/spf13/cobra"
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
			snap, err := outbox.Inspect(outboxDir(dataDir))
			if err != nil {
				return explainOutboxErr(dataDir, err)
			}
			st := snap.Stats
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			now := time.Now()
			tw := taskview.NewTable(cmd.OutOrStdout())
			oldest := "-"
			if !st.OldestPending.IsZero() {
				oldest = taskview.Age(now.Sub(st.OldestPending))
			}
			lastCompaction := "never"
			if !st.LastCompaction.IsZero() {
				lastCompaction = taskview.Ago(now, st.LastCompaction)
			}
			rows := [][2]string{
				{"pending", fmt.Sprint(st.Pending)},
				{"sent (not yet compacted)", fmt.Sprint(st.Sent)},
				{"dead", fmt.Sprint(st.Dead)},
				{"oldest pending", oldest},
				{"file", bytesHuman(st.FileBytes)},
				{"live", bytesHuman(st.LiveBytes)},
				{"reclaimable", bytesHuman(st.GarbageBytes)},
				{"last compaction", lastCompaction},
				{"next seq", fmt.Sprint(st.NextSeq)},
			}
			switch {
			case st.DiskFreeBytes < 0:
			case st.DiskFreeBytes < 1<<20:
				rows = append(rows, [2]string{"disk free", bytesHuman(st.DiskFreeBytes) + " (full: a running agent holds reports in memory until space returns)"})
			default:
				rows = append(rows, [2]string{"disk free", bytesHuman(st.DiskFreeBytes)})
			}
			if st.Quarantined > 0 {
				rows = append(rows, [2]string{"corrupt lines", fmt.Sprintf("%d (set aside at the agent's next start)", st.Quarantined)})
			}
			for _, r := range rows {
				fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
			}
			return tw.Flush()
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object (see docs/commands.md: JSON output)")
	return cmd
}
