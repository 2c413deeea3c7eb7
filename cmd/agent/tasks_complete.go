package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/state"
)

// completeTaskIDs completes the task id argument of a tasks command from
// the tasks of the local data directory (--data-dir if the command line
// gives it, else the environment's, the config file's or the default)
// that want says the command applies to (tasksource.Candidates), never
// from the control plane.
func completeTaskIDs(want func(*state.Task) bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, c := range tasksource.Candidates(completionDataDir(cmd), toComplete, want) {
			out = append(out, cobra.CompletionWithDesc(c.ID, c.Desc))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completionDataDir is the data directory the command would read: its
// --data-dir if given, else the setting's value from the environment, the
// config file or its default. Commands that go through the control plane
// take no --data-dir; their completion reads the same directory.
func completionDataDir(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("data-dir"); f != nil && f.Changed {
		return f.Value.String()
	}
	var dir string
	fs := pflag.NewFlagSet("complete", pflag.ContinueOnError)
	agentSettings.Bind(fs, "data-dir", &dir)
	if _, err := agentSettings.Resolve(fs, agentSettings.ConfigPath(cmd.Flags()), os.LookupEnv); err != nil {
		return ""
	}
	return dir
}
