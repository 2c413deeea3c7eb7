package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/submission"
	"github.com/edgeagent/agent/internal/taskfollow"
	"github.com/edgeagent/agent/internal/tasksource"
	"github.com/edgeagent/agent/internal/taskview"
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
			req, err := submission.Form{Title: title, Prompt: prompt, Prefer: prefer, MaxAttempts: maxAttempts, Repo: repo, Base: base, NoCommit: noCommit,
				Requires: requires, Labels: labels, MaxTokens: maxTokens, MaxTime: maxTime, EgressAllow: egressAllow, OnSideEffect: onSideEffect,
				Wait: wait, Timeout: timeout, Changed: cmd.Flags().Changed}.Request()
			if err != nil {
				return usageError{err}
			}
			c, err := cp.client()
			if err != nil {
				return err
			}
			v, err := c.CreateTask(cmd.Context(), req)
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
			final, code, err := taskfollow.Submitted(cmd.Context(), tasksource.Remote{Client: c}, v.ID, cmd.OutOrStdout(), cmd.ErrOrStderr(),
				taskfollow.WaitOptions{Timeout: timeout, Queued: waitQueued, Quiet: asJSON, Palette: taskview.PaletteFor(cmd.OutOrStdout())})
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), final); err != nil {
					return err
				}
			}
			return exitOr(exitCode(code))
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
