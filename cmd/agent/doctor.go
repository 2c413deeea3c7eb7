package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/doctor"
	"github.com/edgeagent/agent/internal/agentsettings"
	"github.com/edgeagent/agent/internal/taskview"
)

func newDoctorCmd() *cobra.Command {
	var (
		f       runFlags
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what agent run would use: config, token, data directory, executor and its login, workspaces, control plane (exit 1 on a failure)",
		Long: `doctor takes agent run's settings (the same flags, environment and config
file) and checks, without running the agent or changing anything:

  config         the config file read, every key known, every value valid
  token          given (token-file or AGENT_TOKEN; never shown), its file 0600
  data-dir       exists or can be made, yours, mode 0700
  lock           free, or held by the running agent (its pid)
  outbox         no corrupt lines, torn tail, dead or long-pending records
  disk           free space on the data directory's file system
  executor       the binary found and executable; a CLI's version against
                 the one the agent is tested with
  login          the executor's CLI has a credential, in the environment
                 an attempt's CLI gets: codex logged in (codex login
                 status) or its provider's env_key set; claude's
                 ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN set, or logged
                 in (claude auth status). No request is made, no key shown
  models         with --models and codex's openai provider: each model in
                 codex's bundled catalog (absent when it cannot be told)
  isolation      attempts confined with Landlock, or why not
  egress         attempts' network confined to their model API and
                 --egress-allow (a network namespace each), or why not
  task-user      who attempts run as: this user; for a root agent, its
                 --task-user, or root without capabilities
  denied         what tasks cannot read: the agent's files, a control plane's
                 state directory beside its token file, the credentials of
                 the default deny list that exist (the others are counted:
                 denied all the same once made)
  workspaces     every [[repo]] a git repository the agent can serve, its
                 git directory and the work directory writable by this
                 user; how many task worktrees there are, their size, and
                 how many are kept because removing them would lose work
  control-plane  the URL valid, GET /healthz answers
  auth           the control plane accepts the token (GET /v1/whoami):
                 refused (401), forbidden (403), or not the registration
                 secret, each with the file it came from
  clock          this clock against the Date of the control plane's answer

Each check passes, warns or fails, with a fix under the table for each
warning and failure. A bad config file is a failed check, and the other
checks go on with the flags, the environment and the defaults. doctor exits
1 if any check failed, 0 otherwise (warnings too).`,
		Example: `  agent doctor
  agent doctor --config /etc/agent/agent.toml
  agent doctor --json | jq '.[] | select(.result == "fail")'`,
		Args: noArgs,
		// A bad config file is one of the checks, not a reason not to run.
		Annotations: map[string]string{resolvesOwnSettings: "doctor"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := doctorOptions(cmd, &f)
			opts.Timeout = timeout
			checks := doctor.Run(cmd.Context(), opts)
			out := cmd.OutOrStdout()
			var err error
			if asJSON {
				err = writeJSON(out, checks)
			} else {
				err = doctor.WriteTable(out, checks, taskview.PaletteFor(out).On)
			}
			if err != nil {
				return err
			}
			if doctor.Failed(checks) {
				return exitCode(1)
			}
			return nil
		},
	}
	f.bind(useSettings(cmd, agentSettings))
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the checks as a JSON array of {"check", "result", "detail", "fix"}`)
	cmd.Flags().DurationVar(&timeout, "timeout", doctor.DefaultTimeout, "bound on each request to the control plane and on each command of the executor's CLI (--version, its login status)")
	return cmd
}

// doctorOptions is what doctor checks: agent run's settings, resolved
// leniently (a bad config file is one of the checks).
func doctorOptions(cmd *cobra.Command, f *runFlags) doctor.Options {
	path, err := agentsettings.ResolveLeniently(cmd.Flags())
	o := doctor.Options{ConfigFile: path, ConfigErr: err, TokenFile: f.tokenFile, DataDir: f.dataDir, ControlPlane: f.controlPlane,
		Insecure: f.insecure, Version: agentVersion(), Repos: f.repoList(), WorkDir: f.workDir}
	o.Token, o.TokenErr = readTokenForDoctor(f.tokenFile) // doctor checks the file's mode itself
	return f.Doctor(o, f.isolationOf(path), f.dataDir, f.workDir)
}
