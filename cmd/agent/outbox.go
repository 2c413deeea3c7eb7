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
needs the agent stopped.`,
	}
	cmd.AddCommand(newOutboxLsCmd(), newOutboxStatsCmd(), newOutboxTailCmd(), newOutboxCompactCmd(), newOutboxReplayCmd())
	return cmd
}

// dataDirFlag adds --data-dir to cmd.
func dataDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "data-dir", defaultDataDir(), "the agent's data directory (env AGENT_DATA_DIR)")
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
