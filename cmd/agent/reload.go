package main

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/internal/logformat"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/runner"
)

// newReloader applies a changed config file to the running agent a (see
// settings.Reloader): the live settings through a.Reconfigure, the
// executor made again when one of its settings changed, and the log
// level.
func newReloader(a *agent.Agent, level *slog.LevelVar, log *slog.Logger, inForce *settings.Resolved, fs *pflag.FlagSet, exe runner.Executor) *settings.Reloader {
	return settings.NewReloader(inForce, fs, log, func(next *pflag.FlagSet) func([]string) error {
		var f runFlags
		f.bind(next)
		return func(changed []string) error {
			nextExe := exe
			if slices.ContainsFunc(changed, func(key string) bool { return strings.HasPrefix(key, "executor.") }) {
				var err error
				if nextExe, err = f.Executor.Build(); err != nil {
					return err
				}
			}
			if err := a.Reconfigure(f.Live(nextExe)); err != nil {
				return err
			}
			level.Set(logformat.Level(f.LogLevel).Level())
			exe = nextExe
			return nil
		}
	})
}
