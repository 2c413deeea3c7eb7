package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/agentsettings"
	"github.com/edgeagent/agent/internal/settings"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the effective configuration, or check a config file",
		Long: `Every setting of agent run is a flag (--max-concurrent), an environment
variable (AGENT_MAX_CONCURRENT) and a key of the TOML config file
(max-concurrent; the executor's settings in [executor] and its tables). The
command line wins over the environment, which wins over the file, which wins
over the default; the same for every command.

The config file is --config FILE, else $AGENT_CONFIG, else
~/.config/agent/agent.toml (/etc/agent/agent.toml for root) if it exists.
agent run reloads it when it changes and on SIGHUP.`,
	}
	cmd.AddCommand(newConfigPrintCmd(), newConfigCheckCmd())
	return cmd
}

func newConfigPrintCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "print",
		Short: "Print agent run's effective configuration as TOML, with where each value came from",
		Long: `print resolves agent run's settings exactly as agent run would (the same
flags are accepted here) and prints them as a config file: every key, its
value, and a comment saying where it came from (flag, env, file:line or
default). The token is never printed, only where it comes from.`,
		Example: `  agent config print
  agent config print --config ./agent.toml --max-concurrent 4
  agent config print > ~/.config/agent/agent.toml   # a complete file to edit`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return agentsettings.PrintConfig(cmd.OutOrStdout(), resolvedOf(cmd), cmd.Flags(), f.tokenFile)
		},
	}
	f.bind(useSettings(cmd, agentSettings))
	return cmd
}

func newConfigCheckCmd() *cobra.Command {
	var controlPlane bool
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a config file: every key known, every value of its type and allowed",
		Example: `  agent config check ~/.config/agent/agent.toml
  agent config check --controlplane cp.toml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("%s takes one config file, got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			t := agentSettings
			if controlPlane {
				t = controlPlaneSettings
			}
			c, err := settings.ReadFile(args[0], t.Table)
			if err != nil {
				return err // every mistake, a line each; exit 2, as agent run
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok, %d settings\n", args[0], c.Len())
			return nil
		},
	}
	cmd.Flags().BoolVar(&controlPlane, "controlplane", false, "the file is agent controlplane serve's")
	return cmd
}
