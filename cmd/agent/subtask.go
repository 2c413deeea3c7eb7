package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/internal/submission"
	"github.com/edgeagent/agent/internal/subtask"
	"github.com/edgeagent/agent/internal/taskfollow"
	"github.com/edgeagent/agent/internal/taskview"
)

// Subtasks: `agent subtask` is what a running task's executor uses to
// submit, wait for, list and cancel subtasks of its own task, with the
// task token the agent gave it (docs/subtasks.md).

func newSubtaskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "subtask",
		Short: "Submit, wait for, list and cancel subtasks of the task this runs in (inside a task only)",
		Long: `subtask works inside a task the agent runs: its executor's environment holds
the task's own credential (AGENT_TASK_TOKEN), the control plane's address
(AGENT_CONTROL_PLANE) and the task's id (AGENT_TASK_ID). With them it
submits subtasks of that task, waits for them, lists and cancels them, and
nothing else; the control plane's delegation rules ([[delegate]]) say how
deep subtasks nest and how many one task may submit.`,
		Example: `  id=$(agent subtask submit --title "Count the files" "Count the Go files under cmd/")
  agent subtask wait "$id"
  agent subtask ls
  agent subtask cancel "$id"`,
		Args: noArgs,
	}
	cmd.AddCommand(newSubtaskSubmitCmd(), newSubtaskWaitCmd(), newSubtaskLsCmd(), newSubtaskCancelCmd(), newSubtaskAllowedCmd())
	return cmd
}

// taskClient reads the task's credential from the environment.
func taskClient() (subtask.InTask, error) {
	return subtask.FromEnv(os.Getenv, "agent/"+agentVersion())
}

func newSubtaskSubmitCmd() *cobra.Command {
	var (
		title    string
		labels   []string
		requires []string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "submit [--title T] [--label KEY=VALUE]... [--require KEY=VALUE]... PROMPT",
		Short: "Submit a subtask of this task and print its id",
		Example: `  agent subtask submit "Summarize the open issues"
  agent subtask submit --title "Tests" --label kind=coder "Fix the failing test in ./state"
  agent subtask submit --require executor=claude "Review the patch"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := submission.Subtask(title, args, labels, requires)
			if err != nil {
				return usageError{err}
			}
			in, err := taskClient()
			if err != nil {
				return fmt.Errorf("subtask submit: %w", err)
			}
			v, err := in.Client.CreateSubtask(cmd.Context(), in.TaskID, req)
			if err != nil {
				return fmt.Errorf("subtask submit: %w", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			fmt.Fprintln(cmd.OutOrStdout(), v.ID)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&title, "title", "", "a short title (default: the prompt's first line)")
	fl.StringArrayVar(&labels, "label", nil, "a label KEY=VALUE the delegation rules match on, repeatable")
	fl.StringArrayVar(&requires, "require", nil, "KEY=VALUE the agent that runs the subtask must advertise, repeatable (as agent submit --require)")
	fl.BoolVar(&asJSON, "json", false, "print the subtask as JSON")
	return cmd
}

func newSubtaskWaitCmd() *cobra.Command {
	var (
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wait [ID]...",
		Short: "Wait for subtasks to end (default: every one of this task's), and print each one's result and attempt timeline",
		Long: `wait blocks until each subtask named (every subtask of this task when none
is) has ended, then prints, for each, its phase, its result and its
compact attempt timeline. It exits 0 when every one completed, else 1;
with --timeout, 7 when the time passed first (the subtasks go on).

While it waits, each retry a subtask's agent schedules (an attempt failed,
and the next replays or continues it after a backoff) is said on stderr as
it is seen, once an attempt: "subtask t-… retrying: attempt 2/3 with gpt-5
in 4s, after rate_limit: 429 Too Many Requests".`,
		Example: `  agent subtask wait t-1a2b3c4d5e t-6f7a8b9c0d
  agent subtask wait --timeout 20m`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return usagef("--timeout %s: want 0 (no bound) or more", timeout)
			}
			in, err := taskClient()
			if err != nil {
				return fmt.Errorf("subtask wait: %w", err)
			}
			ids, done, err := in.Wait(cmd.Context(), args, timeout, cmd.ErrOrStderr())
			if taskfollow.ErrCode(err) != 0 {
				cmd.PrintErrf("agent: subtask wait: --timeout %s passed; %d of %d subtasks had not ended (they go on)\n", timeout, len(ids)-taskfollow.EndedOf(ids, done), len(ids))
				return exitCode(taskfollow.ExitWaitTimeout)
			}
			if err != nil {
				return fmt.Errorf("subtask wait: %w", err)
			}
			return subtask.Report(cmd.OutOrStdout(), ids, done, asJSON, time.Now())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the ended subtasks as a JSON array")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "stop waiting after this long, e.g. 20m, and exit 7; the subtasks go on (0: wait until they end)")
	return cmd
}

func newSubtaskLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List this task's subtasks, in the order it submitted them",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := taskClient()
			if err != nil {
				return fmt.Errorf("subtask ls: %w", err)
			}
			kids, tasks, err := in.Subtasks(cmd.Context())
			if err != nil {
				return fmt.Errorf("subtask ls: %w", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), kids)
			}
			out := cmd.OutOrStdout()
			taskview.Subtasks(out, taskview.PaletteFor(out), tasks)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the subtasks as a JSON array")
	return cmd
}

func newSubtaskCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID...",
		Short: "Cancel subtasks of this task, and every subtask under them",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := taskClient()
			if err != nil {
				return fmt.Errorf("subtask cancel: %w", err)
			}
			for _, id := range args {
				what, err := in.Cancel(cmd.Context(), id)
				if err != nil {
					return fmt.Errorf("subtask cancel %s: %w", taskview.Visible(id), err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", taskview.Visible(id), what)
			}
			return nil
		},
	}
}

func newSubtaskAllowedCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "allowed",
		Short: "List what this task may delegate to: the subtasks the control plane's delegation rules let it submit, with their bounds",
		Long: `allowed lists, as the control plane's delegation rules say, the subtasks this
task may submit: the labels each kind must carry (any task, or
type=explorer, ...), how deep they may nest and how many, and how much of
that this task has used. A task that may delegate to nothing (a leaf, such
as an explorer under the default rules) is offered no subtask command at
all: its executor gets no task token.`,
		Example: `  agent subtask allowed
  agent subtask allowed --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := taskClient()
			if err != nil {
				return fmt.Errorf("subtask allowed: %w", err)
			}
			a, err := in.Allowed(cmd.Context())
			if err != nil {
				return fmt.Errorf("subtask allowed: %w", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), a)
			}
			a.Print(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print it as JSON")
	return cmd
}
