package settings

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// maxConfigBytes bounds a config file; a settings file is a few KB.
const maxConfigBytes = 1 << 20

// File is a parsed config file: each setting's value, of the
// setting's type, and the line it is on.
type File struct {
	values map[string]FileValue // by setting name
	// tables are the [[KEY]] tables of the pairs settings that take
	// options, by setting name: their values as []FileTable.
	tables map[string]FileValue
}

// FileValue is a setting's value in a config file, of the setting's
// type, and the line it is on.
type FileValue struct {
	V    any
	Line int
}

// Lookup is the file's value of the setting name. c may be nil: no file.
func (c *File) Lookup(name string) (FileValue, bool) {
	if c == nil {
		return FileValue{}, false
	}
	v, ok := c.values[name]
	return v, ok
}

// Len is how many settings the file sets.
func (c *File) Len() int { return len(c.values) }

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
	p.list = append(p.list, configProblem{line, FileError(p.path, line, format, args...)})
}

// err is nil when nothing was found, else every mistake by line.
func (p *configProblems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	sort.SliceStable(p.list, func(i, j int) bool { return p.list[i].line < p.list[j].line })
	errs := make(Errors, len(p.list))
	for i, pr := range p.list {
		errs[i] = pr.err
	}
	return errs
}

// ReadFile reads and checks a config file against t: every key must
// be a Setting's, every value of its type and allowed.
func ReadFile(path string, t *Table) (*File, error) {
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
		return nil, FileError(path, 0, "larger than %d bytes; is it the right file?", maxConfigBytes)
	}
	return Parse(path, data, t)
}

// Parse is ReadFile on the file's bytes.
func Parse(path string, data []byte, t *Table) (*File, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, tomlError(path, err)
	}
	lines, err := keyLines(data)
	if err != nil {
		return nil, tomlError(path, err)
	}
	cf := &File{values: map[string]FileValue{}, tables: map[string]FileValue{}}
	// Every mistake is found, not only the first: a person fixes them all
	// at once.
	problems := &configProblems{path: path}
	// Arrays of tables ([[repo]], [[notify]]) first: they are not dotted keys.
	for _, st := range t.List {
		v, ok := doc[st.FileKey()]
		if st.Pairs == nil && st.Table == nil || !ok {
			continue
		}
		delete(doc, st.FileKey())
		if st.Table != nil {
			if fv, ok := tablesFromTOML(problems, data, st, v, lines[st.FileKey()]); ok {
				cf.values[st.Name] = fv
			}
			continue
		}
		if fv, tables, ok := pairsFromTOML(problems, data, st, v, lines[st.FileKey()]); ok {
			cf.values[st.Name] = fv
			if st.PairOptions != nil {
				cf.tables[st.Name] = FileValue{V: tables, Line: fv.Line}
			}
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
		s := t.ByKey(k)
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
		if s.Path {
			switch x := v.(type) {
			case string:
				v = FilePath(x, filepath.Dir(path))
			case []string:
				for i := range x {
					x[i] = FilePath(x[i], filepath.Dir(path))
				}
			}
		}
		if err := s.Check(v); err != nil {
			problems.add(line, "%s = %v", k, err)
			continue
		}
		cf.values[s.Name] = FileValue{V: v, Line: line}
	}
	if err := problems.err(); err != nil {
		return nil, err
	}
	return cf, nil
}

// pairsFromTOML turns the array of tables [[KEY]] of a pairs Setting
// into its values, FIRST=SECOND each, and its tables, checking that
// every table has both keys and no other but the setting's options; each
// mistake goes to problems, and ok is false when there was one. line is
// where the key is when the array is written inline.
func pairsFromTOML(problems *configProblems, data []byte, s *Setting, v any, line int) (fv FileValue, tables []FileTable, ok bool) {
	keys := []TableKey{{Name: s.Pairs[0], Default: "", Required: true}, {Name: s.Pairs[1], Default: "", Required: true, Path: s.Path}}
	keys = append(keys, s.PairOptions...)
	values := []string{}
	first, ok := arrayFromTOML(problems, data, s.FileKey(), keys, v, line, func(t FileTable) bool {
		name := t.Str(s.Pairs[0])
		if strings.Contains(name, "=") {
			problems.add(t.Line(s.Pairs[0]), "%s.%s = %q: no '=' in a %s", s.FileKey(), s.Pairs[0], name, s.Pairs[0])
			return false
		}
		values = append(values, name+"="+t.Str(s.Pairs[1]))
		tables = append(tables, t)
		return true
	})
	return FileValue{V: values, Line: first}, tables, ok
}

