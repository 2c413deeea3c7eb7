package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

func agentVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// versionLine is what agent version and agent --version print, the same:
// "agent v1.4.0 linux/amd64 go1.26.1".
func versionLine() string {
	return fmt.Sprintf("agent %s %s/%s %s", agentVersion(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the agent's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}
