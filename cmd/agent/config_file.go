package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// maxConfigBytes bounds a config file; a settings file is a few KB.
const maxConfigBytes = 1 << 20

// configFile is a parsed config file: each setting's value, of the
// setting's type, and the line it is on.
type configFile struct {
	values map[string]fileValue // by setting name
}

type fileValue struct {
	v    any
	line int
}

// defaultConfigFile is the config file read when none is named:
// $XDG_CONFIG_HOME/agent/agent.toml, else ~/.config/agent/agent.toml;
// /etc/agent/agent.toml for root.
func defaultConfigFile() string {
	if os.Geteuid() == 0 {
		return "/etc/agent/agent.toml"
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "agent", "agent.toml")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".config", "agent", "agent.toml")
	}
	return ""
}

// configError is a mistake in a config file, said with the file and line.
func configError(path string, line int, format string, args ...any) error {
	where := path
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return usagef("config %s: %s", where, fmt.Sprintf(format, args...))
}

// configErrors are all the mistakes found in a config file, in the
// file's order, each one line "config FILE:LINE: …" (a usage error: agent
// run exits 2 on them, so a service manager does not restart it in a
// loop). run prints each on a line of its own; Error, for a log, joins
// them with "; ".
type configErrors []error

func (e configErrors) Error() string {
	lines := make([]string, len(e))
	for i, err := range e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "; ")
}

func (e configErrors) Unwrap() []error { return e }

// configProblems collects a file's mistakes with their lines.
type configProblems struct {
	path string
	list []configProblem
}

type configProblem struct {
	line int
	err  error
}

func (p *configProblems) add(line int, format string, args ...any) {
	p.list = append(p.list, configProblem{line, configError(p.path, line, format, args...)})
}

// err is nil when nothing was found, else every mistake by line.
func (p *configProblems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	sort.SliceStable(p.list, func(i, j int) bool { return p.list[i].line < p.list[j].line })
	errs := make(configErrors, len(p.list))
	for i, pr := range p.list {
		errs[i] = pr.err
	}
	return errs
}

// readConfigFile reads and checks a config file against t: every key must
// be a setting's, every value of its type and allowed.
func readConfigFile(path string, t *settingsTable) (*configFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("config file: %v", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, usagef("config file: %v", err)
	} else if !info.Mode().IsRegular() {
		return nil, usagef("config file %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, usagef("config file: %v", err)
	}
	if len(data) > maxConfigBytes {
		return nil, configError(path, 0, "larger than %d bytes; is it the right file?", maxConfigBytes)
	}
	return parseConfig(path, data, t)
}

// parseConfig is readConfigFile on the file's bytes.
func parseConfig(path string, data []byte, t *settingsTable) (*configFile, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, tomlError(path, err)
	}
	lines, err := keyLines(data)
	if err != nil {
		return nil, tomlError(path, err)
	}
	cf := &configFile{values: map[string]fileValue{}}
	// Every mistake is found, not only the first: a person fixes them all
	// at once.
	problems := &configProblems{path: path}
	// Arrays of tables ([[repo]]) first: they are not dotted keys.
	for _, st := range t.list {
		v, ok := doc[st.fileKey()]
		if st.pairs == nil || !ok {
			continue
		}
		delete(doc, st.fileKey())
		if fv, ok := pairsFromTOML(problems, data, st, v, lines[st.fileKey()]); ok {
			cf.values[st.name] = fv
		}
	}
	flat := map[string]any{}
	flatten("", doc, flat)
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return lines[keys[i]] < lines[keys[j]] || lines[keys[i]] == lines[keys[j]] && keys[i] < keys[j]
	})
	for _, k := range keys {
		line := lines[k]
		s := t.byKey(k)
		if m, ok := flat[k].(map[string]any); ok && len(m) == 0 && t.isTable(k) {
			continue // an empty [executor.codex]
		}
		if s == nil {
			problems.add(line, "unknown key %q%s", k, suggestKey(k, t))
			continue
		}
		v, err := fromTOML(s, flat[k])
		if err != nil {
			problems.add(line, "%s: %v", k, err)
			continue
		}
		if s.path {
			switch x := v.(type) {
			case string:
				v = filePath(x, filepath.Dir(path))
			case []string:
				for i := range x {
					x[i] = filePath(x[i], filepath.Dir(path))
				}
			}
		}
		if err := s.check(v); err != nil {
			problems.add(line, "%s = %v", k, err)
			continue
		}
		cf.values[s.name] = fileValue{v: v, line: line}
	}
	if err := problems.err(); err != nil {
		return nil, err
	}
	return cf, nil
}

