package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgeagent/agent/outbox"
	"github.com/spf13/cobra"
)

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
	agentSettings.bind(useSettings(cmd, agentSettings), "data-dir", dir)
	cmd.Annotations[followsServiceAnnotation] = "yes"
}

// controlPlaneFlags makes cmd take the settings that reach the control
// plane: its URL, the token file and --insecure.
func controlPlaneFlags(cmd *cobra.Command, url, tokenFile *string, insecure *bool) {
	fs := useSettings(cmd, agentSettings)
	agentSettings.bind(fs, "control-plane", url)
	agentSettings.bind(fs, "token-file", tokenFile)
	agentSettings.bind(fs, "insecure", insecure)
}

// requireOutbox fails, clearly, unless the data directory holds an outbox:
// the commands that open it as its writer would otherwise create one
// where a mistyped path points.
func requireOutbox(dataDir string) error {
	if _, err := os.Stat(filepath.Join(outboxDir(dataDir), outbox.FileName)); err != nil {
		return explainOutboxErr(dataDir, outbox.ErrNoOutbox)
	}
	return nil
}

// outboxDir is where the outbox lives in a data directory.
func outboxDir(dataDir string) string { return filepath.Join(dataDir, "outbox") }

// explainOutboxErr turns the outbox's errors into a sentence for the
// person at the terminal.
func explainOutboxErr(dataDir string, err error) error {
	switch {
	case errors.Is(err, outbox.ErrNoOutbox):
		return fmt.Errorf("no outbox in data directory %s (is --data-dir right?)", dataDir)
	case errors.Is(err, outbox.ErrLocked):
		return fmt.Errorf("%w; stop the agent first", err)
	}
	return err
}
