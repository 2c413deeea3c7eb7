package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/notify"
)

func newControlPlaneNotifyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "notify", Short: "The control plane's notification targets"}
	cmd.AddCommand(newControlPlaneNotifyTestCmd())
	return cmd
}

func newControlPlaneNotifyTestCmd() *cobra.Command {
	var (
		dir           string
		notifications notifySettings
	)
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Send a test notification to each target, now",
		Long: `test reads the notification targets as agent controlplane serve does (the
[[notify]] tables of --config, --notify-webhook, --notify-secret-file and
--data-dir for its default) and sends each one test notification (event
"test") straight away, not through the store: one line per target says
whether it was delivered. It exits 1 when any was not, 2 when the
configuration is wrong. A running control plane need not be stopped.`,
		Example: `  agent controlplane notify test --config /etc/agent/cp.toml
  agent controlplane notify test --data-dir ./cp --notify-webhook https://hooks.example.com/agent`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := notifications.of(cmd)
			if err := n.CheckPublicURL(); err != nil {
				return err
			}
			targets, _, err := n.Targets(dir, false)
			if err != nil {
				return usageError{err}
			}
			if len(targets) == 0 {
				return usagef("no notification targets: add [[notify]] tables to the config file (--config) or give --notify-webhook URL")
			}
			failed := 0
			for _, r := range notify.SendTests(cmd.Context(), targets, n.PublicURL) {
				fmt.Fprintln(cmd.OutOrStdout(), r.Line())
				if r.Err != nil {
					failed = 1
				}
			}
			return exitOr(exitCode(failed))
		},
	}
	fs, t := useSettings(cmd, controlPlaneSettings), controlPlaneSettings
	t.Bind(fs, "data-dir", &dir)
	notifications.bind(fs, t)
	return cmd
}
