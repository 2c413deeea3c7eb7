package main

import (
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/settings"
)

// The names the settings engine had in cmd/agent before it became
// internal/settings, for the code that still calls it by them
// (service_*.go, tasks_*.go; internal/service and internal/taskview take
// them over): each is a thin wrapper of the engine's own. Once that code
// calls the engine directly, these go, and resolved and settingsTable
// become settings.Resolved and settings.Table.

// resolved is settings.Resolved with its origins also as
// service_datadir.go and service_spec.go read and amend them.
type resolved struct {
	*settings.Resolved
	origins map[string]origin
}

// bind is settings.Table.Bind.
func (t *settingsTable) bind(fs *pflag.FlagSet, name string, p any) { t.Bind(fs, name, p) }

// configPath is settings.Table.ConfigPath.
func (t *settingsTable) configPath(fs *pflag.FlagSet) string { return t.ConfigPath(fs) }

// resolve is settings.Table.Resolve.
func (t *settingsTable) resolve(fs *pflag.FlagSet, path string, env func(string) (string, bool)) (*resolved, error) {
	r, err := t.Resolve(fs, path, env)
	if err != nil {
		return nil, err
	}
	out := &resolved{Resolved: r, origins: map[string]origin{}}
	for name, o := range r.Origins {
		out.origins[name] = origin{originKind(o.Kind), o.Where}
	}
	return out, nil
}

// keepOrigins makes what was written into r.origins (the installed
// service's data directory) the engine's origins too.
func (r *resolved) keepOrigins() {
	for name, o := range r.origins {
		r.Origins[name] = settings.Origin{Kind: settings.OriginKind(o.kind), Where: o.where}
	}
}

// lookup is settings.Table.Lookup, as a setting.
func (t *settingsTable) lookup(name string) *setting {
	s := t.Lookup(name)
	if s == nil {
		return nil
	}
	return &setting{Setting: s, path: s.Path}
}

// setting is a settings.Setting with the field path and the method
// splitPair by their former names.
type setting struct {
	*settings.Setting
	path bool
}

func (s *setting) splitPair(v string) (first, second string, err error) { return s.SplitPair(v) }

// originKind and origin are settings.OriginKind and settings.Origin.
type originKind string

type origin struct {
	kind  originKind
	where string
}

const fromDefault = originKind(settings.FromDefault)

// byteSize is settings.ByteSize.
type byteSize = settings.ByteSize
