package agent

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/forge"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/workspace"
)

// What a [[repo]] table's options may be: a remote's name, a variable's
// name, a project's path on a forge.
var (
	remotePattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$`)
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	projectPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)+$`)
)

// Deliveries reads what the config file's [[repo]] tables (from file)
// say the agent does with a completed task's branch, for the
// repositories the settings serve (repos, NAME=PATH from wherever they
// came): push = "REMOTE", and pull_request = "github" | "gitlab" with
// api_url, token_env and project. It returns repos with their push
// remotes, and the pull requests by repository. A mistake is said with
// the file's line, one line (a settings.UsageError).
func Deliveries(tables []settings.FileTable, file string, repos []workspace.Repo) ([]workspace.Repo, map[string]PullRequest, error) {
	pulls := map[string]PullRequest{}
	out := slices.Clone(repos)
	for _, tab := range tables {
		name := tab.Str("name")
		bad := func(key, format string, args ...any) error {
			return settings.FileError(file, tab.Line(key), "[[repo]] %s: %s", name, fmt.Sprintf(format, args...))
		}
		i := slices.IndexFunc(out, func(r workspace.Repo) bool { return r.Name == name })
		if i < 0 {
			continue // the command line's or the environment's repositories win
		}
		push := tab.Str("push")
		if push != "" && !remotePattern.MatchString(push) {
			return nil, nil, bad("push", "push = %q: want the name of one of the repository's remotes (git remote)", push)
		}
		out[i].Push = push
		kind := forge.Kind(tab.Str("pull_request"))
		if kind == "" {
			for _, k := range []string{"api_url", "token_env", "project"} {
				if tab.Str(k) != "" {
					return nil, nil, bad(k, "%s is for a pull request: give pull_request = \"github\" or \"gitlab\" too", k)
				}
			}
			continue
		}
		if !slices.Contains(forge.Kinds, kind) {
			return nil, nil, bad("pull_request", "pull_request = %q: want github or gitlab", kind)
		}
		if push == "" {
			return nil, nil, bad("pull_request", "pull_request needs push = \"REMOTE\": the request is for the branch pushed there")
		}
		p := PullRequest{Forge: kind, API: tab.Str("api_url"), TokenEnv: tab.Str("token_env"), Project: tab.Str("project")}
		if p.API != "" {
			if err := checkAPIURL(p.API); err != nil {
				return nil, nil, bad("api_url", "api_url = %q: %v", controlplane.RedactURL(p.API), err)
			}
		}
		if p.TokenEnv != "" && (!envNamePattern.MatchString(p.TokenEnv) || strings.HasPrefix(p.TokenEnv, "AGENT_")) {
			return nil, nil, bad("token_env", "token_env = %q: want the name of a variable of the agent's environment (not one of its own AGENT_ ones)", p.TokenEnv)
		}
		if p.Project != "" && !projectPattern.MatchString(p.Project) {
			return nil, nil, bad("project", "project = %q: want OWNER/NAME (GitLab: GROUP/…/NAME)", p.Project)
		}
		pulls[name] = p
	}
	return out, pulls, nil
}

// checkAPIURL refuses a forge's API URL that is not https, or http on
// loopback: the token goes with every request.
func checkAPIURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("want an absolute URL such as https://api.github.com")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http":
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsLoopback() || u.Hostname() == "localhost" {
			return nil
		}
		return fmt.Errorf("want https (http only on loopback): the token goes with every request")
	}
	return fmt.Errorf("want an https URL")
}

// CheckTokenEnvs refuses an executor-env entry (a name, or a prefix and
// *) that would pass a pull request's token to a task: never passed,
// whatever the config says. The error is a settings.UsageError.
func CheckTokenEnvs(envPass []string, pulls map[string]PullRequest) error {
	for _, tok := range TokenEnvs(pulls) {
		for _, pass := range envPass {
			if pass == tok || strings.HasSuffix(pass, "*") && strings.HasPrefix(tok, strings.TrimSuffix(pass, "*")) {
				return settings.UsageError{Err: fmt.Errorf("executor-env %s: %s holds a pull request's token ([[repo]] token_env), which is never passed to a task", pass, tok)}
			}
		}
	}
	return nil
}
