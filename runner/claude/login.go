package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/runner/cli"
)

// keyVars are the variables Claude Code takes a key or token from; the
// executor passes ANTHROPIC_* on.
var keyVars = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"}

// CheckLogin implements cli.LoginChecker. A key in the environment
// decides without running anything; otherwise `claude auth status` says,
// as JSON, whether a login is stored (it makes no request; on a config
// directory it has never seen, it writes its first settings there, as any
// claude command does).
func (c *Claude) CheckLogin(ctx context.Context) (cli.Login, error) {
	env := c.env(runner.AttemptSpec{})
	for _, k := range keyVars {
		if cli.EnvValue(env, k) != "" {
			return cli.Login{OK: true, Detail: k + " is set (not shown)"}, nil
		}
	}
	dir := claudeConfigDir(env)
	login := "claude auth login"
	if cli.EnvValue(env, "CLAUDE_CONFIG_DIR") != "" {
		login = "CLAUDE_CONFIG_DIR=" + dir + " claude auth login"
	}
	out, err := cli.Run(ctx, c.cfg.Bin, env, 0, "auth", "status")
	if err != nil && !errors.Is(err, cli.ErrExit) {
		return cli.Login{}, err
	}
	var status struct {
		LoggedIn   bool   `json:"loggedIn"`
		AuthMethod string `json:"authMethod"`
	}
	if jerr := json.Unmarshal([]byte(out.Stdout), &status); jerr != nil {
		return cli.Login{Detail: fmt.Sprintf("claude auth status exited %d saying %q", out.ExitCode, cli.LastLine(out.Stderr+"\n"+out.Stdout)),
			Fix: "run claude auth status as the agent's user to see why, then " + login}, nil
	}
	if status.LoggedIn {
		return cli.Login{OK: true, Detail: fmt.Sprintf("logged in (claude auth status: %s)", status.AuthMethod)}, nil
	}
	return cli.Login{Detail: fmt.Sprintf("claude is not logged in (claude auth status: loggedIn false, config directory %s), and neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set", dir),
		Fix: login + ", as the user agent run runs as; or set ANTHROPIC_API_KEY in agent run's environment"}, nil
}
