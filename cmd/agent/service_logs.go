package main

import (
	"github.com/spf13/cobra"
)

func newServiceLogsCmd() *cobra.Command {
	var (
		f        serviceFlags
		noFollow bool
	)
	cmd := &cobra.Command{
		Use:   "logs [--system] [--name NAME] [--no-follow]",
		Short: "Show the service's last 100 lines of log and follow them (journalctl -u UNIT -f; on macOS, tail -f of its log file)",
		Long: `logs runs journalctl -u agent.service -n 100 -f (--user for a user
service; agent-NAME.service with --name), or on macOS tail -n 100 -f of the
job's log file, until interrupted. journalctl -p warning -u agent.service
shows the warnings and errors alone: the agent logs each line at its
priority there.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.target()
			if err != nil {
				return err
			}
			if err := t.installed(); err != nil {
				return err
			}
			return runAttached(cmd.Context(), t.logsCall(!noFollow), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVar(&noFollow, "no-follow", false, "show the last lines and return")
	return cmd
}
