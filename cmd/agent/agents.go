package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/utc"
)

// agent agents: a person's view and control of the agents enrolled at a
// control plane, with an operator token.

func newAgentsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "The agents enrolled at a control plane (a person's operator token)"}
	cmd.AddCommand(newAgentsLsCmd(), newAgentsRevokeCmd())
	return cmd
}

func newAgentsLsCmd() *cobra.Command {
	var (
		cp     cpFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "The agents the control plane has heard from: state, health, last heartbeat, the tasks they run and the repositories they serve",
		Long: `ls lists the agents the control plane has heard from, one a line:

  AGENT  STATE     HEALTH     HEARTBEAT  RUNNING  TASKS                     REPOS
  vm-7   running   available  3s ago     1 of 2   t-0c1d2e3f4a (attempt 1)   app,site
  vm-9   offline   degraded   2h ago     0 of 2   -                         -

STATE is what the agent said of itself in its last heartbeat (running, or
draining while it stops), or offline once it has been silent for three
heartbeat intervals. HEALTH is its executor's grade (available, degraded,
unavailable); TASKS the tasks it runs, each with its attempt; REPOS the
repositories it serves ([[repo]] of its config). --json prints everything
the control plane knows of each agent (its health's reason and recent
problems, its outbox, its version and host).`,
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
				return fmt.Errorf("list agents: %s", visible(err.Error()))
			}
			if asJSON {
				if agents == nil {
					agents = []api.AgentView{} // [] rather than null: no agents
				}
				return writeJSON(cmd.OutOrStdout(), agents)
			}
			if len(agents) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no agent has been heard from at %s\n", c.URL())
				return nil
			}
			writeAgents(cmd.OutOrStdout(), agents, utc.Now())
			return nil
		},
	}
	cp.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agents as the control plane answered, as JSON (an array; [] when there are none)")
	return cmd
}

// writeAgents prints agents as a table, a line each.
func writeAgents(w io.Writer, agents []api.AgentView, now time.Time) {
	tw := newTable(w)
	fmt.Fprintln(tw, "AGENT\tSTATE\tHEALTH\tHEARTBEAT\tRUNNING\tTASKS\tREPOS\tLABELS\tEXECUTOR\tMODELS\tPLATFORM")
	for _, a := range agents {
		tasks := make([]string, len(a.Running))
		for i, r := range a.Running {
			tasks[i] = fmt.Sprintf("%s (attempt %d)", r.TaskID, r.Attempt)
		}
		labels := make([]string, 0, len(a.Labels))
		for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
			labels = append(labels, k+"="+a.Labels[k])
		}
		// Routing by capability: what it advertises (docs/routing.md).
		platform := ""
		if a.OS != "" || a.Arch != "" {
			platform = a.OS + "/" + a.Arch
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d of %d\t%s\t%s\t%s\t%s\t%s\t%s\n", visible(a.AgentID), agentState(a), dash(visible(string(a.Health.Grade))),
			ago(now, a.LastHeartbeat), a.Capacity.Running, a.Capacity.Max, dash(visible(strings.Join(tasks, ", "))), dash(visible(strings.Join(a.Repos, ","))),
			dash(visible(strings.Join(labels, ","))), dash(visible(a.Executor)), dash(visible(strings.Join(a.Models, ","))), dash(visible(platform)))
	}
	tw.Flush()
}

// agentState is what an agent is, as a person reads it: offline once the
// control plane finds it silent, whatever it last said; else what its
// last heartbeat said (running when it said nothing).
func agentState(a api.AgentView) string {
	switch {
	case !a.Online:
		return string(api.AgentOffline)
	case a.State == "":
		return string(api.AgentRunning)
	}
	return visible(string(a.State))
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
				return fmt.Errorf("revoke %s: %s", visible(args[0]), visible(err.Error()))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: token revoked; the id is free to register again\n", visible(args[0]))
			return nil
		},
	}
	cp.add(cmd)
	return cmd
}
