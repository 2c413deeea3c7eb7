package settings

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// A Setting is one knob of a program, defined once and known by one name
// everywhere: the flag --NAME, the environment variable PREFIX_NAME (in
// capitals, dashes as underscores) and the key KEY in the config file.
// Commands bind the settings they take to their own variables with
// Table.Bind; the default, the help and the checks come from here.
type Setting struct {
	Name string
	// Key is the config file's key, dotted for a table
	// ("executor.codex.sandbox"); empty means the name.
	Key string
	// Default is the type and default: string, int, bool,
	// time.Duration, ByteSize, []string, []time.Duration, or []FileTable
	// for a Table setting. nil is a string, empty by default.
	Default any
	Help    string
	// Live settings apply to what starts after a reload; the others need
	// a restart. What decides a task's reach (the executor's command,
	// binary, arguments and environment, approvals, the CLIs' sandbox and
	// permissions, isolation) is never live: a file a task could write
	// must not change it under a running agent.
	Live bool
	// Repeat: a []string flag given once per value (--executor-arg)
	// rather than split at commas.
	Repeat bool
	// CommaList: a string setting that holds a comma-separated list, which
	// the config file may give as an array of strings.
	CommaList bool
	// Path: a file or directory. In the config file, ~/ is the home
	// directory and a relative path is relative to the file's directory.
	Path bool
	// OneOf, if set, is every value allowed.
	OneOf []string
	// Min, if set, is the smallest value allowed of an int, a size or a
	// duration.
	Min *int64
	// Pairs, if set, makes a Repeat []string setting a list of pairs
	// FIRST=SECOND (--repo NAME=PATH); in the config file, an array of
	// tables [[KEY]] with the keys Pairs[0] and Pairs[1]. With Path, the
	// second of each pair is a path.
	Pairs *[2]string
	// PairOptions are the keys a Pairs setting's [[KEY]] tables may have
	// besides the pair's (the file only): a command reads them with
	// Resolved.Tables.
	PairOptions []TableKey
	// Table, if set, makes the setting a list of tables [[KEY]] with
	// these keys, in the config file only (no flag, no environment
	// variable): what is too rich for a flag, such as the control plane's
	// [[notify]] targets. Its value is []FileTable; a command reads it
	// with Resolved.Tables.
	Table []TableKey
	// Alias and AliasKey are a former name of the setting and its config
	// file key, still taken (as the flag --ALIAS, hidden, the variable
	// PREFIX_ALIAS and the key) for what the setting is now. Only a
	// duration setting has one.
	Alias, AliasKey string
}

// TableKey is a key of the tables of a Table setting, or an option of a
// Pairs setting's tables.
type TableKey struct {
	Name    string
	Default any // the type: string (nil too), []string, or int (a whole number from 1)
	Path    bool
	// Required: every table has it.
	Required bool
}

// AtLeast is a Setting's Min.
func AtLeast(n int64) *int64 { return &n }

// DefaultValue is the setting's default, "" when it has none.
func (s *Setting) DefaultValue() any {
	if s.Default == nil {
		return ""
	}
	return s.Default
}

// FileKey is the setting's key in the config file.
func (s *Setting) FileKey() string {
	if s.Key != "" {
		return s.Key
	}
	return s.Name
}

