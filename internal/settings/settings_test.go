package settings

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// testTable is a program's settings of every kind the engine knows.
func testTable() *Table {
	return &Table{EnvPrefix: "T_", KeysCommand: "prog config print", List: []*Setting{
		{Name: "workers", Default: 2, Live: true, Min: AtLeast(1), Help: "workers at once"},
		{Name: "name", Help: "a name, empty by default"},
		{Name: "state-dir", Path: true, Help: "where state is"},
		{Name: "verbose", Default: false, Help: "say more"},
		{Name: "mode", Key: "engine.mode", Default: "fast", OneOf: []string{"fast", "slow"}, Help: "how"},
		{Name: "grace", Key: "engine.grace", Default: 5 * time.Second, Live: true, Min: AtLeast(0),
			Alias: "old-grace", AliasKey: "engine.old-grace", Help: "how long"},
		{Name: "retry-backoff", Key: "engine.retry.backoff", Default: time.Second, Help: "between tries"},
		{Name: "limits", Default: []time.Duration{time.Minute}, Min: AtLeast(1), Help: "per try"},
		{Name: "cap", Default: ByteSize(1 << 20), Min: AtLeast(4 << 10), Help: "a size"},
		{Name: "tags", Default: []string(nil), Help: "tags"},
		{Name: "servers", CommaList: true, Help: "servers, comma-separated"},
		{Name: "repo", Default: []string(nil), Repeat: true, Path: true, Pairs: &[2]string{"name", "path"},
			PairOptions: []TableKey{{Name: "push", Default: ""}}, Help: "NAME=PATH"},
		{Name: "hook", Default: []FileTable(nil), Table: []TableKey{
			{Name: "name", Default: "", Required: true},
			{Name: "events", Default: []string(nil)},
			{Name: "file", Path: true}, // no default: a string
			{Name: "max", Default: 0},
		}, Help: "hooks, in the file only"},
	}}
}

// flags binds every setting of t but the file's own tables, as a command
// taking them all would.
type flags struct {
	workers int
	name    string
	dir     string
	verbose bool
	mode    string
	grace   time.Duration
	limits  []time.Duration
	cap     ByteSize
	tags    []string
	servers string
	repos   []string
}

func (f *flags) bind(t *Table, fs *pflag.FlagSet) {
	t.Bind(fs, "workers", &f.workers)
	t.Bind(fs, "name", &f.name)
	t.Bind(fs, "state-dir", &f.dir)
	t.Bind(fs, "verbose", &f.verbose)
	t.Bind(fs, "mode", &f.mode)
	t.Bind(fs, "grace", &f.grace)
	t.Bind(fs, "limits", &f.limits)
	t.Bind(fs, "cap", &f.cap)
	t.Bind(fs, "tags", &f.tags)
	t.Bind(fs, "servers", &f.servers)
	t.Bind(fs, "repo", &f.repos)
}

