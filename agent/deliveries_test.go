package agent

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/workspace"
)

// repoTables are the [[repo]] tables of a config file's text.
func repoTables(t *testing.T, text string) ([]settings.FileTable, string) {
	t.Helper()
	var keys []settings.TableKey
	for _, k := range []string{"name", "path", "push", "pull_request", "api_url", "token_env", "project"} {
		keys = append(keys, settings.TableKey{Name: k, Default: ""})
	}
	table := &settings.Table{List: []*settings.Setting{{Name: "repo", Default: []settings.FileTable(nil), Table: keys}}}
	file := filepath.Join(t.TempDir(), "agent.toml")
	f, err := settings.Parse(file, []byte(text), table)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := f.Lookup("repo")
	tables, _ := v.V.([]settings.FileTable)
	return tables, file
}

func TestDeliveries(t *testing.T) {
	tables, file := repoTables(t, `
[[repo]]
name = "app"
path = "/src/app"
push = "origin"
pull_request = "gitlab"
api_url = "http://127.0.0.1:8929/api/v4"
token_env = "GITLAB_TOKEN"
project = "group/sub/app"

[[repo]]
name = "docs"
path = "/src/docs"
push = "upstream"

[[repo]]
name = "gone"
path = "/src/gone"
push = "origin"
`)
	repos := []workspace.Repo{{Name: "app", Path: "/src/app"}, {Name: "docs", Path: "/src/docs"}, {Name: "cli", Path: "/src/cli"}}
	got, pulls, err := Deliveries(tables, file, repos)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Push != "origin" || got[1].Push != "upstream" || got[2].Push != "" || len(got) != 3 || repos[0].Push != "" {
		t.Fatalf("repos %+v (given %+v)", got, repos)
	}
	want := PullRequest{Forge: "gitlab", API: "http://127.0.0.1:8929/api/v4", TokenEnv: "GITLAB_TOKEN", Project: "group/sub/app"}
	if len(pulls) != 1 || pulls["app"] != want {
		t.Fatalf("pulls %+v", pulls)
	}
}

// Each mistake is one line on the file's line, and a password in an
// api_url is not shown.
func TestDeliveriesMistakes(t *testing.T) {
	table := "[[repo]]\nname = \"app\"\npath = \"/src/app\"\n"
	for _, c := range []struct{ text, want string }{
		{table + "push = \"--upload-pack=x\"\n", `:4: [[repo]] app: push = "--upload-pack=x": want the name of one of the repository's remotes`},
		{table + "push = \"origin\"\npull_request = \"bitbucket\"\n", `:5: [[repo]] app: pull_request = "bitbucket": want github or gitlab`},
		{table + "pull_request = \"github\"\n", `:4: [[repo]] app: pull_request needs push = "REMOTE"`},
		{table + "project = \"a/b\"\n", `:4: [[repo]] app: project is for a pull request`},
		{table + "push = \"origin\"\npull_request = \"gitlab\"\napi_url = \"http://me:hunter2@gitlab.example.com/api/v4\"\n", `:6: [[repo]] app: api_url = "http://me:REDACTED@gitlab.example.com/api/v4": want an absolute URL`},
		{table + "push = \"origin\"\npull_request = \"gitlab\"\napi_url = \"http://gitlab.example.com/api/v4\"\n", `want https (http only on loopback)`},
		{table + "push = \"origin\"\npull_request = \"gitlab\"\napi_url = \"ftp://gitlab.example.com/api/v4\"\n", `want an https URL`},
		{table + "push = \"origin\"\npull_request = \"github\"\ntoken_env = \"AGENT_TOKEN\"\n", `:6: [[repo]] app: token_env = "AGENT_TOKEN": want the name of a variable of the agent's environment`},
		{table + "push = \"origin\"\npull_request = \"github\"\nproject = \"app\"\n", `:6: [[repo]] app: project = "app": want OWNER/NAME`},
	} {
		tables, file := repoTables(t, c.text)
		_, _, err := Deliveries(tables, file, []workspace.Repo{{Name: "app", Path: "/src/app"}})
		var ue settings.UsageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: error %v; want a UsageError holding %q", c.text, err, c.want)
		}
	}
}

// A pull request's token is never passed to a task: an executor-env
// entry that names it, or a prefix of it, is refused.
func TestCheckTokenEnvs(t *testing.T) {
	pulls := map[string]PullRequest{"app": {Forge: "github"}, "lab": {Forge: "gitlab", TokenEnv: "LAB_API_TOKEN"}}
	for pass, want := range map[string]string{
		"GITHUB_TOKEN":  "executor-env GITHUB_TOKEN: GITHUB_TOKEN holds a pull request's token",
		"LAB_*":         "executor-env LAB_*: LAB_API_TOKEN holds",
		"*":             "executor-env *: ",
		"GITLAB_TOKEN":  "",
		"GITHUB_TOKENS": "",
		"PATH":          "",
	} {
		err := CheckTokenEnvs([]string{"HOME", pass}, pulls)
		if want == "" && err != nil || want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("executor-env %s: %v; want %q", pass, err, want)
		}
	}
}
