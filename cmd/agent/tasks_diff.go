package main

import (
	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
)

func newTasksDiffCmd() *cobra.Command {
	var (
		src          sourceFlags
		workDir      string
		stat, asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "diff ID",
		Short: "Print the diff of a task's work against its base (--remote: the one the control plane keeps)",
		Long: `diff prints what a task that names a repository changed, as a unified
diff of its files against the commit its branch was made from: its commits
and, with --no-commit tasks, what it left uncommitted, untracked files as
added. Binary files are named, not carried; no external diff or text
conversion runs. On a terminal it is coloured (NO_COLOR turns that off);
control characters a task wrote are shown inert (\x1b), never obeyed.

By default it reads the task's workspace, as it is now, in the work
directory (--work-dir, else DATA_DIR/work) on the agent's machine; it works
while the agent runs. With --remote it prints the diff the control plane
keeps: the one the agent reported at the end of the task's last attempt,
its first 512 KiB (the rest is on the task's branch).

--stat prints a line per file and the total instead; --json the diff as
GET /v1/tasks/ID/diff answers it.`,
		Example: `  agent tasks diff t-1a2b3c4d5e
  agent tasks diff t-1a2b3c4d5e --stat
  agent tasks diff t-1a2b3c4d5e --remote --control-plane https://cp.example:8443 --token-file ~/.config/agent/operator-token`,
		Args: taskIDArg("diff ID"),

		ValidArgsFunction: completeTaskIDs(nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			s, err := src.source()
			if err != nil {
				return err
			}
			d, err := tasksource.Diff(cmd.Context(), s, workDir, id)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			taskview.Diff(cmd.OutOrStdout(), cmd.ErrOrStderr(), id, d.DiffEvent, stat)
			return nil
		},
	}
	src.add(cmd)
	agentSettings.Bind(useSettings(cmd, agentSettings), "work-dir", &workDir)
	cmd.Flags().BoolVar(&stat, "stat", false, "print a line per file (+added −deleted) and the total, not the diff")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diff as GET /v1/tasks/ID/diff answers it: task_id, attempt, at, repo, branch, base_commit, head, files, insertions, deletions, patch, bytes, cut")
	return cmd
}