func newFlags(t *Table) (*flags, *pflag.FlagSet) {
	f := &flags{}
	fs := pflag.NewFlagSet("prog", pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	fs.String("config", "", "the config file")
	f.bind(t, fs)
	return f, fs
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResolvePrecedenceAndOrigins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "prog.toml")
	writeFile(t, file, `workers = 3
state-dir = "state"
servers = ["a.example", "b.example"]
cap = "64KiB"

[engine]
mode = "slow"
old-grace = "9s"
`)
	tab := testTable()
	f, fs := newFlags(tab)
	if err := fs.Parse([]string{"--name", "from-flag", "--tags", "x,y"}); err != nil {
		t.Fatal(err)
	}
	r, err := tab.Resolve(fs, file, env(map[string]string{"T_WORKERS": "4", "T_NAME": "from-env", "T_LIMITS": "1m,2m"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		name, origin string
		value, got   any
	}{
		{"name", "flag --name", "from-flag", f.name},                             // the command line over the environment
		{"workers", "env T_WORKERS", 4, f.workers},                               // the environment over the file
		{"mode", "file " + file + ":7", "slow", f.mode},                          // the file over the default
		{"grace", "file " + file + ":8", 9 * time.Second, f.grace},               // by its former key
		{"state-dir", "file " + file + ":2", filepath.Join(dir, "state"), f.dir}, // relative to the file
		{"servers", "file " + file + ":3", "a.example,b.example", f.servers},
		{"cap", "file " + file + ":4", ByteSize(64 << 10), f.cap},
		{"limits", "env T_LIMITS", []time.Duration{time.Minute, 2 * time.Minute}, f.limits},
		{"tags", "flag --tags", []string{"x", "y"}, f.tags},
		{"verbose", "default", false, f.verbose},
	} {
		if o := r.Origins[want.name].String(); o != want.origin {
			t.Errorf("%s from %q, want %q", want.name, o, want.origin)
		}
		if fmt.Sprint(want.got) != fmt.Sprint(want.value) || fmt.Sprint(Value(fs, tab.Lookup(want.name))) != fmt.Sprint(want.value) {
			t.Errorf("%s = %v, want %v", want.name, want.got, want.value)
		}
	}
	if r.File != file {
		t.Errorf("File = %q, want %q", r.File, file)
	}
}

// A former name is taken on the command line and in the environment, as
// the setting it became.
func TestAliasOnTheCommandLineAndInTheEnvironment(t *testing.T) {
	t.Parallel()
	tab := testTable()
	f, fs := newFlags(tab)
	if err := fs.Parse([]string{"--old-grace", "3s"}); err != nil {
		t.Fatal(err)
	}
	r, err := tab.Resolve(fs, "", env(nil))
	if err != nil || f.grace != 3*time.Second || r.Origins["grace"].String() != "flag --old-grace" {
		t.Fatalf("--old-grace 3s: grace %s from %q, %v", f.grace, r.Origins["grace"], err)
	}
	f, fs = newFlags(tab)
	r, err = tab.Resolve(fs, "", env(map[string]string{"T_OLD_GRACE": "4s"}))
	if err != nil || f.grace != 4*time.Second || r.Origins["grace"].String() != "env T_OLD_GRACE" {
		t.Fatalf("T_OLD_GRACE=4s: grace %s from %q, %v", f.grace, r.Origins["grace"], err)
	}
	if !fs.Lookup("old-grace").Hidden {
		t.Error("--old-grace is shown in the help")
	}
}

// Each mistake in a file is said with its file and line, every one of
// them at once, in the file's order, as usage errors.
func TestFileMistakesNameTheirLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"unknown key", "workers = 2\nwokers = 3\n", []string{`:2: unknown key "wokers"; did you mean "workers"?`}},
		{"unknown key like none", "nothing-like-it = 1\n", []string{":1: unknown key \"nothing-like-it\"; `prog config print` lists every key"}},
		{"flag name as a key", "retry-backoff = \"1s\"\n", []string{`:1: unknown key "retry-backoff"; did you mean "engine.retry.backoff"?`}},
		{"wrong type", "\nworkers = \"two\"\n", []string{`:2: workers: want an integer, got the string "two"`}},
		{"not allowed", "[engine]\nmode = \"medium\"\n", []string{`:2: engine.mode = "medium": want fast or slow`}},
		{"below the minimum", "workers = 0\n", []string{`:1: workers = 0: want at least 1`}},
		{"size below the minimum", "cap = 1024\n", []string{`:1: cap = 1KiB: want at least 4KiB`}},
		{"duration not a string", "[engine]\ngrace = 5\n", []string{`:2: engine.grace: want a duration string such as "30s" or "5m", got the integer 5`}},
		{"not a duration", "limits = [\"1m\", \"soon\"]\n", []string{`:1: limits: item 2: "soon" is not a duration such as "30s" or "5m"`}},
		{"a comma in a list", "servers = [\"a,b\"]\n", []string{`:1: servers: want an array of strings without commas, got the string "a,b" at 0`}},
		{"not TOML", "tags = [\"a\",\n", []string{`:1: toml:`}},
		{"pairs table without a path", "[[repo]]\nname = \"app\"\n", []string{`:1: [[repo]] has no path`}},
		{"pairs table with an unknown key", "[[repo]]\nname = \"app\"\npath = \"/x\"\nbranch = \"main\"\n",
			[]string{`:4: unknown key "branch" in [[repo]]: want name, path or push`}},
		{"pairs as a string", "repo = \"app\"\n", []string{`:1: repo: want [[repo]] tables with name and path, got the string "app"`}},
		{"a name with =", "[[repo]]\nname = \"a=b\"\npath = \"/x\"\n", []string{`:2: repo.name = "a=b": no '=' in a name`}},
		{"table without its required key", "[[hook]]\nevents = [\"x\"]\n", []string{`:1: [[hook]] has no name`}},
		{"table key of the wrong type", "[[hook]]\nname = \"h\"\nmax = \"lots\"\n", []string{`:3: hook.max: want a whole number from 1 to 1048576, got the string "lots"`}},
		{"several", "wokers = 3\n\n[engine]\nmode = \"medium\"\n\n[[repo]]\nname = \"app\"\n", []string{
			`:1: unknown key "wokers"; did you mean "workers"?`,
			`:4: engine.mode = "medium": want fast or slow`,
			`:6: [[repo]] has no path`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			writeFile(t, file, tc.text)
			_, err := ReadFile(file, testTable())
			if err == nil {
				t.Fatalf("%q: no error", tc.text)
			}
			var ue UsageError
			if !errors.As(err, &ue) {
				t.Errorf("%v is not a usage error", err)
			}
			got := []error{err}
			var errs Errors
			if errors.As(err, &errs) {
				got = errs
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d mistakes: %v; want %d", len(got), err, len(tc.want))
			}
			for i, e := range got {
				if !strings.HasPrefix(e.Error(), "config "+file+tc.want[i]) {
					t.Errorf("mistake %d: %q, want it to start %q", i+1, e, "config "+file+tc.want[i])
				}
				if strings.Contains(e.Error(), "\n") {
					t.Errorf("mistake %d is more than a line: %q", i+1, e)
				}
			}
		})
	}
}

func TestFileItselfRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := ReadFile(filepath.Join(dir, "nope.toml"), testTable()); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := ReadFile(dir, testTable()); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	big := filepath.Join(dir, "big.toml")
	writeFile(t, big, "# "+strings.Repeat("x", maxConfigBytes)+"\n")
	if _, err := ReadFile(big, testTable()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file over the bound: %v", err)
	}
}

// A bad value in the environment or on the command line is said with the
// variable's or the flag's name.
func TestBadValuesOutsideTheFile(t *testing.T) {
	t.Parallel()
	tab := testTable()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"T_WORKERS": "lots"}, `T_WORKERS="lots": `},
		{nil, map[string]string{"T_MODE": "medium"}, `T_MODE: "medium": want fast or slow`},
		{[]string{"--workers", "0"}, nil, `--workers 0: want at least 1`},
		{[]string{"--limits", "0s"}, nil, `--limits 0s: want more than 0s`},
		{[]string{"--repo", "just-a-name"}, nil, `--repo "just-a-name": want NAME=PATH`},
	} {
		_, fs := newFlags(tab)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		_, err := tab.Resolve(fs, "", env(tc.env))
		var ue UsageError
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.As(err, &ue) {
			t.Errorf("%v %v: %v, want a usage error starting %q", tc.args, tc.env, err, tc.want)
		}
	}
}

// The file's arrays of tables: a pairs setting's, with its options, and a
// table setting's, read by the command with Resolved.Tables.
func TestFileTables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory to expand ~/ to")
	}
	file := filepath.Join(dir, "prog.toml")
	writeFile(t, file, `workers = 2

[[repo]]
name = "app"
path = "src/app"
push = "origin"

[[repo]]
path = "~/docs"
name = "docs"

[[hook]]
name = "first"
events = ["start", "stop"]
file = "hook.sh"
max = 3
`)
	tab := testTable()
	f, fs := newFlags(tab)
	r, err := tab.Resolve(fs, file, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	wantRepos := []string{"app=" + filepath.Join(dir, "src", "app"), "docs=" + filepath.Join(home, "docs")}
	if !slices.Equal(f.repos, wantRepos) || r.Origins["repo"].String() != "file "+file+":3" {
		t.Errorf("repo = %q from %q, want %q from line 3", f.repos, r.Origins["repo"], wantRepos)
	}
	repos, from := r.Tables("repo")
	if from != file || len(repos) != 2 || repos[0].Str("push") != "origin" || repos[1].Str("push") != "" || repos[1].Line("name") != 10 {
		t.Errorf("repo tables %+v from %q", repos, from)
	}
	hooks, _ := r.Tables("hook")
	if len(hooks) != 1 {
		t.Fatalf("hook tables: %+v", hooks)
	}
	h := hooks[0]
	if h.Str("name") != "first" || !slices.Equal(h.List("events"), []string{"start", "stop"}) ||
		h.Str("file") != filepath.Join(dir, "hook.sh") || h.Num("max") != 3 || h.Line("max") != 16 || h.Line("absent") != 12 {
		t.Errorf("hook table: %+v", h)
	}
	// The environment's pairs replace the file's.
	f, fs = newFlags(tab)
	if _, err := tab.Resolve(fs, file, env(map[string]string{"T_REPO": "env=/from/env"})); err != nil || !slices.Equal(f.repos, []string{"env=/from/env"}) {
		t.Errorf("T_REPO over the file: %q, %v", f.repos, err)
	}
	var none *Resolved
	if ts, from := none.Tables("hook"); ts != nil || from != "" {
		t.Errorf("no settings resolved, yet tables %+v from %q", ts, from)
	}
}

