package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// applyEnv gives every flag not set on the command line the value of its
// environment variable, AGENT_ and the flag's name in capitals with
// underscores: --max-concurrent is AGENT_MAX_CONCURRENT.
func applyEnv(cmd *cobra.Command) error { return applyEnvPrefix(cmd, "AGENT_") }

// applyEnvPrefix is applyEnv with another prefix: the control plane's
// flags read AGENT_CP_*, so an agent's AGENT_DATA_DIR in the same shell is
// not taken for the control plane's.
func applyEnvPrefix(cmd *cobra.Command, prefix string) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		name := prefix + envName(f.Name)[len("AGENT_"):]
		if v, ok := os.LookupEnv(name); ok {
			if serr := cmd.Flags().Set(f.Name, v); serr != nil {
				err = usagef("%s=%q: %v", name, v, serr)
			}
		}
	})
	return err
}

func envName(flag string) string {
	return "AGENT_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}
