package main

import "github.com/spf13/cobra"

func newOutboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Inspect and maintain the durable outbox",
		Long: `The outbox holds every payload the agent has to send, until the control
plane acknowledges it. These commands read it while the agent runs; compact
and purge need the agent stopped.`,
	}
	cmd.AddCommand(newOutboxLsCmd(), newOutboxStatsCmd(), newOutboxTailCmd(), newOutboxCompactCmd(), newOutboxReplayCmd(), newOutboxPurgeCmd())
	return cmd
}

// dataDirFlag makes cmd take the agent's data directory setting.
//
// Unless a flag, AGENT_DATA_DIR or the config file names one, the data
// directory is the installed service's (see serviceDataDir), else the
// default.
func dataDirFlag(cmd *cobra.Command, dir *string) {
	agentSettings.Bind(useSettings(cmd, agentSettings), "data-dir", dir)
	cmd.Annotations[followsServiceAnnotation] = "yes"
}

// controlPlaneFlags makes cmd take the settings that reach the control
// plane: its URL, the token file and --insecure.
func controlPlaneFlags(cmd *cobra.Command, url, tokenFile *string, insecure *bool) {
	fs := useSettings(cmd, agentSettings)
	agentSettings.Bind(fs, "control-plane", url)
	agentSettings.Bind(fs, "token-file", tokenFile)
	agentSettings.Bind(fs, "insecure", insecure)
}
