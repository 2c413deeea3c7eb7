package settings

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"reflect"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// Precedence, the same for every command: the command line, then the
// environment, then the config file, then the default.

// OriginKind says which of those a value came from. A program may name
// more of its own (a value it chose itself, say).
type OriginKind string

// The origins the engine gives.
const (
	FromDefault OriginKind = "default"
	FromFile    OriginKind = "file"
	FromEnv     OriginKind = "env"
	FromFlag    OriginKind = "flag"
)

// Origin is where a setting's value came from: "--max-concurrent",
// "AGENT_MAX_CONCURRENT", "/home/me/.config/agent/agent.toml:12".
type Origin struct {
	Kind  OriginKind
	Where string
}

func (o Origin) String() string {
	if o.Kind == FromDefault {
		return "default"
	}
	return string(o.Kind) + " " + o.Where
}

// Resolved is how a command's settings got their values.
type Resolved struct {
	Table *Table
	// File is the config file read, "" when none.
	File string
	// Origins are where each bound setting's value came from, by
	// setting name.
	Origins map[string]Origin
	// cmdline holds the command line's own values, so that a reload
	// keeps them over the file's.
	cmdline map[string]any
	// fileTables are the table settings' values ([[notify]]), and the
	// tables of the pairs settings that take options ([[repo]]), from
	// the file only, by setting name.
	fileTables map[string]FileValue
}

// Tables is a Table setting's tables from the config file (or a Pairs
// setting's, with their options), and the file. r may be nil: no tables.
func (r *Resolved) Tables(name string) ([]FileTable, string) {
	if r == nil {
		return nil, ""
	}
	ts, _ := r.fileTables[name].V.([]FileTable)
	return ts, r.File
}

// ConfigPath is the config file to read: --config, else PREFIX_CONFIG,
// else the default file if it exists; "" for none. A file named on the
// command line or in the environment must exist.
func (t *Table) ConfigPath(fs *pflag.FlagSet) string {
	if f := fs.Lookup("config"); f != nil && f.Changed {
		return f.Value.String()
	}
	if p, ok := os.LookupEnv(t.EnvPrefix + "CONFIG"); ok {
		return p
	}
	if t.DefaultFile == nil {
		return ""
	}
	p := t.DefaultFile()
	if p == "" {
		return ""
	}
	if _, err := os.Stat(p); errors.Is(err, iofs.ErrNotExist) {
		return ""
	}
	return p
}

// Resolve gives every setting bound in fs and not set on the command line
// the environment's value (env looks it up, as os.LookupEnv), else the
// config file's (path, "" for none), else its default; then checks every
// value. Its errors are UsageErrors, or Errors for a config file's
// mistakes.
func (t *Table) Resolve(fs *pflag.FlagSet, path string, env func(string) (string, bool)) (*Resolved, error) {
	r := &Resolved{Table: t, File: path, Origins: map[string]Origin{}, cmdline: map[string]any{}, fileTables: map[string]FileValue{}}
	var file *File
	if path != "" {
		var err error
		if file, err = ReadFile(path, t); err != nil {
			return nil, err
		}
	}
	for _, s := range t.List {
		if fv, ok := file.Lookup(s.Name); ok && s.Table != nil {
			r.fileTables[s.Name] = fv
		}
		if file != nil && s.PairOptions != nil {
			if fv, ok := file.tables[s.Name]; ok {
				r.fileTables[s.Name] = fv
			}
		}
	}
	for _, s := range t.List {
		f := Bound(fs, s)
		if f == nil {
			continue
		}
		if f.Changed {
			r.Origins[s.Name] = Origin{FromFlag, "--" + s.Name}
			r.cmdline[s.Name] = Value(fs, s)
			continue
		}
		if a := fs.Lookup(s.Alias); s.Alias != "" && a != nil && a.Changed {
			r.Origins[s.Name] = Origin{FromFlag, "--" + s.Alias}
			r.cmdline[s.Name] = Value(fs, s)
			continue
		}
		r.Origins[s.Name] = Origin{Kind: FromDefault}
		if fv, ok := file.Lookup(s.Name); ok {
			if err := SetValue(fs, s, fv.V); err != nil {
				return nil, FileError(path, fv.Line, "%s: %v", s.FileKey(), err)
			}
			r.Origins[s.Name] = Origin{FromFile, path + ":" + strconv.Itoa(fv.Line)}
		}
		name := s.EnvName(t.EnvPrefix)
		v, ok := env(name)
		if !ok && s.Alias != "" {
			former := (&Setting{Name: s.Alias}).EnvName(t.EnvPrefix)
			if v, ok = env(former); ok {
				name = former
			}
		}
		if ok {
			if err := f.Value.Set(v); err != nil {
				return nil, usagef("%s=%q: %v", name, v, err)
			}
			r.Origins[s.Name] = Origin{FromEnv, name}
		}
	}
	for _, s := range t.List {
		if Bound(fs, s) == nil {
			continue
		}
		if err := s.Check(Value(fs, s)); err != nil {
			o := r.Origins[s.Name]
			switch o.Kind {
			case FromFile:
				return nil, usagef("config %s: %s = %v", o.Where, s.FileKey(), err)
			case FromEnv:
				return nil, usagef("%s: %v", o.Where, err)
			}
			return nil, usagef("--%s %v", s.Name, err)
		}
	}
	return r, nil
}

