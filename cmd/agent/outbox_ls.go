package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/outbox"
)

func newOutboxLsCmd() *cobra.Command {
	var (
		dataDir             string
		pending, sent, dead bool
		task, kind          string
		limit               int
		asJSON              bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the records in the outbox",
		Long: `List every record still in the outbox file, oldest first, with its seq,
idempotency key, kind, task, age, state (pending, sent or dead), send
attempts and last error. Sent records stay listed until compaction.`,
		Example: `  agent outbox ls --pending
  agent outbox ls --dead --json
  agent outbox ls --task t-42 --kind log --limit 20`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := outbox.Filter{TaskID: task, Kind: outbox.Kind(kind), Limit: limit}
			if kind != "" && !f.Kind.Valid() {
				return usagef("--kind %q: want a kind such as phase, progress, log, attempt or complete", kind)
			}
			if limit < 0 {
				return usagef("--limit %d: want 0 (no limit) or more", limit)
			}
			for on, s := range map[*bool]outbox.State{&pending: outbox.StatePending, &sent: outbox.StateSent, &dead: outbox.StateDead} {
				if *on {
					f.States = append(f.States, s)
				}
			}
			snap, err := outbox.Inspect(outboxview.Dir(dataDir))
			if err != nil {
				return outboxview.Explain(dataDir, err)
			}
			items := f.Select(snap.Items)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), items)
			}
			return outboxview.WriteItems(cmd.OutOrStdout(), items, time.Now())
		},
	}
	dataDirFlag(cmd, &dataDir)
	fl := cmd.Flags()
	fl.BoolVar(&pending, "pending", false, "only records waiting to be sent")
	fl.BoolVar(&sent, "sent", false, "only records the control plane acknowledged")
	fl.BoolVar(&dead, "dead", false, "only records the control plane rejected for good")
	fl.StringVar(&task, "task", "", "only records of this task")
	fl.StringVar(&kind, "kind", "", "only records of this kind (phase, progress, log, attempt, complete)")
	fl.IntVar(&limit, "limit", 0, "at most this many records (0: no limit)")
	fl.BoolVar(&asJSON, "json", false, "print a JSON array (see docs/commands.md: JSON output)")
	return cmd
}
