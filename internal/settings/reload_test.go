package settings

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// A reload applies the live settings that changed and keeps them in
// force; a change to another setting is said to need a restart and is not
// applied; a file that does not check, or live settings the program
// refuses, keep the running configuration.
func TestReloader(t *testing.T) {
	tbl := &Table{EnvPrefix: "TEST_", List: []*Setting{
		{Name: "workers", Default: 1, Live: true, Min: AtLeast(1), Help: "workers"},
		{Name: "mode", Default: "a", OneOf: []string{"a", "b"}, Help: "mode"},
	}}
	file := filepath.Join(t.TempDir(), "config.toml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("workers = 2\n")
	var workers int
	var mode string
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	tbl.Bind(fs, "workers", &workers)
	tbl.Bind(fs, "mode", &mode)
	r, err := tbl.Resolve(fs, file, func(string) (string, bool) { return "", false })
	if err != nil || workers != 2 {
		t.Fatalf("resolve: %v, workers %d", err, workers)
	}
	var log bytes.Buffer
	var applied [][]string
	refuse := false
	rl := NewReloader(r, fs, slog.New(slog.NewTextHandler(&log, nil)), func(next *pflag.FlagSet) func([]string) error {
		var w int
		var m string
		tbl.Bind(next, "workers", &w)
		tbl.Bind(next, "mode", &m)
		return func(changed []string) error {
			if refuse {
				return errors.New("cannot\nnow")
			}
			applied = append(applied, changed)
			return nil
		}
	})
	step := func(text, why, wantLog string) {
		t.Helper()
		write(text)
		log.Reset()
		rl.Reload(why)
		if !strings.Contains(log.String(), wantLog) {
			t.Errorf("after %q: log\n%s\nwant %q in it", text, log.String(), wantLog)
		}
	}
	step("workers = 2\n", "SIGHUP", "config reloaded; nothing to apply")
	step("workers = 3\nmode = \"b\"\n", "SIGHUP", `msg="config changed a setting that needs a restart to apply" setting=mode`)
	if len(applied) != 1 || strings.Join(applied[0], ",") != "workers" || workers != 3 || mode != "a" {
		t.Errorf("applied %v; in force workers %d, mode %q", applied, workers, mode)
	}
	step("workers = 0\n", "the config file changed", `msg="config not reloaded; the running configuration stays"`)
	refuse = true
	step("workers = 4\n", "SIGHUP", `err="cannot now"`)
	if workers != 3 || len(applied) != 1 {
		t.Errorf("a refused reload changed the settings in force: workers %d, applied %v", workers, applied)
	}
}