// tablesFromTOML turns the array of tables [[KEY]] of a table setting
// into its []FileTable; each mistake goes to problems, and ok is false
// when there was one.
func tablesFromTOML(problems *configProblems, data []byte, s *Setting, v any, line int) (fv FileValue, ok bool) {
	tables := []FileTable{}
	first, ok := arrayFromTOML(problems, data, s.FileKey(), s.Table, v, line, func(t FileTable) bool {
		tables = append(tables, t)
		return true
	})
	return FileValue{V: tables, Line: first}, ok
}

// arrayFromTOML checks the array of tables [[key]] against its keys:
// each table a table, no unknown key, every required one, each of its
// type (a string, not empty, or an array of strings), paths made
// absolute. It calls item with each good table, which may find more
// mistakes (it returns false then). first is the first table's line; ok,
// whether no mistake was found.
func arrayFromTOML(problems *configProblems, data []byte, key string, keys []TableKey, v any, line int, item func(FileTable) bool) (first int, ok bool) {
	list, isList := v.([]any)
	if !isList {
		problems.add(line, "%s: want [[%s]] tables with %s, got %s", key, key, requiredKeys(keys), tomlType(v))
		return line, false
	}
	tables := arrayTableLines(data, key)
	first, ok = line, true
	for i, e := range list {
		where := tableLines{header: line, keys: map[string]int{}}
		if len(tables) == len(list) {
			where = tables[i]
		}
		if i == 0 {
			first = where.header
		}
		t, good := tableFromTOML(problems, key, keys, i, e, where)
		if !good || !item(t) {
			ok = false
		}
	}
	return first, ok
}

// tableFromTOML is item i of the array of tables [[key]], checked against
// its keys. Its mistakes go to problems.
func tableFromTOML(problems *configProblems, key string, keys []TableKey, i int, e any, where tableLines) (t FileTable, ok bool) {
	m, isTable := e.(map[string]any)
	if !isTable {
		problems.add(where.header, "%s: item %d: want a table with %s, got %s", key, i+1, requiredKeys(keys), tomlType(e))
		return t, false
	}
	n := len(problems.list)
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !slices.ContainsFunc(keys, func(tk TableKey) bool { return tk.Name == k }) {
			problems.add(where.line(k), "unknown key %q in [[%s]]: want %s", k, key, allKeys(keys))
		}
	}
	t = FileTable{values: map[string]any{}, where: where}
	for _, tk := range keys {
		v, present := m[tk.Name]
		if !present {
			if tk.Required {
				problems.add(where.header, "[[%s]] has no %s", key, tk.Name)
			}
			continue
		}
		switch tk.Default.(type) {
		case string, nil: // a key without a default is a string
			str, isString := v.(string)
			switch {
			case !isString:
				problems.add(where.line(tk.Name), "%s.%s: want a string, got %s", key, tk.Name, tomlType(v))
				continue
			case str == "":
				problems.add(where.line(tk.Name), "%s.%s is empty", key, tk.Name)
				continue
			}
			if tk.Path {
				str = FilePath(str, filepath.Dir(problems.path))
			}
			t.values[tk.Name] = str
		case []string:
			list, err := fromTOML(&Setting{Default: []string(nil)}, v)
			if err != nil {
				problems.add(where.line(tk.Name), "%s.%s: %v", key, tk.Name, err)
				continue
			}
			t.values[tk.Name] = list
		case int:
			n, isInt := v.(int64)
			if !isInt || n < 1 || n > 1<<20 {
				problems.add(where.line(tk.Name), "%s.%s: want a whole number from 1 to %d, got %s", key, tk.Name, 1<<20, tomlType(v))
				continue
			}
			t.values[tk.Name] = int(n)
		}
	}
	return t, len(problems.list) == n
}

