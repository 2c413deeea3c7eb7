package service

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/settings"
)

// testRunFlags reads flags as a small agent run would: a table with the
// settings SpecFrom looks at, and a parser that refuses what the flag set
// does not know.
func testRunFlags() RunFlags {
	repoKeys := [2]string{"name", "path"}
	tbl := &settings.Table{EnvPrefix: "AGENT_", List: []*settings.Setting{
		{Name: "control-plane", Help: "url"},
		{Name: "token-file", Path: true, Help: "token"},
		{Name: "data-dir", Path: true, Default: "agent-data", Help: "data"},
		{Name: "work-dir", Path: true, Help: "work"},
		{Name: "repo", Default: []string(nil), Repeat: true, Path: true, Pairs: &repoKeys, Help: "repos"},
		{Name: "drain-timeout", Default: time.Minute, Help: "drain"},
		{Name: "kill-grace", Default: time.Second, Help: "grace"},
	}}
	parse := func(args []string) (*pflag.FlagSet, error) {
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		fs.String("config", "", "config")
		for _, name := range []string{"control-plane", "token-file", "data-dir", "work-dir"} {
			tbl.Bind(fs, name, new(string))
		}
		tbl.Bind(fs, "repo", new([]string))
		tbl.Bind(fs, "drain-timeout", new(time.Duration))
		tbl.Bind(fs, "kill-grace", new(time.Duration))
		return fs, fs.Parse(args)
	}
	return RunFlags{Parse: parse, Settings: tbl}
}

// The spec names every path absolute, the data directory always (the
// target's default when the flags leave it), and refuses flags a unit
// would break on or a service could not start with.
func TestSpecFrom(t *testing.T) {
	t.Chdir(t.TempDir())
	rf := testRunFlags()
	tg := testTarget(t, Systemd, false)
	writeFile(t, "token", "secret")
	must(t, os.Mkdir("repo", 0o700))
	cwd, err := os.Getwd()
	must(t, err)
	spec, err := rf.SpecFrom([]string{"--control-plane", "https://cp.example.com", "--token-file", "token", "--repo=r=repo", "--work-dir", "w"}, tg, nil)
	must(t, err)
	want := []string{"--control-plane", "https://cp.example.com", "--token-file", filepath.Join(cwd, "token"), "--repo=r=" + filepath.Join(cwd, "repo"),
		"--work-dir", filepath.Join(cwd, "w"), "--data-dir", tg.DefaultDataDir()}
	if strings.Join(spec.Args, " ") != strings.Join(want, " ") || spec.DataDir != tg.DefaultDataDir() || spec.WorkDir != filepath.Join(cwd, "w") ||
		len(spec.Repos) != 1 || spec.Repos[0] != filepath.Join(cwd, "repo") || spec.Files["token-file"][0] != filepath.Join(cwd, "token") {
		t.Errorf("spec %+v", spec)
	}
	if spec.Stop != StopTimeout(time.Minute, time.Second) {
		t.Errorf("stop timeout %s", spec.Stop)
	}
	if spec, err := rf.SpecFrom([]string{"--control-plane", "u", "--data-dir", "d"}, tg, map[string]string{"AGENT_TOKEN": "t"}); err != nil || spec.DataDir != filepath.Join(cwd, "d") {
		t.Errorf("token in the environment file, data directory named: %+v %v", spec, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--control-plane", "u\nExecStartPre=/bin/evil", "--token-file", "token"}, "holds a control character"},
		{[]string{"--token-file", "token"}, "with --control-plane URL (or control-plane in a config file)"},
		{[]string{"--control-plane", "u"}, "with --token-file (or AGENT_TOKEN in " + tg.EnvFile()},
		{[]string{"--control-plane", "u", "--token-file", "missing"}, "missing"},
		{[]string{"--control-plane", "u", "--token-file", "token", "--repo", "noname"}, "--repo noname: want NAME=PATH"},
	} {
		_, err := rf.SpecFrom(c.args, tg, nil)
		var ue UsageError
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.want != "missing" && !errors.As(err, &ue)) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}
