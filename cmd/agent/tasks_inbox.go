package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

func newTasksInboxCmd() *cobra.Command {
	var (
		cp     cpFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "List the approvals waiting for a person across the fleet, oldest first (the console's inbox)",
		Long: `inbox lists every task of the control plane that waits for a person's answer
(phase awaiting_reply): Codex and Claude Code asking before a command or a
file change, an exec task's approval line, a subtask's as its own, oldest
question first. Each says what it would do (the command and its directory;
the files and their diff, the first lines of it; a tool and its input), who
asks (the task, its agent, the parent task of a subtask), how long it has
waited and when it is declined if nobody answers. Answer with agent tasks
reply ID --accept|--decline, or in the console's inbox.`,
		Example: `  agent tasks inbox --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent tasks inbox --json --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cp.client()
			if err != nil {
				return err
			}
			tasks, err := tasksource.Remote{Client: c}.Tasks(cmd.Context(), api.TaskFilter{Phase: state.PhaseAwaitingReply}, 0)
			if err != nil {
				return fmt.Errorf("tasks inbox: %w", err)
			}
			entries := taskview.InboxOf(tasks)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), entries)
			}
			taskview.Inbox(cmd.OutOrStdout(), newHint(&cp), entries, time.Now())
			return nil
		},
	}
	cp.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the questions as a JSON array of {"task_id", "title", "parent", "agent", "attempt", "request"}, oldest first`)
	return cmd
}
