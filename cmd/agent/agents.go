package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
		Use:     "ls",
		Short:   "The agents the control plane has heard from, with their last heartbeat, health and the repositories they serve",
		Example: `  agent agents ls --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		Args:    noArgs,
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
				return writeJSON(cmd.OutOrStdout(), agents)
			}
			now := utc.Now()
			for _, a := range agents {
				online := "offline"
				if a.Online {
					online = "online"
				}
				repos := ""
				if len(a.Repos) > 0 {
					repos = "  repos " + strings.Join(a.Repos, ",")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%-24s %-7s %-11s last heartbeat %s ago  running %d of %d%s\n", visible(a.AgentID), online,
					visible(string(a.Health.Grade)), now.Sub(a.LastHeartbeat).Round(time.Second), a.Capacity.Running, a.Capacity.Max, visible(repos))
			}
			return nil
		},
	}
	cp.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agents as the control plane answered, as JSON")
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
				return fmt.Errorf("revoke %s: %s", visible(args[0]), visible(err.Error()))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: token revoked; the id is free to register again\n", visible(args[0]))
			return nil
		},
	}
	cp.add(cmd)
	return cmd
}
