package main

// The settings and command reference under docs/reference/ is made from
// the code: the settings tables in internal/agentsettings and the command tree of
// newRootCmd. TestReferenceDocs fails when the committed files differ from
// what the code makes; go generate writes them again.

//go:generate go test -run=TestReferenceDocs -count=1 . -args -update

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/settings"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgeagent/agent/internal/service"
)

var updateReference = flag.Bool("update", false, "write docs/reference/ from the code rather than check it")

// referenceDocs are the generated documents, by path from the repository's
// root.
var referenceDocs = []struct {
	path   string
	render func() string
}{
	{"docs/reference/settings.md", renderSettingsReference},
	{"docs/reference/commands.md", renderCommandsReference},
}

func TestReferenceDocs(t *testing.T) {
	t.Parallel()
	for _, d := range referenceDocs {
		want := d.render()
		path := filepath.Join("..", "..", filepath.FromSlash(d.path))
		if *updateReference {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s is missing: run go generate ./cmd/agent", d.path)
			continue
		}
		if string(got) != want {
			t.Errorf("%s is stale: run go generate ./cmd/agent (%s)", d.path, firstDifference(string(got), want))
		}
	}
}

// TestReferenceIgnoresEnvironment: the reference says how the defaults
// that depend on the environment are found, not what they are on the
// machine that made it.
func TestReferenceIgnoresEnvironment(t *testing.T) {
	var before []string
	for _, d := range referenceDocs {
		before = append(before, d.render())
	}
	elsewhere := t.TempDir()
	t.Setenv("HOME", elsewhere)
	t.Setenv("XDG_CONFIG_HOME", elsewhere)
	t.Setenv("XDG_STATE_HOME", elsewhere)
	t.Setenv("SUDO_USER", "someone-else")
	t.Setenv("USER", "someone-else")
	for i, d := range referenceDocs {
		out := d.render()
		if out != before[i] {
			t.Errorf("%s changes with the environment (%s)", d.path, firstDifference(before[i], out))
		}
		for _, s := range []string{elsewhere, agentDataDirDefault()} {
			if strings.Contains(out, s) {
				t.Errorf("%s holds this machine's %s", d.path, s)
			}
		}
	}
}

func agentDataDirDefault() string { return agentSettings.Lookup("data-dir").Default.(string) }

