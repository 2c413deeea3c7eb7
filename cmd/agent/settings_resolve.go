package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Precedence, the same for every command: the command line, then the
// environment, then the config file, then the default.

// originKind says which of those a value came from.
type originKind string

const (
	fromDefault originKind = "default"
	fromFile    originKind = "file"
	fromEnv     originKind = "env"
	fromFlag    originKind = "flag"
)

// origin is where a setting's value came from: "--max-concurrent",
// "AGENT_MAX_CONCURRENT", "/home/me/.config/agent/agent.toml:12".
type origin struct {
	kind  originKind
	where string
}

func (o origin) String() string {
	if o.kind == fromDefault {
		return "default"
	}
	return string(o.kind) + " " + o.where
}

// resolved is how a command's settings got their values.
type resolved struct {
	table *settingsTable
	// file is the config file read, "" when none.
	file    string
	origins map[string]origin // by setting name
	// cmdline holds the command line's own values, so that a reload
	// keeps them over the file's.
	cmdline map[string]any
	// fileTables are the table settings' values ([[notify]]), and the
	// tables of the pairs settings that take options ([[repo]]), from
	// the file only, by setting name.
	fileTables map[string]fileValue
}

// tables is a table setting's tables from the config file, and the file.
func (r *resolved) tables(name string) ([]fileTable, string) {
	if r == nil {
		return nil, ""
	}
	ts, _ := r.fileTables[name].v.([]fileTable)
	return ts, r.file
}

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
	cmd.Annotations[settingsAnnotation] = t.envPrefix
	if cmd.Flags().Lookup("config") != nil {
		return cmd.Flags()
	}
	help := "the config file (TOML); every setting below is a key"
	if t.defaultFile != nil {
		help += fmt.Sprintf(" (env %sCONFIG; default %s if it exists; \"\" for none)", t.envPrefix, t.defaultFile())
	} else {
		help += fmt.Sprintf(" (env %sCONFIG)", t.envPrefix)
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
		if t.envPrefix == prefix {
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
	r, err := t.resolve(cmd.Flags(), t.configPath(cmd.Flags()), os.LookupEnv)
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
func resolvedOf(cmd *cobra.Command) *resolved {
	r, _ := cmd.Context().Value(resolvedKey{}).(*resolved)
	return r
}

// configPath is the config file to read: --config, else PREFIX_CONFIG,
// else the default file if it exists; "" for none. A file named on the
// command line or in the environment must exist.
func (t *settingsTable) configPath(fs *pflag.FlagSet) string {
	if f := fs.Lookup("config"); f != nil && f.Changed {
		return f.Value.String()
	}
	if p, ok := os.LookupEnv(t.envPrefix + "CONFIG"); ok {
		return p
	}
	if t.defaultFile == nil {
		return ""
	}
	p := t.defaultFile()
	if p == "" {
		return ""
	}
	if _, err := os.Stat(p); errors.Is(err, iofs.ErrNotExist) {
		return ""
	}
	return p
}

// resolve gives every setting bound in fs and not set on the command line
// the environment's value, else the config file's (path, "" for none),
// else its default; then checks every value.
func (t *settingsTable) resolve(fs *pflag.FlagSet, path string, env func(string) (string, bool)) (*resolved, error) {
	r := &resolved{table: t, file: path, origins: map[string]origin{}, cmdline: map[string]any{}, fileTables: map[string]fileValue{}}
	var file *configFile
	if path != "" {
		var err error
		if file, err = readConfigFile(path, t); err != nil {
			return nil, err
		}
	}
	for _, s := range t.list {
		if fv, ok := file.lookup(s.name); ok && s.table != nil {
			r.fileTables[s.name] = fv
		}
		if file != nil && s.pairOptions != nil {
			if fv, ok := file.tables[s.name]; ok {
				r.fileTables[s.name] = fv
			}
		}
	}
	for _, s := range t.list {
		f := bound(fs, s)
		if f == nil {
			continue
		}
		if f.Changed {
			r.origins[s.name] = origin{fromFlag, "--" + s.name}
			r.cmdline[s.name] = flagValue(fs, s)
			continue
		}
		if a := fs.Lookup(s.alias); s.alias != "" && a != nil && a.Changed {
			r.origins[s.name] = origin{fromFlag, "--" + s.alias}
			r.cmdline[s.name] = flagValue(fs, s)
			continue
		}
		r.origins[s.name] = origin{kind: fromDefault}
		if fv, ok := file.lookup(s.name); ok {
			if err := setFlag(fs, s, fv.v); err != nil {
				return nil, configError(path, fv.line, "%s: %v", s.fileKey(), err)
			}
			r.origins[s.name] = origin{fromFile, path + ":" + strconv.Itoa(fv.line)}
		}
		name := s.envName(t.envPrefix)
		v, ok := env(name)
		if !ok && s.alias != "" {
			former := (&setting{name: s.alias}).envName(t.envPrefix)
			if v, ok = env(former); ok {
				name = former
			}
		}
		if ok {
			if err := f.Value.Set(v); err != nil {
				return nil, usagef("%s=%q: %v", name, v, err)
			}
			r.origins[s.name] = origin{fromEnv, name}
		}
	}
	for _, s := range t.list {
		if bound(fs, s) == nil {
			continue
		}
		if err := s.check(flagValue(fs, s)); err != nil {
			o := r.origins[s.name]
			switch o.kind {
			case fromFile:
				return nil, usagef("config %s: %s = %v", o.where, s.fileKey(), err)
			case fromEnv:
				return nil, usagef("%s: %v", o.where, err)
			}
			return nil, usagef("--%s %v", s.name, err)
		}
	}
	return r, nil
}

// again resolves the settings anew into a fresh flag set that binds the
// same settings: the command line's values as they were, the environment,
// and the config file as it is now. A reload uses it.
func (r *resolved) again(fs *pflag.FlagSet) (*resolved, error) {
	for name, v := range r.cmdline {
		s := r.table.lookup(name)
		if err := setFlag(fs, s, v); err != nil {
			return nil, err
		}
		fs.Lookup(name).Changed = true
	}
	return r.table.resolve(fs, r.file, os.LookupEnv)
}

func (c *configFile) lookup(name string) (fileValue, bool) {
	if c == nil {
		return fileValue{}, false
	}
	v, ok := c.values[name]
	return v, ok
}

// flagValue is a bound setting's value, of the setting's type.
func flagValue(fs *pflag.FlagSet, s *setting) any {
	var v any
	var err error
	switch s.def.(type) {
	case string:
		v, err = fs.GetString(s.name)
	case int:
		v, err = fs.GetInt(s.name)
	case bool:
		v, err = fs.GetBool(s.name)
	case time.Duration:
		v, err = fs.GetDuration(s.name)
	case []string:
		if s.repeat {
			v, err = fs.GetStringArray(s.name)
		} else {
			v, err = fs.GetStringSlice(s.name)
		}
	case []time.Duration:
		v, err = fs.GetDurationSlice(s.name)
	case byteSize:
		v = *fs.Lookup(s.name).Value.(*byteSize)
	}
	if err != nil {
		panic(err) // bound by bind, so of the right type
	}
	return v
}

// setFlag gives a bound setting a value of its type.
func setFlag(fs *pflag.FlagSet, s *setting, v any) error {
	f := fs.Lookup(s.name)
	switch x := v.(type) {
	case []string:
		return f.Value.(pflag.SliceValue).Replace(x)
	case []time.Duration:
		strs := make([]string, len(x))
		for i, d := range x {
			strs[i] = d.String()
		}
		return f.Value.(pflag.SliceValue).Replace(strs)
	case time.Duration:
		return f.Value.Set(x.String())
	default:
		return f.Value.Set(fmt.Sprint(x))
	}
}
