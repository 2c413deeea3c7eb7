package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/internal/settings"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
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

// inTask is what a task's executor has for subtasks: a client with its
// task token, and its task's id.
type inTask struct {
	c      *controlplane.Client
	taskID string
}

// errOutsideTask: no task token in the environment.
var errOutsideTask = errors.New("no task token here (" + api.EnvTaskToken + " is not set): agent subtask runs inside a task the agent runs, whose executor it gives the token")

// taskClient reads the task's credential from the environment.
func taskClient() (inTask, error) {
	tok, url, id := os.Getenv(api.EnvTaskToken), os.Getenv(api.EnvControlPlane), os.Getenv("AGENT_TASK_ID")
	switch {
	case strings.TrimSpace(tok) == "":
		return inTask{}, errOutsideTask
	case url == "":
		return inTask{}, fmt.Errorf("%s is not set: the agent names the control plane with the task token", api.EnvControlPlane)
	case id == "":
		return inTask{}, errors.New("AGENT_TASK_ID is not set: the agent names the task with the task token")
	}
	insecure, _ := strconv.ParseBool(os.Getenv("AGENT_INSECURE"))
	c, err := controlplane.NewClient(url, tok, controlplane.ClientOptions{Insecure: insecure, UserAgent: "agent/" + agentVersion()})
	if err != nil {
		return inTask{}, err
	}
	return inTask{c: c, taskID: id}, nil
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
			prompt := strings.Join(args, " ")
			if strings.TrimSpace(prompt) == "" {
				return usagef("the prompt is empty")
			}
			l, err := labelMap(labels)
			if err != nil {
				return err
			}
			reqs, err := requireFlags(requires)
			if err != nil {
				return err
			}
			in, err := taskClient()
			if err != nil {
				return fmt.Errorf("subtask submit: %w", err)
			}
			v, err := in.c.CreateSubtask(cmd.Context(), in.taskID, api.CreateTaskRequest{Title: title, Prompt: prompt, Labels: l, Requires: reqs})
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
			ids := args
			if len(ids) == 0 {
				kids, err := in.c.Subtasks(cmd.Context(), in.taskID)
				if err != nil {
					return fmt.Errorf("subtask wait: %w", err)
				}
				for _, k := range kids {
					ids = append(ids, k.ID)
				}
			}
			var ended []api.TaskView
			failed := 0
			ctx, cancel := waitOptions{Timeout: timeout}.bound(cmd.Context(), strings.Join(ids, ", "))
			defer cancel()
			done, err := waitSubtasks(ctx, remoteSource{in.c}, ids, cmd.ErrOrStderr())
			if err = waitEnded(ctx, err); waitErrCode(err) != 0 {
				cmd.PrintErrf("agent: subtask wait: --timeout %s passed; %d of %d subtasks had not ended (they go on)\n", timeout, len(ids)-endedOf(ids, done), len(ids))
				return exitCode(exitWaitTimeout)
			}
			if err != nil {
				return fmt.Errorf("subtask wait: %w", err)
			}
			for _, id := range ids {
				t := done[id]
				if t.Phase != state.PhaseCompleted {
					failed++
				}
				if asJSON {
					ended = append(ended, viewOf(t))
					continue
				}
				out := cmd.OutOrStdout()
				taskview.SubtaskEnd(out, newPalette(out), t, time.Now())
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), ended); err != nil {
					return err
				}
			}
			if failed > 0 {
				return fmt.Errorf("subtask wait: %d of %d subtasks did not complete", failed, len(ids))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the ended subtasks as a JSON array")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "stop waiting after this long, e.g. 20m, and exit 7; the subtasks go on (0: wait until they end)")
	return cmd
}

