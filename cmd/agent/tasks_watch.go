package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/taskfollow"
	"github.com/edgeagent/agent/internal/taskview"
)

func newTasksWatchCmd() *cobra.Command {
	var (
		src       sourceFlags
		recent    int
		untilDone bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "A live view of the tasks: running ones with their progress cards, scheduled retries, recent endings with their timelines",
		Long: `watch shows the tasks as they run, until you stop it (q or Ctrl-C): each
running task with its progress card and latest progress, each scheduled
retry with its countdown, queued tasks (--remote only: the queue is the
control plane's, and an agent's data directory holds only the tasks it
claimed), and the tasks that ended last with their attempt timelines.

It reads the agent's data directory (without taking its lock, so it works
while the agent runs), redrawn as the files change; with --remote it polls
the control plane instead. On a terminal it redraws in place; otherwise
(piped, redirected) it prints one line per change, and a task's timeline
when it ends.

With --until-done it ends, exit 0, once no task it sees is running, waiting
out a retry or queued; --timeout bounds that wait: when it passes first the
watch ends with exit 7, and the tasks go on.`,
		Example: `  agent tasks watch
  agent tasks watch --remote --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent tasks watch | tee watch.log
  agent tasks watch --until-done --timeout 30m`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if recent < 0 {
				return usagef("--recent %d: want 0 or more", recent)
			}
			switch {
			case timeout < 0:
				return usagef("--timeout %s: want 0 (no bound) or more", timeout)
			case timeout > 0 && !untilDone:
				return usagef("--timeout bounds --until-done: give both")
			}
			s, err := src.source()
			if err != nil {
				return err
			}
			w := &taskfollow.Watch{Source: s, Recent: recent, UntilDone: untilDone, Palette: taskview.PaletteFor(cmd.OutOrStdout()), Hint: newHint(&src.cp)}
			dataDir := src.dataDir
			if src.remote {
				dataDir = ""
			}
			code, err := w.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), os.Stdin, dataDir, timeout)
			if err != nil {
				return err
			}
			return exitOr(exitCode(code))
		},
	}
	cmd.Flags().BoolVar(&untilDone, "until-done", false, "end (exit 0) once no task is running, waiting out a retry or queued")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --until-done, end with exit 7 when the tasks have not all ended within this long (they go on); 0: no bound")
	src.add(cmd)
	cmd.Flags().IntVar(&recent, "recent", 5, "how many of the tasks that ended last to show")
	return cmd
}