// A flag of a command's own with a setting's name is not the setting's.
func TestOnlyBoundFlagsAreSettings(t *testing.T) {
	t.Parallel()
	tab := testTable()
	fs := pflag.NewFlagSet("prog", pflag.ContinueOnError)
	own := fs.Int("workers", 7, "a command's own --workers")
	r, err := tab.Resolve(fs, "", env(map[string]string{"T_WORKERS": "4"}))
	if err != nil || *own != 7 {
		t.Fatalf("--workers of the command's own took T_WORKERS: %d, %v", *own, err)
	}
	if _, ok := r.Origins["workers"]; ok {
		t.Error("an unbound flag has an origin")
	}
}

func TestBindRefusesAnUnknownSetting(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("binding a setting the table does not have did not panic")
		}
	}()
	var s string
	testTable().Bind(pflag.NewFlagSet("prog", pflag.ContinueOnError), "nope", &s)
}

// The help of a bound flag names its environment variable.
func TestBindSaysTheVariable(t *testing.T) {
	t.Parallel()
	_, fs := newFlags(testTable())
	if u := fs.Lookup("workers").Usage; u != "workers at once (env T_WORKERS)" {
		t.Errorf("--workers usage %q", u)
	}
}

// ConfigPath: --config, else PREFIX_CONFIG (empty: none), else the
// default file if it exists.
func TestConfigPath(t *testing.T) {
	dir := t.TempDir()
	def := filepath.Join(dir, "default.toml")
	tab := testTable()
	tab.DefaultFile = func() string { return def }
	t.Setenv("T_CONFIG", "")
	os.Unsetenv("T_CONFIG")
	_, fs := newFlags(tab)
	if p := tab.ConfigPath(fs); p != "" {
		t.Errorf("no file, no default: %q", p)
	}
	writeFile(t, def, "")
	if p := tab.ConfigPath(fs); p != def {
		t.Errorf("the default file exists: %q", p)
	}
	t.Setenv("T_CONFIG", "")
	if p := tab.ConfigPath(fs); p != "" {
		t.Errorf("T_CONFIG empty: %q", p)
	}
	t.Setenv("T_CONFIG", "/from/env.toml")
	if p := tab.ConfigPath(fs); p != "/from/env.toml" {
		t.Errorf("T_CONFIG: %q", p)
	}
	if err := fs.Parse([]string{"--config", "/from/flag.toml"}); err != nil {
		t.Fatal(err)
	}
	if p := tab.ConfigPath(fs); p != "/from/flag.toml" {
		t.Errorf("--config: %q", p)
	}
}

// Again keeps the command line's values over the file's as it is now,
// and Changes tells a reload which settings changed, live or not.
func TestAgainAndChanges(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "prog.toml")
	writeFile(t, file, "workers = 3\nname = \"one\"\n[engine]\nmode = \"slow\"\n")
	tab := testTable()
	f, fs := newFlags(tab)
	if err := fs.Parse([]string{"--tags", "a,b"}); err != nil {
		t.Fatal(err)
	}
	r, err := tab.Resolve(fs, file, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, "workers = 5\nname = \"two\"\ntags = [\"file\"]\n[engine]\nmode = \"slow\"\ngrace = \"1s\"\n")
	g, next := newFlags(tab)
	r2, err := r.Again(next)
	if err != nil {
		t.Fatal(err)
	}
	if g.workers != 5 || g.name != "two" || !slices.Equal(g.tags, []string{"a", "b"}) || r2.Origins["tags"].String() != "flag --tags" {
		t.Fatalf("again: workers %d, name %q, tags %q from %q", g.workers, g.name, g.tags, r2.Origins["tags"])
	}
	live, restart := tab.Changes(fs, next)
	names := func(ss []*Setting) (out []string) {
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	if !slices.Equal(names(live), []string{"workers", "grace"}) || !slices.Equal(names(restart), []string{"name"}) {
		t.Fatalf("changes: live %q, restart %q", names(live), names(restart))
	}
	tab.ApplyLive(fs, next)
	if f.workers != 5 || f.grace != time.Second || f.name != "one" || f.mode != "slow" {
		t.Errorf("after ApplyLive: workers %d, grace %s, name %q, mode %q; want the live ones only", f.workers, f.grace, f.name, f.mode)
	}
	// A file gone bad is refused, and what was in force stays.
	writeFile(t, file, "workers = 0\n")
	if _, bad := newFlags(tab); true {
		if _, err := r.Again(bad); err == nil || !strings.Contains(err.Error(), "workers = 0: want at least 1") {
			t.Errorf("a bad file read again: %v", err)
		}
	}
}