// firstDifference says where two texts first differ, in one line.
func firstDifference(have, want string) string {
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(h) || i < len(w); i++ {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl {
			return fmt.Sprintf("line %d is %q, the code makes %q", i+1, clip(hl), clip(wl))
		}
	}
	return "they differ"
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

const generatedNote = "<!-- Made by go generate ./cmd/agent from the code (cmd/agent); do not edit. -->\n\n"

// renderSettingsReference writes docs/reference/settings.md: one table per
// settings table, and which commands take which settings.
func renderSettingsReference() string {
	var b bytes.Buffer
	b.WriteString(generatedNote)
	b.WriteString(`# Settings

Every setting has three names: a flag, an environment variable and a key of
the TOML config file. The command line wins over the environment, which wins
over the file, which wins over the default. A *live* setting of ` + "`agent run`" + `
applies, after a reload (the config file changes, or SIGHUP), to the attempts
that start after it and to the next claim; the others apply at the next
start. How the settings are read, the config file and reload are in
[Configuration](../configuration.md); every command and its flags in
[Commands](commands.md).
`)
	root := newRootCmd()
	families := []struct {
		title, intro string
		table        *settingsTable
		live         bool
	}{
		{"The agent", "The settings of `agent run` and of the commands that read the agent's state or reach the control plane. The token comes from `--token-file` or `AGENT_TOKEN`, never from the config file.\n\n" +
			"The config file: `--config FILE`, else `AGENT_CONFIG`, else " + envDefaultFor(agentSettings.DefaultFile()) + " if it exists; `AGENT_CONFIG=` (empty) reads none. In the file a list is an array of strings (durations: one string alone holds for every attempt), a duration is a string (`\"30s\"`), a size a string (`\"10GiB\"`) or a number of bytes; in a path, `~/` is the home directory and a relative path is relative to the file.",
			agentSettings, true},
		{"The reference control plane", "The settings of `agent controlplane serve`. The config file is read only when named: `--config FILE` or `AGENT_CP_CONFIG`; its keys are the flags' names. The control plane reads its settings at start.",
			controlPlaneSettings, false},
	}
	for _, f := range families {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", f.title, f.intro)
		if f.live {
			b.WriteString("| flag | environment | file key | type | default | applies | |\n|---|---|---|---|---|---|---|\n")
		} else {
			b.WriteString("| flag | environment | file key | type | default | |\n|---|---|---|---|---|---|\n")
		}
		for _, s := range f.table.List {
			flag, env := "`--"+s.Name+"`", "`"+s.EnvName(f.table.EnvPrefix)+"`"
			if s.Table != nil {
				flag, env = "", "" // the file's alone
			}
			cells := []string{
				flag,
				env,
				fileKeyCell(s),
				settingType(s),
				settingDefault(s),
			}
			if f.live {
				applies := "restart"
				if s.Live {
					applies = "live"
				}
				cells = append(cells, applies)
			}
			cells = append(cells, mdCell(s.Help))
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
		}
		b.WriteString("\nThe commands that take them:\n\n")
		for _, line := range commandsTaking(root, f.table) {
			fmt.Fprintf(&b, "- %s\n", line)
		}
	}
	return b.String()
}

// fileKeyCell is a setting's key in the config file; for pairs, the
// array of tables and its keys.
func fileKeyCell(s *settings.Setting) string {
	if s.Pairs != nil {
		cell := fmt.Sprintf("`[[%s]]` tables: `%s`, `%s`", s.FileKey(), s.Pairs[0], s.Pairs[1])
		for _, k := range s.PairOptions {
			cell += fmt.Sprintf(", `%s`", k.Name)
		}
		return cell
	}
	if s.Table != nil {
		keys := make([]string, len(s.Table))
		for i, k := range s.Table {
			keys[i] = "`" + k.Name + "`"
		}
		return fmt.Sprintf("`[[%s]]` tables: %s", s.FileKey(), strings.Join(keys, ", "))
	}
	return "`" + s.FileKey() + "`"
}

// settingType says what a setting's value is.
func settingType(s *settings.Setting) string {
	if len(s.OneOf) > 0 {
		var vals []string
		for _, v := range s.OneOf {
			if v != "" {
				vals = append(vals, "`"+v+"`")
			}
		}
		return "one of " + strings.Join(vals, ", ")
	}
	var t string
	switch s.DefaultValue().(type) {
	case string:
		t = "string"
		if s.Path {
			t = "path"
		}
	case int:
		t = "integer"
	case bool:
		t = "true or false"
	case time.Duration:
		t = "duration"
	case settings.ByteSize:
		t = "size"
	case []string:
		t = "list, comma-separated"
		if s.Repeat {
			t = "list, the flag repeated"
		}
		if s.Path {
			t = "paths, the flag repeated"
		}
		if s.Pairs != nil {
			t = fmt.Sprintf("%s=%s pairs, the flag repeated", strings.ToUpper(s.Pairs[0]), strings.ToUpper(s.Pairs[1]))
		}
	case []time.Duration:
		t = "durations, comma-separated"
	case []settings.FileTable:
		t = "tables, in the config file only"
	}
	if s.Min != nil {
		switch s.DefaultValue().(type) {
		case int:
			t += fmt.Sprintf(", at least %d", *s.Min)
		case settings.ByteSize:
			t += fmt.Sprintf(", at least %s", settings.ByteSize(*s.Min))
		case time.Duration, []time.Duration:
			if *s.Min == 1 {
				t += ", over 0s"
			} else {
				t += fmt.Sprintf(", at least %s", shortDuration(time.Duration(*s.Min)))
			}
		}
	}
	return t
}

// settingDefault writes a setting's default as the config file takes it.
func settingDefault(s *settings.Setting) string {
	switch d := s.DefaultValue().(type) {
	case string:
		if d == "" {
			return ""
		}
		if d == agentDataDirDefault() {
			return envDefaultFor(d)
		}
		return "`" + d + "`"
	case bool:
		return fmt.Sprintf("`%t`", d)
	case time.Duration:
		return "`" + shortDuration(d) + "`"
	case []time.Duration:
		var ds []string
		for _, x := range d {
			ds = append(ds, shortDuration(x))
		}
		return "`" + strings.Join(ds, ",") + "`"
	case []string:
		if len(d) == 0 {
			return ""
		}
		return "`" + strings.Join(d, ",") + "`"
	case []settings.FileTable:
		return ""
	}
	return fmt.Sprintf("`%v`", s.DefaultValue())
}

// envDefaultFor is how the reference writes a default the code works out
// from the environment. (flagDefault does the same for one worked out from
// the operating system.)
func envDefaultFor(v string) string {
	switch v {
	case agentDataDirDefault():
		return "`~/.local/state/agent` (`$XDG_STATE_HOME/agent` when that is set)"
	case agentSettings.DefaultFile():
		return "`~/.config/agent/agent.toml` (`$XDG_CONFIG_HOME/agent/agent.toml` when that is set; `/etc/agent/agent.toml` for root)"
	}
	return "`" + v + "`"
}

// shortDuration writes 30m rather than 30m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// commandsTaking lists the commands that take settings of t, and which.
func commandsTaking(root *cobra.Command, t *settingsTable) []string {
	var out []string
	walkCommands(root, func(c *cobra.Command) {
		if tableFor(c) != t {
			return
		}
		var names []string
		for _, s := range t.List {
			if c.Flags().Lookup(s.Name) != nil {
				names = append(names, "`--"+s.Name+"`")
			}
		}
		what := "all of them"
		if len(names) < flagSettings(t) {
			what = strings.Join(names, ", ")
		}
		out = append(out, fmt.Sprintf("[`%s`](commands.md#%s): %s", c.CommandPath(), commandAnchor(c), what))
	})
	return out
}

// flagSettings counts t's settings that are flags: all but the config
// file's own tables ([[notify]]).
func flagSettings(t *settingsTable) int {
	n := 0
	for _, s := range t.List {
		if s.Table == nil {
			n++
		}
	}
	return n
}

// walkCommands calls f with cmd and every command below it, in the order
// of agent --help.
func walkCommands(cmd *cobra.Command, f func(*cobra.Command)) {
	f(cmd)
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			walkCommands(c, f)
		}
	}
}

