package cli

import (
	"context"
	"time"

	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/runner"
)

// Base is the configuration every CLI executor takes. Zero fields take the
// defaults their comments give.
type Base struct {
	// Bin is the CLI's binary. Default: the CLI's name on PATH.
	Bin string
	// Args are added to the CLI's command line, after the executor's own.
	Args []string
	// Env is set in the CLI's environment (NAME=VALUE); EnvPass names more
	// of the agent's variables to pass on (see runner.CheckEnvNames). The
	// CLI's own variables always pass (see each executor's Config).
	Env     []string
	EnvPass []string
	// Dir is the working directory when the attempt has no work directory
	// of its own. Default: the agent's.
	Dir string
	// Grace is each stop step's wait (each executor says its steps), the
	// last between SIGTERM and SIGKILL. Default 5 s.
	Grace time.Duration
	// MaxLine is the longest line read from the CLI. Default 16 MiB.
	MaxLine int
}

// Defaults fills b's zero fields, bin for the binary, and checks the
// variables EnvPass names.
func (b *Base) Defaults(bin string) error {
	if b.Bin == "" {
		b.Bin = bin
	}
	if b.Grace <= 0 {
		b.Grace = runner.DefaultKillGrace
	}
	if b.MaxLine <= 0 {
		b.MaxLine = 16 << 20
	}
	return runner.CheckEnvNames(b.EnvPass)
}

// Probe reports whether the CLI could start now: its binary is there and
// executable (runner.Executor's Probe for the CLI executors).
func (b *Base) Probe(context.Context) error {
	_, err := proc.Resolve(b.Bin)
	return err
}
