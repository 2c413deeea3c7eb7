package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/settings"
)

// settingsAnnotation marks a command that takes settings, with the
// table's environment prefix.
const settingsAnnotation = "settings"

// useSettings makes cmd take settings of t: it adds --config and returns
// the flag set to bind them on. The root command resolves them before the
// command runs.
func useSettings(cmd *cobra.Command, t *settingsTable) *pflag.FlagSet {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[settingsAnnotation] = t.EnvPrefix
	if cmd.Flags().Lookup("config") != nil {
		return cmd.Flags()
	}
	help := "the config file (TOML); every setting below is a key"
	if t.DefaultFile != nil {
		help += fmt.Sprintf(" (env %sCONFIG; default %s if it exists; \"\" for none)", t.EnvPrefix, t.DefaultFile())
	} else {
		help += fmt.Sprintf(" (env %sCONFIG)", t.EnvPrefix)
	}
	cmd.Flags().String("config", "", help)
	return cmd.Flags()
}

// resolvesOwnSettings marks a command that resolves its settings itself,
// in RunE, rather than fail on a bad config file before it runs: agent
// doctor reports it among its checks.
const resolvesOwnSettings = "resolves-own-settings"

// tableFor is the settings table a command takes, or nil.
func tableFor(cmd *cobra.Command) *settingsTable {
	prefix, ok := cmd.Annotations[settingsAnnotation]
	if !ok {
		return nil
	}
	for _, t := range []*settingsTable{agentSettings, controlPlaneSettings} {
		if t.EnvPrefix == prefix {
			return t
		}
	}
	return nil
}

type resolvedKey struct{}

// resolveSettings gives the settings of the command about to run their
// values from the environment and the config file, where the command line
// did not.
func resolveSettings(cmd *cobra.Command) error {
	t := tableFor(cmd)
	if t == nil || cmd.Annotations[resolvesOwnSettings] != "" {
		return nil
	}
	r, err := t.Resolve(cmd.Flags(), t.ConfigPath(cmd.Flags()), os.LookupEnv)
	if err != nil {
		return err
	}
	if err := serviceDataDir(cmd, r, cmd.ErrOrStderr()); err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	cmd.SetContext(context.WithValue(ctx, resolvedKey{}, r))
	return nil
}

// resolvedOf is how cmd's settings got their values, or nil.
func resolvedOf(cmd *cobra.Command) *settings.Resolved {
	r, _ := cmd.Context().Value(resolvedKey{}).(*settings.Resolved)
	return r
}
