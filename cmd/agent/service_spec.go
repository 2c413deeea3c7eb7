package main

import (
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/service"
)

// runFlagsOfService reads the flags after -- as agent run's.
var runFlagsOfService = service.RunFlags{Parse: parseRunFlags, Settings: agentSettings.Table}

// parseRunFlags parses args as agent run would, refusing what it would
// refuse.
func parseRunFlags(args []string) (*pflag.FlagSet, error) {
	run := newRunCmd()
	if err := run.ParseFlags(args); err != nil {
		return nil, usagef("agent run would refuse these flags: %v", err)
	}
	if rest := run.Flags().Args(); len(rest) > 0 {
		return nil, usagef("agent run takes no arguments, only flags: %q", rest)
	}
	return run.Flags(), nil
}
