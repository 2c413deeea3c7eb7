package notify

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/settings"
)

// notifyTable is the [[notify]] setting as agent controlplane serve
// declares it.
var notifyTable = &settings.Table{List: []*settings.Setting{{Name: "notify", Default: []settings.FileTable(nil), Table: TableKeys}}}

// settingsOf is s with the [[notify]] tables of the config file text.
func settingsOf(t *testing.T, dir, text string, s Settings) Settings {
	t.Helper()
	path := filepath.Join(dir, "cp.toml")
	f, err := settings.Parse(path, []byte(text), notifyTable)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := f.Lookup("notify")
	s.Tables, _ = v.V.([]settings.FileTable)
	s.File = path
	return s
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestSettingsTargets(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "hook-secret"), string(testSecret)+"\n", 0o600)
	writeFile(t, filepath.Join(dir, "slack-url"), "https://hooks.slack.com/services/SECRETPATH\n", 0o600)
	writeFile(t, filepath.Join(dir, "ntfy-token"), "tk_abc\n", 0o600)
	s := settingsOf(t, dir, `
[[notify]]
name = "hooks"
type = "webhook"
url = "https://hooks.example.com/agent"
secret-file = "hook-secret"
events = ["task.failed"]

[[notify]]
name = "ops-slack"
type = "slack"
url-file = "slack-url"

[[notify]]
name = "phone"
type = "ntfy"
url = "https://ntfy.sh/agent"
token-file = "ntfy-token"
`, Settings{Webhooks: []string{"https://a.example.com/x"}})
	ts, where, err := s.Targets(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tg := range ts {
		names = append(names, tg.Name)
	}
	if got := strings.Join(names, " "); got != "hooks ops-slack phone webhook-1" {
		t.Fatalf("targets %s", got)
	}
	if string(ts[0].Secret) != string(testSecret) || len(ts[0].Events) != 1 || ts[0].Events[0] != "task.failed" {
		t.Errorf("hooks: %+v", ts[0])
	}
	if ts[1].URL != "https://hooks.slack.com/services/SECRETPATH" || ts[2].Token != "tk_abc" {
		t.Errorf("url-file or token-file not read: %q %q", ts[1].URL, ts[2].Token)
	}
	// The --notify-webhook targets' key is made once, private, and
	// said where.
	keyFile := filepath.Join(dir, "notify-secret")
	info, err := os.Stat(keyFile)
	if err != nil || info.Mode().Perm() != 0o600 || where != "written to "+keyFile || len(ts[3].Secret) != 64 {
		t.Fatalf("the webhook key: %v %v, %q, %d", info, err, where, len(ts[3].Secret))
	}
	again, where, err := s.Targets(dir, false)
	if err != nil || where != "in "+keyFile || string(again[3].Secret) != string(ts[3].Secret) {
		t.Fatalf("the key read back: %q, %v", where, err)
	}
}

// Each mistake is a UsageError on the file's line and holds no secret.
func TestSettingsMistakes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "open-url"), "https://hooks.slack.com/services/SECRETPATH\n", 0o644)
	writeFile(t, filepath.Join(dir, "two-tokens"), "tk_a tk_b\n", 0o600)
	for _, c := range []struct{ name, file, want string }{
		{"url-file open to others", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl-file = \"open-url\"\n", `cp.toml:4: [[notify]] a: url-file`},
		{"bad url from its file", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"ftp://h/SECRETPATH\"\n", `cp.toml:4: [[notify]] a: URL ftp://h/…`},
		{"token-file on slack", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/x\"\ntoken-file = \"two-tokens\"\n", `cp.toml:5: [[notify]] a: token-file is for ntfy, not slack`},
		{"two tokens", "[[notify]]\nname = \"a\"\ntype = \"ntfy\"\nurl = \"https://h/x\"\ntoken-file = \"two-tokens\"\n", `cp.toml:5: [[notify]] a: token-file ` + filepath.Join(dir, "two-tokens") + ` does not hold one token`},
		{"two of a name", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/x\"\n[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/y\"\n", `cp.toml:6: two [[notify]] targets are named a`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := settingsOf(t, dir, c.file, Settings{}).Targets(dir, false)
			var ue settings.UsageError
			if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want a UsageError holding %q", err, c.want)
			}
			if strings.Contains(err.Error(), "SECRETPATH") || strings.Contains(err.Error(), "tk_a") {
				t.Fatalf("the error holds a secret: %v", err)
			}
		})
	}
	_, _, err := Settings{Webhooks: []string{"https://h/x"}}.Targets(dir, false)
	if err == nil || !strings.Contains(err.Error(), "notify-secret does not exist") {
		t.Fatalf("no key made yet: %v", err)
	}
	if err := (Settings{PublicURL: "cp.example.com"}).CheckPublicURL(); err == nil || !strings.HasPrefix(err.Error(), "--public-url: ") {
		t.Fatalf("a relative public URL: %v", err)
	}
}
