package main

import (
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/settings"
)

// The names the settings engine had in cmd/agent before it became
// internal/settings, for the commands that still call it by them: each
// is the engine's own.

// bind is settings.Table.Bind.
func (t *settingsTable) bind(fs *pflag.FlagSet, name string, p any) { t.Bind(fs, name, p) }

// configPath is settings.Table.ConfigPath.
func (t *settingsTable) configPath(fs *pflag.FlagSet) string { return t.ConfigPath(fs) }

// resolve is settings.Table.Resolve.
func (t *settingsTable) resolve(fs *pflag.FlagSet, path string, env func(string) (string, bool)) (*settings.Resolved, error) {
	return t.Resolve(fs, path, env)
}

// byteSize is settings.ByteSize.
type byteSize = settings.ByteSize