// pairsFromTOML turns the array of tables [[KEY]] of a pairs setting
// into its values, FIRST=SECOND each, checking that every table has both
// keys and no other; each mistake goes to problems, and ok is false when
// there was one. line is where the key is when the array is written
// inline.
func pairsFromTOML(problems *configProblems, data []byte, s *setting, v any, line int) (fv fileValue, ok bool) {
	key := s.fileKey()
	list, isList := v.([]any)
	if !isList {
		problems.add(line, "%s: want [[%s]] tables with %s and %s, got %s", key, key, s.pairs[0], s.pairs[1], tomlType(v))
		return fileValue{}, false
	}
	tables := arrayTableLines(data, key)
	fv = fileValue{v: []string{}, line: line}
	ok = true
	for i, e := range list {
		where := tableLines{header: line, keys: map[string]int{}}
		if len(tables) == len(list) {
			where = tables[i]
		}
		if i == 0 {
			fv.line = where.header
		}
		pair, good := pairFromTOML(problems, s, i, e, where)
		if !good {
			ok = false
			continue
		}
		if s.path {
			pair[1] = filePath(pair[1], filepath.Dir(problems.path))
		}
		fv.v = append(fv.v.([]string), pair[0]+"="+pair[1])
	}
	return fv, ok
}

// pairFromTOML is the table of item i of a pairs setting's array: both
// keys, strings, and no other. Its mistakes go to problems.
func pairFromTOML(problems *configProblems, s *setting, i int, e any, where tableLines) (pair [2]string, ok bool) {
	key := s.fileKey()
	m, isTable := e.(map[string]any)
	if !isTable {
		problems.add(where.header, "%s: item %d: want a table with %s and %s, got %s", key, i+1, s.pairs[0], s.pairs[1], tomlType(e))
		return pair, false
	}
	n := len(problems.list)
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k != s.pairs[0] && k != s.pairs[1] {
			problems.add(where.line(k), "unknown key %q in [[%s]]: want %s and %s", k, key, s.pairs[0], s.pairs[1])
		}
	}
	for j, k := range s.pairs {
		str, isString := m[k].(string)
		switch {
		case m[k] == nil:
			problems.add(where.header, "[[%s]] has no %s", key, k)
		case !isString:
			problems.add(where.line(k), "%s.%s: want a string, got %s", key, k, tomlType(m[k]))
		case str == "":
			problems.add(where.line(k), "%s.%s is empty", key, k)
		case j == 0 && strings.Contains(str, "="):
			problems.add(where.line(k), "%s.%s = %q: no '=' in a %s", key, k, str, k)
		}
		pair[j] = str
	}
	return pair, len(problems.list) == n
}

// tableLines is where a table of an array of tables is: its header's
// line and the line of each of its keys.
type tableLines struct {
	header int
	keys   map[string]int
}

func (t tableLines) line(key string) int {
	if l, ok := t.keys[key]; ok {
		return l
	}
	return t.header
}

// arrayTableLines finds the tables [[key]] of a TOML document, in order.
func arrayTableLines(data []byte, key string) []tableLines {
	var out []tableLines
	p := unstable.Parser{}
	p.Reset(data)
	in := false
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			in = e.Kind == unstable.ArrayTable && strings.Join(keyParts(e.Key()), ".") == key
			if in {
				out = append(out, tableLines{header: headerLine(&p, e), keys: map[string]int{}})
			}
		case unstable.KeyValue:
			if in {
				out[len(out)-1].keys[strings.Join(keyParts(e.Key()), ".")] = lineOf(&p, e)
			}
		}
	}
	return out
}

// tomlError says where a file is not TOML.
func tomlError(path string, err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return configError(path, row, "%s", de.Error())
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) {
		return configError(path, 0, "%s", pe.Message)
	}
	return configError(path, 0, "%v", err)
}

// flatten turns nested tables into dotted keys. An empty table is kept
// as a key of its own so that a misspelled table is still reported.
func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			flatten(key, sub, out)
			continue
		}
		out[key] = v
	}
}

// keyLines finds the line of every key in a TOML document, the keys
// dotted with their tables' names. A key in an inline table gets the
// line of the key holding the table.
func keyLines(data []byte) (map[string]int, error) {
	lines := map[string]int{}
	p := unstable.Parser{}
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyParts(e.Key())
			// A table's header line is where its empty table is.
			lines[strings.Join(table, ".")] = headerLine(&p, e)
		case unstable.KeyValue:
			key := append(append([]string{}, table...), keyParts(e.Key())...)
			line := lineOf(&p, e)
			lines[strings.Join(key, ".")] = line
			inlineLines(strings.Join(key, "."), e.Value(), line, lines)
		}
	}
	return lines, p.Error()
}

