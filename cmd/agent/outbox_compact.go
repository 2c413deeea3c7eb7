package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/outboxview"
)

func newOutboxCompactCmd() *cobra.Command {
	var (
		dataDir string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the outbox keeping only pending and dead records",
		Long: `Compact rewrites the outbox file with only its pending and dead records,
through a temporary file, fsync, rename and directory fsync. The agent does
this on its own; run it by hand with the agent stopped (it takes the lock).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stderr := cmd.ErrOrStderr()
			res, err := outboxview.Compact(dataDir, func(done, total int) {
				if !asJSON {
					fmt.Fprintf(stderr, "\rcopying live records: %d/%d", done, total)
				}
			})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			if res.Records > 0 {
				fmt.Fprintln(stderr)
			}
			fmt.Fprintln(cmd.OutOrStdout(), outboxview.CompactLine(res))
			return nil
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (see docs/commands.md: JSON output)")
	return cmd
}
