package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

func newSubmitCmd() *cobra.Command {
	var (
		cp                    cpFlags
		prompt, title, prefer string
		repo, base            string
		maxAttempts           int
		asJSON, wait          bool
		waitQueued, noCommit  bool
		timeout               time.Duration
		requires              []string // routing by capability
		// Subtasks: labels the delegation rules match on.
		labels []string
		// budgets
		maxTokens int64
		maxTime   time.Duration
		// egress: narrows the agent's allow list
		egressAllow  []string
		onSideEffect string
	)
	cmd := &cobra.Command{
		Use:   "submit",
		Short: "Enqueue a task on a control plane and print its id",
		Example: `  agent submit --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token --prompt "Fix the flaky login test"
  agent submit --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token --prompt @prompt.md --prefer gui
  agent submit --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token --prompt "Fix the footer" --repo site --base release/2.1
  agent submit --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token --prompt "Train it" --require executor=codex --require label=gpu
  agent submit --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token --prompt "Tidy the docs" --max-tokens 200000 --max-time 20m
  agent submit --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token --prompt "Bump the deps" --egress-allow pypi.org --egress-allow files.pythonhosted.org`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cp.url == "" {
				return usagef("--control-plane is required")
			}
			var err error
			if prompt, err = promptArg(prompt); err != nil {
				return err
			}
			if strings.TrimSpace(prompt) == "" {
				return usagef("--prompt is required")
			}
			if err := checkRepoFlags(repo, base); err != nil {
				return err
			}
			if noCommit && repo == "" {
				return usagef("--no-commit needs --repo: only a task on a repository has commits to leave out")
			}
			reqs, err := requireFlags(requires)
			if err != nil {
				return err
			}
			if err := checkBudgetFlags(maxTokens, maxTime); err != nil {
				return err
			}
			if err := checkWaitFlags(cmd, wait, timeout); err != nil {
				return err
			}
			taskLabels, err := labelMap(labels)
			if err != nil {
				return err
			}
			if err := api.CheckEgressAllow(egressAllow); err != nil {
				return usagef("--egress-allow: %v", err)
			}
			if err := state.OnSideEffect(onSideEffect).Check(); err != nil {
				return usagef("--on-side-effect %q: want continue or ask", onSideEffect)
			}
			c, err := cp.client()
			if err != nil {
				return err
			}
			v, err := c.CreateTask(cmd.Context(), api.CreateTaskRequest{Title: title, Prompt: prompt, Prefer: api.Prefer(prefer), MaxAttempts: maxAttempts,
				Repo: repo, Base: base, NoCommit: noCommit, Requires: reqs, Labels: taskLabels, MaxTokens: maxTokens, MaxTime: state.Duration(maxTime),
				EgressAllow: egressAllow, OnSideEffect: state.OnSideEffect(onSideEffect)})
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			if !wait {
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), v)
				}
				fmt.Fprintln(cmd.OutOrStdout(), v.ID)
				return nil
			}
			if !asJSON {
				fmt.Fprintf(cmd.OutOrStdout(), "%s submitted; waiting for it to end\n", v.ID)
			}
			final, err := waitTask(cmd.Context(), c, v.ID, cmd.OutOrStdout(), waitOptions{Timeout: timeout, Queued: waitQueued, Quiet: asJSON})
			if code := waitErrCode(err); code != 0 {
				// The task goes on: say why the wait ended, and give what was seen.
				cmd.PrintErrln("agent: " + err.Error())
				if asJSON {
					if err := writeJSON(cmd.OutOrStdout(), final); err != nil {
						return err
					}
				}
				return exitCode(code)
			}
			if err != nil {
				return fmt.Errorf("waiting for %s: %w", v.ID, err)
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), final); err != nil {
					return err
				}
			}
			if code := waitExitCode(final.Phase); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	cp.add(cmd)
	fl.StringVar(&prompt, "prompt", "", "what to do; @FILE reads it from a file (@@WORD sends the word @WORD)")
	fl.StringVar(&title, "title", "", "a short title (default: the prompt's first line)")
	fl.StringVar(&prefer, "prefer", "any", "gui (needs the executor's app server) or any")
	fl.IntVar(&maxAttempts, "max-attempts", 0, "attempts this task may take (0: the agent's setting)")
	fl.StringVar(&onSideEffect, "on-side-effect", "", "after a transient failure (or the agent's stop) of an attempt that had output, a tool call or a side effect: continue its session on its own, or ask: stop there for a person, who continues or retries (default: the agent's --on-side-effect)")
	fl.StringVar(&repo, "repo", "", "the repository the task works on, by the name agents serve it under ([[repo]] of their config); only an agent that serves it runs the task, in a clone of its own")
	fl.StringVar(&base, "base", "", "with --repo: the ref the task's branch is made from (default: the repository's HEAD)")
	fl.BoolVar(&noCommit, "no-commit", false, "with --repo: leave what each attempt changes uncommitted in the task's clone (default: the agent commits it on the task's branch when the attempt ends)")
	// Routing by capability.
	fl.StringArrayVar(&requires, "require", nil, "KEY=VALUE the agent that runs the task must have, repeatable: executor=codex, model=M, repo=R, os=linux, arch=arm64 (what it advertises), label=NAME or label=NAME=VALUE (granted by an operator: agents label)")
	// budgets
	fl.Int64Var(&maxTokens, "max-tokens", 0, "the tokens all the task's attempts may use together; past it the attempt is stopped and the task ends budget_exceeded (0: the agent's default-max-tokens)")
	fl.DurationVar(&maxTime, "max-time", 0, "the wall time all the task's attempts may run together, e.g. 30m; past it the attempt is stopped and the task ends budget_exceeded (0: the agent's default-max-time)")
	fl.BoolVar(&asJSON, "json", false, "print the whole task as JSON (with --wait: the final task)")
	fl.BoolVar(&wait, "wait", false, "follow the task to its end; exit 0 completed, 1 failed, 3 recoverable_failed (a person decides), 4 timed out or expired, 5 cancelled, 6 no online agent can take it (unroutable: it stays queued), 7 --timeout passed (it goes on)")
	fl.BoolVar(&waitQueued, "wait-queued", false, "with --wait: keep waiting while no online agent can take the task, rather than exit 6 at once")
	fl.DurationVar(&timeout, "timeout", 0, "with --wait: stop waiting after this long, e.g. 30m, and exit 7; the task goes on (0: wait until it ends)")
	// Subtasks.
	fl.StringArrayVar(&labels, "label", nil, "a label KEY=VALUE the control plane's delegation rules ([[delegate]]) match on, repeatable; type=NAME is the task's agent type the default rules go by (general, explorer, …)")
	fl.StringArrayVar(&egressAllow, "egress-allow", nil, "narrow where the task's attempts may connect to this of its agent's allowed hosts (agent run --egress-allow), HOST, HOST:PORT or *.DOMAIN, repeatable; its executor's model API stays reachable")
	return cmd
}

