package settings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// WriteTOML writes the settings bound in fs as a TOML config file that
// reads back the same: every key and its value, each with a comment
// saying where it came from (and " · live" for a live one); the keys at
// the top first, then each table under its header, then the pairs
// settings' arrays of tables ([[repo]]) with the options their file's
// tables gave. redact, if not nil, is given every string value with its
// key (an option's as KEY.OPTION) and returns what to write: a password
// in a URL is not for a terminal.
func (r *Resolved) WriteTOML(w io.Writer, fs *pflag.FlagSet, redact func(key, value string) string) error {
	b := &bytes.Buffer{}
	tables := []string{""}
	byTable := map[string][]*Setting{}
	var arrays []*Setting // [[repo]]: after every table
	for _, s := range r.Table.List {
		if Bound(fs, s) == nil {
			continue
		}
		if s.Pairs != nil {
			arrays = append(arrays, s)
			continue
		}
		table, _ := splitKey(s.FileKey())
		if _, ok := byTable[table]; !ok && table != "" {
			tables = append(tables, table)
		}
		byTable[table] = append(byTable[table], s)
	}
	for _, table := range tables {
		if table != "" {
			fmt.Fprintf(b, "\n[%s]\n", table)
		} else {
			fmt.Fprintln(b)
		}
		for _, s := range byTable[table] {
			_, key := splitKey(s.FileKey())
			v := Value(fs, s)
			if str, ok := v.(string); ok && redact != nil {
				v = redact(s.FileKey(), str)
			}
			line := fmt.Sprintf("%s = %s", key, tomlValue(v))
			live := ""
			if s.Live {
				live = " · live"
			}
			fmt.Fprintf(b, "%-44s # %s%s\n", line, r.Origins[s.Name], live)
		}
	}
	for _, s := range arrays {
		tables, _ := r.Tables(s.Name)
		printPairs(b, s, Value(fs, s).([]string), r.Origins[s.Name], tables, redact)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// printPairs writes the values of a pairs setting as an array of tables,
// [[repo]] with name and path, and the options the file's table of that
// name gives; none, as a comment saying how to add one.
func printPairs(b *bytes.Buffer, s *Setting, values []string, o Origin, tables []FileTable, redact func(key, value string) string) {
	key := s.FileKey()
	if len(values) == 0 {
		fmt.Fprintf(b, "\n# [[%s]]%s # %s\n# %s = %s\n# %s = %s\n", key, strings.Repeat(" ", max(0, 44-len(key)-6)), o,
			s.Pairs[0], QuoteTOML("NAME"), s.Pairs[1], QuoteTOML(strings.ToUpper(s.Pairs[1])))
		return
	}
	for _, v := range values {
		first, second, _ := s.SplitPair(v)
		fmt.Fprintf(b, "\n%-44s # %s\n", "[["+key+"]]", o)
		fmt.Fprintf(b, "%s = %s\n%s = %s\n", s.Pairs[0], QuoteTOML(first), s.Pairs[1], QuoteTOML(second))
		for _, t := range tables {
			if t.Str(s.Pairs[0]) != first {
				continue
			}
			for _, k := range s.PairOptions {
				if v := t.Str(k.Name); v != "" {
					if redact != nil {
						v = redact(key+"."+k.Name, v)
					}
					fmt.Fprintf(b, "%s = %s\n", k.Name, QuoteTOML(v))
				}
			}
		}
	}
}

// splitKey splits "executor.codex.sandbox" into its table and its key.
func splitKey(k string) (table, key string) {
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i], k[i+1:]
	}
	return "", k
}

// tomlValue writes v as a TOML value.
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return QuoteTOML(x)
	case time.Duration, ByteSize:
		return QuoteTOML(fmt.Sprint(x))
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = QuoteTOML(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case []time.Duration:
		q := make([]string, len(x))
		for i, d := range x {
			q[i] = QuoteTOML(d.String())
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// QuoteTOML quotes s as a TOML basic string (JSON's escapes are TOML's).
func QuoteTOML(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// WriteConfigFile writes r's settings bound in fs as `config print` shows
// them: a header saying the precedence, the config file read and where
// the token comes from (tokenFrom), then WriteTOML's file.
func (r *Resolved) WriteConfigFile(w io.Writer, fs *pflag.FlagSet, program, tokenFrom string, redact func(key, value string) string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s's effective configuration: flags > environment > config file > defaults.\n", program)
	fmt.Fprintln(&b, "# live: a reload (the file changes, or SIGHUP) applies it to new attempts; the rest need a restart.")
	if r.File != "" {
		fmt.Fprintf(&b, "# config file: %s\n", r.File)
	} else {
		fmt.Fprintln(&b, "# config file: none")
	}
	fmt.Fprintf(&b, "# token: %s\n", tokenFrom)
	if err := r.WriteTOML(&b, fs, redact); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}