// waitSubtasks follows the subtasks ids until every one has ended, and
// returns them, by id (those ended so far, with ctx's error, when ctx
// ends first). Each retry a subtask schedules meanwhile is said on
// remind, once an attempt: the parent that waits hears of it as it comes.
func waitSubtasks(ctx context.Context, src taskSource, ids []string, remind io.Writer) (map[string]*state.Task, error) {
	done := map[string]*state.Task{}
	reminded := map[string]int{} // the failed attempts said, by subtask
	distinct := map[string]bool{}
	ended := map[string]*settle{}
	for _, id := range ids {
		ended[id] = &settle{}
		distinct[id] = true
	}
	err := follow(ctx, nil, func() (bool, error) {
		for _, id := range ids {
			if done[id] != nil {
				continue
			}
			t, err := src.Task(ctx, id)
			if err != nil {
				if src.Transient(err) {
					continue
				}
				return false, fmt.Errorf("%s: %w", taskview.Visible(id), err)
			}
			for n := reminded[id] + 1; n < len(t.Attempts); n++ {
				if r := state.RetryReminder(t, n); r != "" {
					fmt.Fprintf(remind, "subtask %s retrying: %s\n", taskview.Visible(id), taskview.Visible(r))
				}
				reminded[id] = n
			}
			if ended[id].done(t, time.Now()) {
				done[id] = t
			}
		}
		return len(done) == len(distinct), nil
	})
	return done, err
}

// endedOf counts the ids among done.
func endedOf(ids []string, done map[string]*state.Task) int {
	n := 0
	for _, id := range ids {
		if done[id] != nil {
			n++
		}
	}
	return n
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
			kids, err := in.c.Subtasks(cmd.Context(), in.taskID)
			if err != nil {
				return fmt.Errorf("subtask ls: %w", err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), kids)
			}
			tasks := make([]*state.Task, len(kids))
			for i := range kids {
				tasks[i] = kids[i].Task()
			}
			out := cmd.OutOrStdout()
			taskview.Subtasks(out, newPalette(out), tasks)
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
				v, err := in.c.CancelTask(cmd.Context(), id)
				if err != nil {
					return fmt.Errorf("subtask cancel %s: %w", taskview.Visible(id), err)
				}
				what := "cancel requested (its agent stops it)"
				if v.Phase == state.PhaseCancelled {
					what = "cancelled"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", taskview.Visible(id), what)
			}
			return nil
		},
	}
}

// delegateRules reads the control plane's [[delegate]] tables. Each
// mistake is one line naming the file and line.
func delegateRules(r *settings.Resolved) ([]server.DelegateRule, error) {
	tables, file := r.Tables("delegate")
	var rules []server.DelegateRule
	for _, tab := range tables {
		rule := server.DelegateRule{MaxDepth: tab.Num("max-depth"), MaxChildren: tab.Num("max-children")}
		for _, side := range []struct {
			key string
			to  *map[string]string
		}{{"parent", &rule.Parent}, {"child", &rule.Child}} {
			labels, err := api.ParseLabels(tab.List(side.key))
			if err != nil {
				return nil, settings.FileError(file, tab.Line(side.key), "[[delegate]] %s: %v", side.key, err)
			}
			*side.to = labels
		}
		rules = append(rules, rule)
	}
	return rules, nil
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
			v, err := in.c.Task(cmd.Context(), in.taskID)
			if err != nil {
				return fmt.Errorf("subtask allowed: %w", err)
			}
			if v.Delegation == nil {
				return errors.New("subtask allowed: the control plane does not say what its tasks may delegate to (one from before it listed it)")
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), allowedView{TaskID: v.ID, Type: state.TypeOf(v.Labels), Depth: v.Depth,
					Submitted: len(v.Children), Delegation: v.Delegation})
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "task %s (type %s, depth %d) may delegate to:\n", taskview.Visible(v.ID), taskview.Visible(state.TypeOf(v.Labels)), v.Depth)
			for _, l := range state.DelegationLines(v.Task()) {
				fmt.Fprintf(w, "  %s\n", taskview.Visible(l))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print it as JSON")
	return cmd
}

// allowedView is what subtask allowed --json prints.
type allowedView struct {
	TaskID     string            `json:"task_id"`
	Type       string            `json:"type"`
	Depth      int               `json:"depth"`
	Submitted  int               `json:"submitted"`
	Delegation *state.Delegation `json:"delegation"`
}
