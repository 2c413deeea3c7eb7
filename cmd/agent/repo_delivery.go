package main

import (
	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/workspace"
)

// repoDeliveries reads what the config file's [[repo]] tables say the
// agent does with a completed task's branch (agent.Deliveries).
func repoDeliveries(r *settings.Resolved, repos []workspace.Repo) ([]workspace.Repo, map[string]agent.PullRequest, error) {
	tables, file := r.Tables("repo")
	return agent.Deliveries(tables, file, repos)
}

// checkTokenEnvs refuses an executor-env entry that would pass a pull
// request's token to a task.
func checkTokenEnvs(envPass []string, pulls map[string]agent.PullRequest) error {
	return agent.CheckTokenEnvs(envPass, pulls)
}

// commitAuthor reads commit-author, "NAME <EMAIL>"; empty is the
// default.
func commitAuthor(s string) (workspace.Author, error) {
	a, err := workspace.ParseAuthor(s)
	if err != nil {
		return a, usagef("commit-author %v", err)
	}
	return a, nil
}