// checkRepoFlags refuses, as a usage error, a --repo or --base the control
// plane would refuse: a malformed name or ref, or a base without a
// repository.
func checkRepoFlags(repo, base string) error {
	switch {
	case repo == "" && base != "":
		return usagef("--base needs --repo: a base is a ref of the task's repository")
	case repo == "":
		return nil
	}
	if err := api.CheckRepoName(repo); err != nil {
		return usagef("--repo: %s", taskview.Visible(err.Error()))
	}
	if err := api.CheckBase(base); err != nil {
		return usagef("--base: %s", taskview.Visible(err.Error()))
	}
	return nil
}

// checkWaitFlags refuses, as a usage error, a wait flag without --wait and
// a timeout below zero.
func checkWaitFlags(cmd *cobra.Command, wait bool, timeout time.Duration) error {
	for _, name := range []string{"wait-queued", "timeout"} {
		if cmd.Flags().Changed(name) && !wait {
			return usagef("--%s needs --wait", name)
		}
	}
	if timeout < 0 {
		return usagef("--timeout %s: want 0 (no bound) or more", timeout)
	}
	return nil
}

// checkBudgetFlags refuses, as a usage error, a budget below zero.
func checkBudgetFlags(maxTokens int64, maxTime time.Duration) error {
	switch {
	case maxTokens < 0:
		return usagef("--max-tokens %d: want 0 (the agent's default) or more", maxTokens)
	case maxTime < 0:
		return usagef("--max-time %s: want 0 (the agent's default) or more", maxTime)
	}
	return nil
}

// promptArg reads --prompt @FILE from the file; a missing file is an
// error, not a prompt. A prompt of one word starting with @ is a file name
// (@@WORD is the word @WORD itself); a prompt with spaces or lines is text,
// so the sample executor's directives ("@fail rate_limit") pass as they are.
func promptArg(p string) (string, error) {
	if literal, ok := strings.CutPrefix(p, "@@"); ok {
		return "@" + literal, nil
	}
	file, ok := strings.CutPrefix(p, "@")
	if !ok || file == "" || strings.ContainsAny(file, " \t\r\n") {
		return p, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usagef("--prompt @%s: %v (to send a prompt that is one word starting with @, write @@)", file, errors.Unwrap(err))
	}
	return string(b), nil
}

// requireFlags are the --require flags as requirements, refused as a usage
// error when one is malformed or its key unknown.
func requireFlags(flags []string) ([]state.Requirement, error) {
	reqs := make([]state.Requirement, len(flags))
	for i, f := range flags {
		reqs[i] = state.Requirement(f)
	}
	if err := state.CheckRequirements(reqs); err != nil {
		return nil, usagef("--require: %s", taskview.Visible(err.Error()))
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	return reqs, nil
}
