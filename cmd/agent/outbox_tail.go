package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/outbox"
	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"
)

// tailPoll is how often tail -f looks at the file even without an fsnotify
// event, for file systems that do not deliver them.
const tailPoll = 2 * time.Second

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
			dir := outboxDir(dataDir)
			tl, err := outbox.NewTailer(dir, 0)
			if err != nil {
				return explainOutboxErr(dataDir, err)
			}
			defer tl.Close()
			out := cmd.OutOrStdout()
			print := func(r outbox.Record) { printRecord(out, r, asJSON) }

			// Watch before the first read, so no append falls between them.
			// The directory, not the file: compaction renames a new file in.
			w, err := fsnotify.NewWatcher()
			if err != nil {
				return fmt.Errorf("watch %s: %w", dir, err)
			}
			defer w.Close()
			if follow {
				if err := w.Add(dir); err != nil {
					return fmt.Errorf("watch %s: %w", dir, err)
				}
			}

			// The last n records of what is there now, then everything new.
			ring := make([]outbox.Record, 0, last)
			err = tl.Next(func(r outbox.Record) {
				if last == 0 {
					return
				}
				if len(ring) == last {
					ring = append(ring[:0], ring[1:]...)
				}
				ring = append(ring, r)
			})
			if err != nil {
				return err
			}
			for _, r := range ring {
				print(r)
			}
			if !follow {
				return nil
			}
			tick := time.NewTicker(tailPoll)
			defer tick.Stop()
			ctx := cmd.Context()
			for {
				select {
				case <-ctx.Done():
					return nil
				case ev := <-w.Events:
					if filepath.Base(ev.Name) != outbox.FileName {
						continue
					}
				case err := <-w.Errors:
					return fmt.Errorf("watch %s: %w", dir, err)
				case <-tick.C:
				}
				if err := tl.Next(print); err != nil {
					return err
				}
			}
		},
	}
	dataDirFlag(cmd, &dataDir)
	fl := cmd.Flags()
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing records as they are appended")
	fl.IntVarP(&last, "lines", "n", 10, "how many of the latest records to print first")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object per record (see docs/commands.md: JSON output)")
	return cmd
}

// printRecord prints one record: a JSON line, or a human line with the
// payload as compact JSON.
func printRecord(w io.Writer, r outbox.Record, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	fmt.Fprintf(w, "%d  %s  %-8s  %s#%d  %s\n", r.Seq, r.CreatedAt.Local().Format("15:04:05.000"), taskview.Visible(string(r.Kind)), taskview.Visible(r.TaskID), r.Attempt, taskview.Visible(string(r.Payload)))
}
