package main

import (
	"fmt"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/agent"
)

func newTasksLogsCmd() *cobra.Command {
	var (
		dataDir string
		attempt int
		follow  bool
	)
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a task's executor output, every attempt or one; -f follows it until the task ends",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("tasks logs takes one task id")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempt < 0 {
				return usagef("--attempt %d: attempts count from 1", attempt)
			}
			id := args[0]
			if _, err := agent.LoadTask(dataDir, id); err != nil {
				return err
			}
			r, err := agent.NewLogReader(dataDir, id, attempt)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			print := func(l string) { fmt.Fprintln(out, l) }
			if !follow {
				return r.Next(print)
			}
			if err := os.MkdirAll(r.Dir(), 0o700); err != nil {
				return err
			}
			w, err := fsnotify.NewWatcher()
			if err != nil {
				return err
			}
			defer w.Close()
			if err := w.Add(r.Dir()); err != nil {
				return err
			}
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				if err := r.Next(print); err != nil {
					return err
				}
				if t, err := agent.LoadTask(dataDir, id); err == nil && t.Phase.Terminal() {
					return r.Next(print) // what was written before the end
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-w.Events:
				case err := <-w.Errors:
					return err
				case <-tick.C:
				}
			}
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().IntVar(&attempt, "attempt", 0, "only this attempt (default: all)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing as the task runs; stop when it ends")
	return cmd
}
