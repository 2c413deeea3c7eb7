package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/gittest"
)

// A [[repo]] table's push and pull request keys are checked as agent run
// starts, each mistake one line naming the file's line (exit 2); config
// print writes them back; a pull request's token cannot be passed to a
// task; a push remote the repository lacks is refused.
func TestConfigRepoPushAndPullRequest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	repo := gittest.NewRepo(t)
	gittest.Git(t, repo, "remote", "add", "origin", "git@github.com:octo/app.git")
	table := "[[repo]]\nname = \"app\"\npath = " + tomlString(repo) + "\n"
	for _, tc := range []struct {
		name, text, want string
		args             []string
	}{
		{"unknown forge", table + "push = \"origin\"\npull_request = \"bitbucket\"\n", `:5: [[repo]] app: pull_request = "bitbucket": want github or gitlab`, nil},
		{"pull request without push", table + "pull_request = \"github\"\n", `:4: [[repo]] app: pull_request needs push = "REMOTE"`, nil},
		{"api_url alone", table + "push = \"origin\"\napi_url = \"https://ghe.example.com/api/v3\"\n", `:5: [[repo]] app: api_url is for a pull request`, nil},
		{"api_url over http", table + "push = \"origin\"\npull_request = \"gitlab\"\napi_url = \"http://gitlab.example.com/api/v4\"\n",
			`:6: [[repo]] app: api_url = "http://gitlab.example.com/api/v4": want https (http only on loopback)`, nil},
		{"bad token_env", table + "push = \"origin\"\npull_request = \"github\"\ntoken_env = \"MY TOKEN\"\n", `:6: [[repo]] app: token_env = "MY TOKEN": want the name of a variable`, nil},
		{"bad project", table + "push = \"origin\"\npull_request = \"github\"\nproject = \"app\"\n", `:6: [[repo]] app: project = "app": want OWNER/NAME`, nil},
		{"bad remote", table + "push = \"--upload-pack=x\"\n", `:4: [[repo]] app: push = "--upload-pack=x": want the name of one of the repository's remotes`, nil},
		{"remote not there", table + "push = \"upstream\"\n", `repository "app": push = "upstream": repository "app" has no remote "upstream"`, nil},
		{"token passed to tasks", table + "push = \"origin\"\npull_request = \"github\"\n",
			`executor-env GITHUB_*: GITHUB_TOKEN holds a pull request's token ([[repo]] token_env), which is never passed to a task`, []string{"--executor-env", "GITHUB_*"}},
		{"bad commit author", table, `commit-author "agent": want NAME <EMAIL>`, []string{"--commit-author", "agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			writeFile(t, file, tc.text)
			args := append([]string{"run", "--config", file, "--control-plane", "http://127.0.0.1:1", "--data-dir", filepath.Join(dir, "data"), "--executor", "sample"}, tc.args...)
			r := runAgentEnv(t, []string{"AGENT_TOKEN=" + strings.Repeat("t", 40)}, args...)
			want := tc.want
			if strings.HasPrefix(want, ":") {
				want = "config " + file + want
			}
			wantOneLineError(t, r, 2, want)
		})
	}
	file := filepath.Join(dir, "good.toml")
	writeFile(t, file, table+"push = \"origin\"\npull_request = \"github\"\napi_url = \"https://ghe.example.com/api/v3\"\ntoken_env = \"GHE_TOKEN\"\nproject = \"octo/app\"\n")
	r := runAgentEnv(t, []string{"AGENT_CONFIG=" + file}, "config", "print")
	if want := "name = \"app\"\npath = " + tomlString(repo) + "\npush = \"origin\"\npull_request = \"github\"\napi_url = \"https://ghe.example.com/api/v3\"\ntoken_env = \"GHE_TOKEN\"\nproject = \"octo/app\"\n"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("config print: %+v\nwant:\n%s", r, want)
	}
}
