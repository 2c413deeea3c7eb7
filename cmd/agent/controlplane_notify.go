package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/controlplane/notify"
)

// notifySettings are the notification flags agent controlplane serve and
// notify test share: the public URL notifications link to, the
// --notify-webhook targets and their secret.
type notifySettings struct {
	publicURL, secretFile string
	webhooks              []string
}

func (n *notifySettings) bind(fs *pflag.FlagSet, t *settingsTable) {
	t.Bind(fs, "public-url", &n.publicURL)
	t.Bind(fs, "notify-webhook", &n.webhooks)
	t.Bind(fs, "notify-secret-file", &n.secretFile)
}

// of is the notification settings with the config file's [[notify]]
// tables.
func (n *notifySettings) of(cmd *cobra.Command) notify.Settings {
	tables, file := resolvedOf(cmd).Tables("notify")
	return notify.Settings{PublicURL: n.publicURL, Webhooks: n.webhooks, SecretFile: n.secretFile, Tables: tables, File: file}
}
