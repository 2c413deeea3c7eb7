package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane"
)

func newSubmitCmd() *cobra.Command {
	var (
		url, tokenFile, prompt, title, prefer string
		maxAttempts                           int
		insecure, asJSON, wait                bool
	)
	cmd := &cobra.Command{
		Use:   "submit",
		Short: "Enqueue a task on a control plane and print its id",
		Example: `  agent submit --control-plane http://127.0.0.1:8080 --token-file token --prompt "Fix the flaky login test"
  agent submit --control-plane http://127.0.0.1:8080 --token-file token --prompt @prompt.md --prefer gui`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			if url == "" {
				return usagef("--control-plane is required")
			}
			if file, ok := strings.CutPrefix(prompt, "@"); ok && !strings.Contains(file, "\n") && file != "" {
				if b, err := os.ReadFile(file); err == nil {
					prompt = string(b)
				}
			}
			if strings.TrimSpace(prompt) == "" {
				return usagef("--prompt is required")
			}
			token, err := readToken(tokenFile)
			if err != nil {
				return err
			}
			c, err := controlplane.NewClient(url, token, controlplane.ClientOptions{Insecure: insecure})
			if err != nil {
				return err
			}
			v, err := c.CreateTask(cmd.Context(), controlplane.CreateTaskRequest{Title: title, Prompt: prompt, Prefer: prefer, MaxAttempts: maxAttempts})
			if err != nil {
				return err
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
			final, err := waitTask(cmd.Context(), c, v.ID, cmd.OutOrStdout(), asJSON)
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
	fl.StringVar(&url, "control-plane", "", "the control plane's URL")
	fl.StringVar(&tokenFile, "token-file", "", "file holding the bearer token (else AGENT_TOKEN)")
	fl.StringVar(&prompt, "prompt", "", "what to do; @FILE reads it from a file")
	fl.StringVar(&title, "title", "", "a short title (default: the prompt's first line)")
	fl.StringVar(&prefer, "prefer", "any", "gui (needs the executor's app server) or any")
	fl.IntVar(&maxAttempts, "max-attempts", 0, "attempts this task may take (0: the agent's setting)")
	fl.BoolVar(&insecure, "insecure", false, "allow http:// to a control plane that is not on loopback")
	fl.BoolVar(&asJSON, "json", false, "print the whole task as JSON (with --wait: the final task)")
	fl.BoolVar(&wait, "wait", false, "follow the task to its end; exit 0 completed, 1 failed, 3 recoverable_failed (a person decides), 4 timed out or expired, 5 cancelled")
	return cmd
}
