package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskaction"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
)

func newTasksReplyCmd() *cobra.Command {
	var (
		cp              cpFlags
		requestID       string
		accept, decline bool
		asJSON          bool
	)
	cmd := &cobra.Command{
		Use:   "reply ID --accept|--decline",
		Short: "Answer a task's approval request (the executor asked a person, --approval ask)",
		Long: `reply answers the approval request a task waits on (phase awaiting_reply):
may the executor run this command, or make these changes? The answer goes to
the control plane, and the agent holding the task takes it at its next
heartbeat. Without --request it answers the request the task awaits now.
It prints what the answer was about: the command and its directory, or the
files and their diff (the first lines; agent tasks show prints it all).
agent tasks inbox lists every question waiting.`,
		Example: `  agent tasks reply t-0123456789 --accept --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		Args:    taskIDArg("reply ID --accept|--decline"),

		ValidArgsFunction: completeTaskIDs(tasksource.AwaitingReply),
		RunE: func(cmd *cobra.Command, args []string) error {
			if accept == decline {
				return usagef("give one of --accept or --decline")
			}
			c, err := cp.client()
			if err != nil {
				return err
			}
			decision := api.DecisionAccept
			if decline {
				decision = api.DecisionDecline
			}
			v, err := c.Reply(cmd.Context(), args[0], requestID, decision)
			if err != nil {
				return fmt.Errorf("reply to %s: %w", taskview.Visible(args[0]), err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			taskaction.Replied(cmd.OutOrStdout(), v, decision, time.Now())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&accept, "accept", false, "let the executor go ahead")
	fl.BoolVar(&decline, "decline", false, "refuse; the executor goes on without it")
	fl.StringVar(&requestID, "request", "", "the request to answer (default: the one the task awaits)")
	cp.add(cmd)
	fl.BoolVar(&asJSON, "json", false, "print the task as JSON")
	return cmd
}
