package main

import (
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/agentsettings"
	"github.com/edgeagent/agent/internal/logformat"
	"github.com/edgeagent/agent/internal/settings"
)

// The names the settings had in cmd/agent before they became packages'
// (internal/settings, internal/agentsettings, internal/logformat), for the
// commands that still call them by them: each is the package's own. They
// go when those commands call the packages.

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

var (
	newLogger      = logformat.New
	logLevel       = logformat.Level
	defaultDataDir = agentsettings.DefaultDataDir
)
