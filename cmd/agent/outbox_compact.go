package main

import (
	"fmt"

	"github.com/edgeagent/agent/outbox"
	"github.com/spf13/cobra"
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
			if err := requireOutbox(dataDir); err != nil {
				return err
			}
			o, err := outbox.Open(outboxDir(dataDir), outbox.Options{})
			if err != nil {
				return explainOutboxErr(dataDir, err)
			}
			defer o.Close()
			stderr := cmd.ErrOrStderr()
			progress := func(done, total int) {
				if !asJSON {
					fmt.Fprintf(stderr, "\rcopying live records: %d/%d", done, total)
				}
			}
			res, err := o.Compact(progress)
			if err != nil {
				return err
			}
			if err := o.Close(); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			if res.Records > 0 {
				fmt.Fprintln(stderr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "compacted %s to %s, %d live records kept, appends paused %s\n",
				bytesHuman(res.BytesBefore), bytesHuman(res.BytesAfter), res.Records, res.Pause.Round(1000))
			return nil
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (see docs/commands.md: JSON output)")
	return cmd
}