// EnvName is the setting's environment variable for a prefix such as
// AGENT_.
func (s *Setting) EnvName(prefix string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

// Check refuses a value the setting does not allow. v has the setting's
// type.
func (s *Setting) Check(v any) error {
	if s.Pairs != nil {
		list, _ := v.([]string)
		for _, p := range list {
			if _, _, err := s.SplitPair(p); err != nil {
				return err
			}
		}
	}
	if len(s.OneOf) > 0 {
		str, _ := v.(string)
		if !slices.Contains(s.OneOf, str) {
			return fmt.Errorf("%q: want %s", str, OrList(s.OneOf))
		}
	}
	if s.Min != nil {
		var n int64
		switch x := v.(type) {
		case int:
			n = int64(x)
		case ByteSize:
			n = int64(x)
			if n < *s.Min {
				return fmt.Errorf("%s: want at least %s", x, ByteSize(*s.Min))
			}
			return nil
		case time.Duration:
			return s.checkDuration(x)
		case []time.Duration:
			for _, d := range x {
				if err := s.checkDuration(d); err != nil {
					return err
				}
			}
			return nil
		}
		if n < *s.Min {
			return fmt.Errorf("%d: want at least %d", n, *s.Min)
		}
	}
	return nil
}

func (s *Setting) checkDuration(d time.Duration) error {
	switch {
	case int64(d) >= *s.Min:
		return nil
	case *s.Min == 1:
		return fmt.Errorf("%s: want more than 0s", d)
	}
	return fmt.Errorf("%s: want at least %s", d, time.Duration(*s.Min))
}

// SplitPair splits a value of a Pairs setting, FIRST=SECOND.
func (s *Setting) SplitPair(v string) (first, second string, err error) {
	first, second, ok := strings.Cut(v, "=")
	if !ok || first == "" || second == "" {
		return "", "", fmt.Errorf("%q: want %s=%s", v, strings.ToUpper(s.Pairs[0]), strings.ToUpper(s.Pairs[1]))
	}
	return first, second, nil
}

// OrList writes "a, b or c", quoting the empty string as "".
func OrList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		if v == "" {
			v = `""`
		}
		q[i] = v
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// Table is a program's settings and the prefix of their environment
// variables.
type Table struct {
	EnvPrefix string
	// DefaultFile, if set, is the config file read when --config is not
	// given and the file exists.
	DefaultFile func() string
	// KeysCommand, if set, is the command that lists every key, named in
	// the error for an unknown key that is like none.
	KeysCommand string
	List        []*Setting
}

// Lookup finds a setting by flag name, or nil.
func (t *Table) Lookup(name string) *Setting {
	for _, s := range t.List {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// ByKey finds a setting by config file key, or a former key of it.
func (t *Table) ByKey(key string) *Setting {
	for _, s := range t.List {
		if s.FileKey() == key || s.AliasKey != "" && s.AliasKey == key {
			return s
		}
	}
	return nil
}

// isTable tells whether key is a table of settings, such as executor.
func (t *Table) isTable(key string) bool {
	for _, s := range t.List {
		if strings.HasPrefix(s.FileKey(), key+".") {
			return true
		}
	}
	return false
}

// Bind declares the setting name as a flag of fs, stored in p, which must
// point to a variable of the setting's type. It panics on a name the
// table does not have: that is the program's mistake.
func (t *Table) Bind(fs *pflag.FlagSet, name string, p any) {
	s := t.Lookup(name)
	if s == nil {
		panic("no setting " + name)
	}
	help := s.Help
	if t.EnvPrefix != "" {
		help += " (env " + s.EnvName(t.EnvPrefix) + ")"
	}
	switch def := s.DefaultValue().(type) {
	case string:
		fs.StringVar(p.(*string), name, def, help)
	case int:
		fs.IntVar(p.(*int), name, def, help)
	case bool:
		fs.BoolVar(p.(*bool), name, def, help)
	case time.Duration:
		fs.DurationVar(p.(*time.Duration), name, def, help)
	case ByteSize:
		v := p.(*ByteSize)
		*v = def
		fs.Var(v, name, help)
	case []string:
		if s.Repeat {
			fs.StringArrayVar(p.(*[]string), name, def, help)
		} else {
			fs.StringSliceVar(p.(*[]string), name, def, help)
		}
	case []time.Duration:
		fs.DurationSliceVar(p.(*[]time.Duration), name, def, help)
	default:
		panic(fmt.Sprintf("setting %s: unsupported type %T", name, def))
	}
	_ = fs.SetAnnotation(name, settingAnnotation, []string{s.Name})
	if s.Alias != "" {
		// The former name sets the same variable; pflag says it is
		// deprecated when it is used, and hides it.
		d, ok := s.Default.(time.Duration)
		if !ok {
			panic("setting " + name + ": only a duration setting has an alias")
		}
		fs.DurationVar(p.(*time.Duration), s.Alias, d, "former name of --"+name)
		_ = fs.MarkDeprecated(s.Alias, "use --"+name)
	}
}

// settingAnnotation marks a flag bound to a setting: a command's own flag
// of the same name (submit's --repo) takes nothing from the settings.
const settingAnnotation = "agent-setting"

// Bound is the flag of fs bound to setting s, or nil.
func Bound(fs *pflag.FlagSet, s *Setting) *pflag.Flag {
	if f := fs.Lookup(s.Name); f != nil && f.Annotations[settingAnnotation] != nil {
		return f
	}
	return nil
}
