package main

import (
	"fmt"
	"strings"

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
		// Settings come from the command line, the environment and the
		// config file, in that order, for every command.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return resolveSettings(cmd) },
	}
	// agent --version says what agent version says.
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	defer refuseUnknownSubcommands(root)
	root.AddCommand(newVersionCmd(), newDemoCmd(), newRunCmd(), newStopCmd(), newConfigCmd(), newSubmitCmd(), newControlPlaneCmd(), newTasksCmd(), newAgentsCmd(), newHealthCmd(), newDoctorCmd(), newOutboxCmd(), newWorkspacesCmd(), newServiceCmd(), newSampleExecutorCmd(),
		newClaudeApprovalMCPCmd(),
		// Subtasks.
		newSubtaskCmd())
	return root
}

// noArgs refuses arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

// refuseUnknownSubcommands makes every command that only groups others
// (agent tasks, agent outbox, ...) refuse an unknown subcommand as a usage
// error with a suggestion, as the root does, rather than print its help and
// succeed.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if cmd.HasParent() && cmd.HasSubCommands() && !cmd.Runnable() {
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			cmd.SuggestionsMinimumDistance = 2
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usagef("%s", msg)
		}
	}
}