// requiredKeys writes the keys every table must have: "name and path".
func requiredKeys(keys []TableKey) string {
	var names []string
	for _, k := range keys {
		if k.Required {
			names = append(names, k.Name)
		}
	}
	return andList(names)
}

// allKeys writes the keys a table may have: "name and path" when each is
// required, else "name, type, url or events".
func allKeys(keys []TableKey) string {
	names := make([]string, len(keys))
	all := true
	for i, k := range keys {
		names[i] = k.Name
		all = all && k.Required
	}
	if all {
		return andList(names)
	}
	return OrList(names)
}

func andList(vals []string) string {
	if len(vals) <= 1 {
		return strings.Join(vals, "")
	}
	return strings.Join(vals[:len(vals)-1], ", ") + " and " + vals[len(vals)-1]
}

// FileTable is one table of a table setting's [[KEY]]: its values, each a
// string or a []string as its key says, and where it is.
type FileTable struct {
	values map[string]any
	where  tableLines
}

// Str is a string key's value, "" when absent.
func (t FileTable) Str(key string) string { s, _ := t.values[key].(string); return s }

// List is a list key's value, nil when absent.
func (t FileTable) List(key string) []string { l, _ := t.values[key].([]string); return l }

// Num is a whole-number key's value, 0 when absent.
func (t FileTable) Num(key string) int { n, _ := t.values[key].(int); return n }

// Line is the line of a key, or of the table's header when it is absent.
func (t FileTable) Line(key string) int { return t.where.line(key) }

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
		return FileError(path, row, "%s", de.Error())
	}
	var pe *unstable.ParserError
	if errors.As(err, &pe) {
		return FileError(path, 0, "%s", pe.Message)
	}
	return FileError(path, 0, "%v", err)
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
func suggestKey(key string, t *Table) string {
	best, bestD := "", 4
	for _, s := range t.List {
		if d := editDistance(key, s.FileKey()); d < bestD {
			best, bestD = s.FileKey(), d
		}
	}
	if best == "" {
		// A flag's name used as a key in a table of its own: --codex-sandbox
		// is executor.codex.sandbox.
		if s := t.Lookup(key); s != nil {
			best = s.FileKey()
		}
	}
	if best == "" {
		if t.KeysCommand == "" {
			return ""
		}
		return "; `" + t.KeysCommand + "` lists every key"
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
func fromTOML(s *Setting, v any) (any, error) {
	switch s.DefaultValue().(type) {
	case string:
		if str, ok := v.(string); ok {
			return str, nil
		}
		if list, ok := v.([]any); ok && s.CommaList && len(list) > 0 {
			strs := make([]string, len(list))
			for i, e := range list {
				str, ok := e.(string)
				if !ok || str == "" || strings.Contains(str, ",") {
					return nil, fmt.Errorf("want an array of strings without commas, got %s at %d", tomlType(e), i)
				}
				strs[i] = str
			}
			return strings.Join(strs, ","), nil
		}
		if s.CommaList {
			return nil, fmt.Errorf("want a string or an array of strings, got %s", tomlType(v))
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
	case ByteSize:
		switch x := v.(type) {
		case int64:
			if x < 0 {
				return nil, fmt.Errorf("%d: want a size of at least 0", x)
			}
			return ByteSize(x), nil
		case string:
			return ParseSize(x)
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
	return nil, fmt.Errorf("unsupported setting type %T", s.DefaultValue())
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

// FilePath makes a path from the config file absolute: ~/ is the home
// directory, and a relative path is relative to the file's directory.
func FilePath(p, dir string) string {
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