func commandAnchor(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "-")
}

// renderCommandsReference writes docs/reference/commands.md: every
// command's use line, what it does in one line, its subcommands and its
// flags. The flags that are settings are named and linked to their row in
// the settings reference rather than described again.
func renderCommandsReference() string {
	var b bytes.Buffer
	b.WriteString(generatedNote)
	b.WriteString(`# Commands

Every command: its use line, what it does, and its flags as ` + "`--help`" + ` shows
them (` + "`agent COMMAND --help`" + ` says more, with examples). A flag that is a
setting, also an environment variable and a config file key, is named here
and described in [Settings](settings.md). Errors are one line on stderr with
exit code 1; usage errors exit 2. What each command does in more words, its
exit codes and its JSON output: [Commands](../commands.md).
`)
	walkCommands(newRootCmd(), func(c *cobra.Command) {
		use := c.UseLine()
		var subs []string
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				subs = append(subs, fmt.Sprintf("[`%s`](#%s)", s.Name(), commandAnchor(s)))
			}
		}
		if len(subs) > 0 {
			use = c.CommandPath() + " COMMAND"
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n```\n%s\n```\n", c.CommandPath(), mdCell(c.Short), use)
		if len(subs) > 0 {
			fmt.Fprintf(&b, "\nCommands: %s.\n", strings.Join(subs, ", "))
		}
		t := tableFor(c)
		var settingFlags, rows []string
		c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			if fl.Hidden || fl.Name == "help" {
				return
			}
			if t != nil {
				if s := t.Lookup(fl.Name); s != nil && fl.Usage == s.Help+" (env "+s.EnvName(t.EnvPrefix)+")" {
					settingFlags = append(settingFlags, "`--"+fl.Name+"`")
					return
				}
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s |", flagName(fl), flagDefault(fl), mdCell(flagUsage(fl))))
		})
		if len(settingFlags) > 0 {
			family := "the-agent"
			if t == controlPlaneSettings {
				family = "the-reference-control-plane"
			}
			what := strings.Join(settingFlags, ", ")
			if len(settingFlags) == flagSettings(t) {
				what = "every one"
			}
			fmt.Fprintf(&b, "\nSettings ([the table](settings.md#%s)): %s.\n", family, what)
		}
		if len(rows) > 0 {
			fmt.Fprintf(&b, "\n| flag | default | |\n|---|---|---|\n%s\n", strings.Join(rows, "\n"))
		}
	})
	return b.String()
}

// flagName writes -s, --name TYPE as --help does.
func flagName(fl *pflag.Flag) string {
	name := "--" + fl.Name
	if fl.Shorthand != "" {
		name = "-" + fl.Shorthand + ", " + name
	}
	if varname, _ := pflag.UnquoteUsage(fl); varname != "" {
		name += " " + varname
	}
	return "`" + name + "`"
}

func flagUsage(fl *pflag.Flag) string {
	_, usage := pflag.UnquoteUsage(fl)
	if fl.Name == "config" {
		if f := agentSettings.DefaultFile(); f != "" {
			usage = strings.Replace(usage, f, "~/.config/agent/agent.toml", 1)
		}
	}
	return usage
}

// flagDefault is a flag's default as --help shows it, left out when it is
// its type's zero.
func flagDefault(fl *pflag.Flag) string {
	if slices.Contains([]string{"", "false", "0", "0s", "[]"}, fl.DefValue) {
		return ""
	}
	switch {
	case fl.Name == "data-dir" && fl.DefValue == agentDataDirDefault():
		return envDefaultFor(fl.DefValue)
	case fl.Name == "manager" && fl.DefValue == string(service.HostManager()):
		return "`systemd` (`launchd` on macOS)"
	}
	return "`" + fl.DefValue + "`"
}

// mdCell escapes what markdown would read as a table's edge or as markup.
func mdCell(s string) string {
	r := strings.NewReplacer("|", `\|`, "*", `\*`, "<", `\<`, "\n", " ")
	return r.Replace(s)
}