// inlineLines gives the keys of an inline table the line of the key
// holding it.
func inlineLines(prefix string, v *unstable.Node, line int, lines map[string]int) {
	if v == nil || v.Kind != unstable.InlineTable {
		return
	}
	it := v.Children()
	for it.Next() {
		kv := it.Node()
		key := prefix + "." + strings.Join(keyParts(kv.Key()), ".")
		lines[key] = line
		inlineLines(key, kv.Value(), line, lines)
	}
}

func keyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

// headerLine is the line of a table's header: its key's, as the parser
// keeps no position for the table itself.
func headerLine(p *unstable.Parser, table *unstable.Node) int {
	it := table.Key()
	if it.Next() {
		return lineOf(p, it.Node())
	}
	return lineOf(p, table)
}

func lineOf(p *unstable.Parser, n *unstable.Node) int {
	if n.Raw.Length == 0 && n.Raw.Offset == 0 {
		return 0
	}
	return p.Shape(n.Raw).Start.Line
}

// suggestKey names the known key closest to a mistyped one.
func suggestKey(key string, t *settingsTable) string {
	best, bestD := "", 4
	for _, s := range t.list {
		if d := editDistance(key, s.fileKey()); d < bestD {
			best, bestD = s.fileKey(), d
		}
	}
	if best == "" {
		// A flag's name used as a key in a table of its own: --codex-sandbox
		// is executor.codex.sandbox.
		if s := t.lookup(key); s != nil {
			best = s.fileKey()
		}
	}
	if best == "" {
		return "; `agent config print` lists every key"
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// fromTOML converts a value decoded from TOML to the setting's type.
func fromTOML(s *setting, v any) (any, error) {
	switch s.def.(type) {
	case string:
		if str, ok := v.(string); ok {
			return str, nil
		}
		return nil, fmt.Errorf("want a string, got %s", tomlType(v))
	case int:
		if n, ok := v.(int64); ok {
			if int64(int(n)) != n {
				return nil, fmt.Errorf("%d is out of range", n)
			}
			return int(n), nil
		}
		return nil, fmt.Errorf("want an integer, got %s", tomlType(v))
	case bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("want true or false, got %s", tomlType(v))
	case time.Duration:
		return tomlDuration(v)
	case byteSize:
		switch x := v.(type) {
		case int64:
			if x < 0 {
				return nil, fmt.Errorf("%d: want a size of at least 0", x)
			}
			return byteSize(x), nil
		case string:
			return parseSize(x)
		}
		return nil, fmt.Errorf(`want a size such as "10GiB" or a number of bytes, got %s`, tomlType(v))
	case []string:
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("want an array of strings such as [\"a\", \"b\"], got %s", tomlType(v))
		}
		out := make([]string, len(list))
		for i, e := range list {
			str, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: want a string, got %s", i+1, tomlType(e))
			}
			out[i] = str
		}
		return out, nil
	case []time.Duration:
		list, ok := v.([]any)
		if !ok { // one limit for every attempt
			d, err := tomlDuration(v)
			if err != nil {
				return nil, err
			}
			return []time.Duration{d.(time.Duration)}, nil
		}
		out := make([]time.Duration, len(list))
		for i, e := range list {
			d, err := tomlDuration(e)
			if err != nil {
				return nil, fmt.Errorf("item %d: %v", i+1, err)
			}
			out[i] = d.(time.Duration)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported setting type %T", s.def)
}

func tomlDuration(v any) (any, error) {
	str, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf(`want a duration string such as "30s" or "5m", got %s`, tomlType(v))
	}
	d, err := time.ParseDuration(str)
	if err != nil {
		return nil, fmt.Errorf(`%q is not a duration such as "30s" or "5m"`, str)
	}
	return d, nil
}

// tomlType names a decoded value's type the way the file wrote it.
func tomlType(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case int64:
		return fmt.Sprintf("the integer %d", x)
	case float64:
		return fmt.Sprintf("the number %v", x)
	case bool:
		return fmt.Sprintf("%v", x)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

// filePath makes a path from the config file absolute: ~/ is the home
// directory, and a relative path is relative to the file's directory.
func filePath(p, dir string) string {
	if p == "" {
		return p
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if !filepath.IsAbs(p) {
		if abs, err := filepath.Abs(filepath.Join(dir, p)); err == nil {
			return abs
		}
	}
	return p
}
