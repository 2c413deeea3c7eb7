package main

import (
	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/outbox"
)

func newOutboxTailCmd() *cobra.Command {
	var (
		dataDir string
		follow  bool
		last    int
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print the last records of the outbox, and follow new ones with -f",
		Example: `  agent outbox tail -n 50
  agent outbox tail -f --json | jq .payload`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if last < 0 {
				return usagef("-n %d: want 0 or more", last)
			}
			out := cmd.OutOrStdout()
			err := outboxview.Tail(cmd.Context(), outboxview.Dir(dataDir), last, follow, func(r outbox.Record) { outboxview.WriteRecord(out, r, asJSON) })
			return outboxview.Explain(dataDir, err)
		},
	}
	dataDirFlag(cmd, &dataDir)
	fl := cmd.Flags()
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing records as they are appended")
	fl.IntVarP(&last, "lines", "n", 10, "how many of the latest records to print first")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object per record (see docs/commands.md: JSON output)")
	return cmd
}
