package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/agentview"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/internal/utc"
)

// agent agents: a person's view and control of the agents enrolled at a
// control plane, with an operator token.

func newAgentsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "The agents enrolled at a control plane (a person's operator token)"}
	cmd.AddCommand(newAgentsLsCmd(), newAgentsLabelCmd(), newAgentsRevokeCmd())
	return cmd
}

func newAgentsLsCmd() *cobra.Command {
	var (
		cp     cpFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "The agents the control plane has heard from: state, health, the CLI each runs and its models, last heartbeat, the tasks they run and the repositories they serve",
		Long: `ls lists the agents the control plane has heard from, one a line:

  AGENT  STATE    HEALTH     EXECUTOR  MODELS            HEARTBEAT  RUNNING  TASKS                     REPOS ...
  vm-7   running  available  codex     gpt-5,gpt-5-mini  3s ago     1 of 2   t-0c1d2e3f4a (attempt 1)  app,site
  vm-9   offline  degraded   claude    -                 2h ago     0 of 2   -                         -

STATE is what the agent said of itself in its last heartbeat (running, or
draining while it stops), or offline once it has been silent for three
heartbeat intervals. HEALTH is its executor's grade (available, degraded,
unavailable); EXECUTOR what it runs tasks through (codex: Codex, claude:
Claude Code, exec: a command, sample: the sample executor) and MODELS the
models it may run (--models; - when it leaves the choice to the
executor); TASKS the tasks it runs, each with its attempt; REPOS the
repositories it serves ([[repo]] of its config). LABELS are the labels a
person granted it (agent agents label), the only ones a task's
--require label=... is matched against; SELF-DESCRIBED the labels it says
of itself (agent run --label), which route nothing; PLATFORM its OS and
architecture; REPLICA the control plane replica its last heartbeat
reached (agent controlplane serve --replica-name; an agent given several
replicas' URLs talks to one at a time). --json prints
everything the control plane knows of each agent (its health's reason
and recent problems, its outbox, its version and host).`,
		Example: `  agent agents ls --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent agents ls --json --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cp.client()
			if err != nil {
				return err
			}
			agents, err := c.Agents(cmd.Context())
			if err != nil {
				return fmt.Errorf("list agents: %s", taskview.Visible(err.Error()))
			}
			if asJSON {
				if agents == nil {
					agents = []api.AgentView{} // [] rather than null: no agents
				}
				return writeJSON(cmd.OutOrStdout(), agents)
			}
			agentview.List(cmd.OutOrStdout(), agents, c.URL(), utc.Now())
			return nil
		},
	}
	cp.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agents as the control plane answered, as JSON (an array; [] when there are none)")
	return cmd
}

func newAgentsLabelCmd() *cobra.Command {
	var cp cpFlags
	cmd := &cobra.Command{
		Use:   "label AGENT KEY=VALUE|KEY-...",
		Short: "Grant an agent labels, or take them back (KEY-): the labels tasks are routed by",
		Long: `label grants agent AGENT the labels KEY=VALUE (replacing a label of the
same KEY), and takes back each label named KEY- (a trailing minus, as
kubectl label does). It prints the labels the agent holds then.

A task's --require label=KEY or label=KEY=VALUE is met only by a label a
person granted: what an agent says of itself (agent run --label) is shown
as self-described by agent agents ls and routes nothing, since every host
that holds the registration secret can enrol an agent and say anything.
Route sensitive work by a granted label (tier=secure), never by what an
agent advertises (its executor, models, OS).

Labels are granted to an enrolled agent id: an id nobody registered is
refused. agent agents revoke forgets them with the agent's token, so
whoever registers the id next starts with none.`,
		Example: `  agent agents label vm-7 tier=secure gpu=a100 --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent agents label vm-7 gpu- --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("give an agent id and at least one label: agent agents label AGENT KEY=VALUE|KEY-...")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := agentview.LabelChanges(args[1:])
			if err != nil {
				return usagef("%v", err)
			}
			c, err := cp.client()
			if err != nil {
				return err
			}
			resp, err := c.LabelAgent(cmd.Context(), args[0], req)
			if err != nil {
				return fmt.Errorf("label %s: %s", taskview.Visible(args[0]), taskview.Visible(err.Error()))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: labels %s\n", taskview.Visible(args[0]), taskview.Dash(taskview.Visible(agentview.LabelsText(resp.Labels))))
			return nil
		},
	}
	cp.add(cmd)
	return cmd
}

func newAgentsRevokeCmd() *cobra.Command {
	var cp cpFlags
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Forget an agent's token: it is refused from then on, and its id is free to register again",
		Long: `revoke forgets the token agent ID got when it registered. Its requests are
refused from then on (401), and its id is free: an agent that starts with
the registration secret and that id registers again and gets a new token.

Use it when an agent's host was rebuilt and lost DATA_DIR/agent-token (the
control plane refuses, 409, to hand a registered id to the registration
secret), or to cut an agent off. To keep a host that holds the
registration secret from enrolling again, change the control plane's
registration secret too (its --token-file) and give the new one only to the
hosts you keep.`,
		Example: `  agent agents revoke vm-42 --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("give one agent id: agent agents revoke ID")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cp.client()
			if err != nil {
				return err
			}
			if _, err := c.RevokeAgent(cmd.Context(), args[0]); err != nil {
				return fmt.Errorf("revoke %s: %s", taskview.Visible(args[0]), taskview.Visible(err.Error()))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: token revoked; the id is free to register again\n", taskview.Visible(args[0]))
			return nil
		},
	}
	cp.add(cmd)
	return cmd
}
