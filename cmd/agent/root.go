package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agent",
		Short: "Run control-plane tasks on this machine, losing nothing",
		Long: `agent claims tasks from a control plane, runs them through an executor
(an AI coding CLI or any command) and reports phases, progress, logs and
results back. Every payload is written to a durable outbox before it is sent,
and replayed until the control plane acknowledges it.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.Version = agentVersion() // agent --version
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd(), newDemoCmd(), newRunCmd(), newSubmitCmd(), newControlPlaneCmd(), newTasksCmd(), newHealthCmd(), newOutboxCmd(), newServiceCmd(), newSampleExecutorCmd())
	return root
}

// defaultDataDir is where the agent keeps its state unless told otherwise:
// $AGENT_DATA_DIR, else $XDG_STATE_HOME/agent, else ~/.local/state/agent.
func defaultDataDir() string {
	if d := os.Getenv("AGENT_DATA_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "agent")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "agent")
	}
	return "agent-data"
}

// noArgs refuses arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}