// Again resolves the settings anew into a fresh flag set that binds the
// same settings: the command line's values as they were, the environment,
// and the config file as it is now. A reload uses it.
func (r *Resolved) Again(fs *pflag.FlagSet) (*Resolved, error) {
	for name, v := range r.cmdline {
		s := r.Table.Lookup(name)
		if err := SetValue(fs, s, v); err != nil {
			return nil, err
		}
		fs.Lookup(name).Changed = true
	}
	return r.Table.Resolve(fs, r.File, os.LookupEnv)
}

// Value is a bound setting's value, of the setting's type.
func Value(fs *pflag.FlagSet, s *Setting) any {
	var v any
	var err error
	switch s.DefaultValue().(type) {
	case string:
		v, err = fs.GetString(s.Name)
	case int:
		v, err = fs.GetInt(s.Name)
	case bool:
		v, err = fs.GetBool(s.Name)
	case time.Duration:
		v, err = fs.GetDuration(s.Name)
	case []string:
		if s.Repeat {
			v, err = fs.GetStringArray(s.Name)
		} else {
			v, err = fs.GetStringSlice(s.Name)
		}
	case []time.Duration:
		v, err = fs.GetDurationSlice(s.Name)
	case ByteSize:
		v = *fs.Lookup(s.Name).Value.(*ByteSize)
	}
	if err != nil {
		panic(err) // bound by Bind, so of the right type
	}
	return v
}

// SetValue gives a bound setting a value of its type.
func SetValue(fs *pflag.FlagSet, s *Setting, v any) error {
	f := fs.Lookup(s.Name)
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

// Changes are the bound settings whose values differ between two flag
// sets binding the same settings of t (the settings in force, and those
// read again): the live ones, and those that need a restart to apply.
func (t *Table) Changes(inForce, next *pflag.FlagSet) (live, restart []*Setting) {
	for _, s := range t.List {
		if Bound(inForce, s) == nil || reflect.DeepEqual(Value(inForce, s), Value(next, s)) {
			continue
		}
		if s.Live {
			live = append(live, s)
		} else {
			restart = append(restart, s)
		}
	}
	return live, restart
}

// ApplyLive gives the live settings bound in inForce their values in
// next, which binds the same settings: a reload that applied them.
func (t *Table) ApplyLive(inForce, next *pflag.FlagSet) {
	for _, s := range t.List {
		if s.Live && inForce.Lookup(s.Name) != nil {
			if err := SetValue(inForce, s, Value(next, s)); err != nil {
				panic(fmt.Sprintf("setting %s: %v", s.Name, err)) // same flag type on both sides
			}
		}
	}
}