func TestFilePath(t *testing.T) {
	t.Parallel()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory to expand ~/ to")
	}
	for in, want := range map[string]string{
		"":         "",
		"/abs/x":   "/abs/x",
		"rel/x":    "/etc/prog/rel/x",
		"../x":     "/etc/x",
		"~/docs":   filepath.Join(home, "docs"),
		"~notme/x": "/etc/prog/~notme/x",
	} {
		if got := FilePath(in, "/etc/prog"); got != want {
			t.Errorf("FilePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// WriteTOML writes a file that reads back the same values, each with
// where it came from, and what redact hides is not in it.
func TestWriteTOMLReadsBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "prog.toml")
	writeFile(t, file, `workers = 3
name = "https://me:hunter2@example.com"

[engine]
mode = "slow"

[[repo]]
name = "app"
path = "/src/app"
push = "https://me:hunter2@forge.example/app.git"
`)
	tab := testTable()
	_, fs := newFlags(tab)
	if err := fs.Parse([]string{"--limits", "1m,2m", "--cap", "2GiB"}); err != nil {
		t.Fatal(err)
	}
	r, err := tab.Resolve(fs, file, env(map[string]string{"T_TAGS": "a,b"}))
	if err != nil {
		t.Fatal(err)
	}
	redact := func(key, value string) string {
		if key == "name" || key == "repo.push" {
			return strings.ReplaceAll(value, "hunter2", "REDACTED")
		}
		return value
	}
	var out strings.Builder
	if err := r.WriteTOML(&out, fs, redact); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.Contains(text, "hunter2") {
		t.Fatalf("a redacted value is written:\n%s", text)
	}
	for _, want := range []struct{ key, value, origin string }{
		{"workers", "3", "file " + file + ":1 · live"},
		{"verbose", "false", "default"},
		{"limits", `["1m0s", "2m0s"]`, "flag --limits"},
		{"cap", `"2GiB"`, "flag --cap"},
		{"tags", `["a", "b"]`, "env T_TAGS"},
		{"mode", `"slow"`, "file " + file + ":5"},
		{"grace", `"5s"`, "default · live"},
	} {
		m := regexp.MustCompile(`(?m)^` + want.key + ` = (.*?)\s+# (.*)$`).FindStringSubmatch(text)
		if m == nil || m[1] != want.value || m[2] != want.origin {
			t.Errorf("%s: %q, want %s # %s", want.key, m, want.value, want.origin)
		}
	}
	for _, want := range []string{
		"\n[engine]\nmode = ",
		"\n[[repo]]                                     # file " + file + ":7\nname = \"app\"\npath = \"/src/app\"\npush = \"https://me:REDACTED@forge.example/app.git\"\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	printed := filepath.Join(dir, "printed.toml")
	writeFile(t, printed, text)
	_, again := newFlags(tab)
	r2, err := tab.Resolve(again, printed, env(nil))
	if err != nil {
		t.Fatalf("the written file does not read back: %v\n%s", err, text)
	}
	for _, s := range tab.List {
		if Bound(fs, s) == nil || s.Name == "name" {
			continue
		}
		if a, b := fmt.Sprint(Value(fs, s)), fmt.Sprint(Value(again, s)); a != b {
			t.Errorf("%s: written %s, read back %s", s.Name, a, b)
		}
		if r2.Origins[s.Name].Kind != FromFile {
			t.Errorf("%s read back from %s", s.Name, r2.Origins[s.Name])
		}
	}
	// No pairs: a comment says how to write one.
	_, fs = newFlags(tab)
	r, err = tab.Resolve(fs, "", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := r.WriteTOML(&out, fs, nil); err != nil {
		t.Fatal(err)
	}
	if want := "\n# [[repo]]                                   # default\n# name = \"NAME\"\n# path = \"PATH\"\n"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in:\n%s", want, out.String())
	}
}
