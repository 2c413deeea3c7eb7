package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
)

func newTasksPushCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "push ID",
		Short: "Push a completed task's branch and open its pull request again, as its repository's [[repo]] table says (on the agent's machine)",
		Long: `When a task that names a repository completes, the agent pushes its branch
agent/TASK_ID to the remote its [[repo]] table names (push = "REMOTE") and,
if the table says so (pull_request = "github" or "gitlab"), opens its pull
(merge) request. A failure is reported on the task (tasks show: "not
pushed: …"), which stays completed. push tries both again: run it on the
agent's machine, with the agent's settings (the same config file), once
the cause is fixed (a credential, the network, the forge's token in the
agent's environment). It pushes nothing else, never over a commit
someone else pushed to the branch since the agent did, and opens no second
request for a branch that has one open.

It keeps what came of it with the task in the data directory and tells the
control plane, as the agent that ran the task (its own token in the data
directory; token-file is read only to register the agent again), so that
tasks show --remote, the console and the notifications say it too. It works
while the agent runs. Exit 1 when the push or the request failed again, or
the control plane was not told (the push is done: run it again to tell it).`,
		Example: `  agent tasks push t-1a2b3c4d5e
  GITHUB_TOKEN=… agent tasks push t-1a2b3c4d5e --config ~/.config/agent/agent.toml`,
		Args: taskIDArg("push ID"),

		ValidArgsFunction: completeTaskIDs(tasksource.Pushable),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.controlPlane == "" {
				return usagef("--control-plane is required (or control-plane in the config file, or AGENT_CONTROL_PLANE): the control plane is told what came of the push")
			}
			token := ""
			if f.tokenFile != "" || strings.TrimSpace(os.Getenv("AGENT_TOKEN")) != "" {
				var err error
				if token, err = readToken(f.tokenFile); err != nil {
					return err
				}
			}
			repos, pulls, err := repoDeliveries(resolvedOf(cmd), f.repoList())
			if err != nil {
				return err
			}
			ch, err := agent.PushTask(cmd.Context(), agent.PushOptions{ControlPlane: f.controlPlane, Token: token, Insecure: f.insecure,
				DataDir: f.dataDir, WorkDir: f.workDir, Repos: repos, PullRequests: pulls, Version: agentVersion()}, args[0])
			taskview.Pushed(cmd.OutOrStdout(), args[0], ch)
			switch {
			case errors.Is(err, agent.ErrNotPushed):
				return fmt.Errorf("tasks push %s: %s", taskview.Visible(args[0]), taskview.Visible(strings.TrimPrefix(err.Error(), agent.ErrNotPushed.Error()+": ")))
			case err != nil:
				return fmt.Errorf("tasks push %s: %s", taskview.Visible(args[0]), taskview.Visible(err.Error()))
			}
			return nil
		},
	}
	fs := useSettings(cmd, agentSettings)
	t := agentSettings
	t.Bind(fs, "control-plane", &f.controlPlane)
	t.Bind(fs, "token-file", &f.tokenFile)
	t.Bind(fs, "insecure", &f.insecure)
	t.Bind(fs, "data-dir", &f.dataDir)
	cmd.Annotations[followsServiceAnnotation] = "yes"
	t.Bind(fs, "work-dir", &f.workDir)
	t.Bind(fs, "repo", &f.repos)
	return cmd
}
