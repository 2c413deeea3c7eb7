package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/doctor"
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
				err = printChecks(out, checks, colorful(out))
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

// doctorOptions resolves agent run's settings as the root command would,
// but keeps going when they are wrong: a bad config file is dropped (the
// flags and the environment still apply) and its error becomes a check.
func doctorOptions(cmd *cobra.Command, f *runFlags) doctor.Options {
	t, fs := agentSettings, cmd.Flags()
	path := t.configPath(fs)
	_, err := t.resolve(fs, path, os.LookupEnv)
	if err != nil && path != "" {
		t.resolve(fs, "", os.LookupEnv) // without the file; what still fails keeps its default
	}
	o := doctor.Options{ConfigFile: path, ConfigErr: err, TokenFile: f.tokenFile, DataDir: f.dataDir,
		ExecutorKind: f.executor.kind, ControlPlane: f.controlPlane, Insecure: f.insecure, Version: agentVersion()}
	o.Token, o.TokenErr = readTokenForDoctor(f.tokenFile) // doctor checks the file's mode itself
	o.Executor, o.ExecutorErr = f.executor.build()
	if o.ExecutorErr == nil {
		if err := f.checkAsks(path); err != nil {
			o.Executor, o.ExecutorErr = nil, err
		}
	}
	o.Models = f.models
	o.Isolation = f.isolationOf(path)
	o.Repos, o.WorkDir = f.repoList(), f.workDir
	return o
}

// colorful tells whether to color the results: on a terminal, unless
// NO_COLOR is set.
func colorful(w io.Writer) bool { return os.Getenv("NO_COLOR") == "" && taskview.IsTerminal(w) }

// resultColor is the SGR color of each result.
var resultColor = map[doctor.CheckResult]string{doctor.CheckPass: "32", doctor.CheckWarn: "33", doctor.CheckFail: "31", doctor.CheckSkip: "90"}

// printChecks writes the checks as a table, then the fixes of those that
// warned or failed, then a summary line.
func printChecks(w io.Writer, checks []doctor.Check, color bool) error {
	nameWidth := len("CHECK")
	for _, c := range checks {
		nameWidth = max(nameWidth, len(c.Name))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-6s  %s\n", nameWidth, "CHECK", "RESULT", "DETAIL")
	count := map[doctor.CheckResult]int{}
	var fixes []doctor.Check
	for _, c := range checks {
		count[c.Result]++
		result := fmt.Sprintf("%-6s", c.Result) // padded before coloring, so the columns stay aligned
		if color {
			result = "\x1b[" + resultColor[c.Result] + "m" + result + "\x1b[0m"
		}
		fmt.Fprintf(&b, "%-*s  %s  %s\n", nameWidth, c.Name, result, taskview.Visible(c.Detail))
		if c.Fix != "" {
			fixes = append(fixes, c)
		}
	}
	if len(fixes) > 0 {
		b.WriteString("\nto fix:\n")
		for _, c := range fixes {
			fmt.Fprintf(&b, "  %-*s  %s\n", nameWidth, c.Name, taskview.Visible(c.Fix))
		}
	}
	b.WriteString("\n")
	switch {
	case count[doctor.CheckFail] > 0:
		fmt.Fprintf(&b, "%d of %d checks failed, %d warned\n", count[doctor.CheckFail], len(checks), count[doctor.CheckWarn])
	case count[doctor.CheckWarn] > 0:
		fmt.Fprintf(&b, "no check failed; %d warned\n", count[doctor.CheckWarn])
	case count[doctor.CheckSkip] > 0:
		fmt.Fprintf(&b, "all %d checks passed, %d skipped\n", count[doctor.CheckPass], count[doctor.CheckSkip])
	default:
		fmt.Fprintf(&b, "all %d checks passed\n", count[doctor.CheckPass])
	}
	_, err := io.WriteString(w, b.String())
	return err
}
