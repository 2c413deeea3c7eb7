package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/agent"
	"github.com/edgeagent/agent/state"
)

// stepMarks are the progress card's marks.
var stepMarks = map[state.StepStatus]string{state.StepDone: "[x]", state.StepActive: "[>]", state.StepPending: "[ ]", state.StepFailed: "[!]"}

func newTasksShowCmd() *cobra.Command {
	var (
		dataDir string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a task: phase, progress card and attempt timeline",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("tasks show takes one task id")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := agent.LoadTask(dataDir, args[0])
			if err != nil {
				return err
			}
			now := time.Now()
			card, timeline := state.ProgressCard(t), state.Timeline(t, now)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					Task         *state.Task  `json:"task"`
					ProgressCard []state.Step `json:"progress_card"`
					Timeline     []string     `json:"timeline"`
				}{t, card, timeline})
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s  %s\n", visible(t.ID), visible(t.Title))
			phase := string(t.Phase)
			if t.PhaseReason != "" {
				phase += " (" + t.PhaseReason + ")"
			}
			fmt.Fprintf(w, "phase:    %s\n", visible(phase))
			fmt.Fprintf(w, "created:  %s (%s)\n", t.CreatedAt.Local().Format(time.DateTime), ago(now, t.CreatedAt))
			if t.Progress.Message != "" {
				fmt.Fprintf(w, "progress: %d%% %s\n", t.Progress.Percent, visible(t.Progress.Message))
			}
			if !t.NextRetryAt.IsZero() {
				fmt.Fprintf(w, "retry:    at %s\n", t.NextRetryAt.Local().Format(time.TimeOnly))
			}
			if r := t.AwaitingReply; r != nil {
				fmt.Fprintf(w, "awaiting: a reply to request %s (%s)\n", visible(r.ID), r.Kind)
				if r.Command != "" {
					fmt.Fprintf(w, "  command: %s\n", visible(r.Command))
				}
				for _, p := range r.Paths {
					fmt.Fprintf(w, "  change:  %s\n", visible(p))
				}
				if r.Reason != "" {
					fmt.Fprintf(w, "  reason:  %s\n", visible(r.Reason))
				}
				if r.Cwd != "" {
					fmt.Fprintf(w, "  in:      %s\n", visible(r.Cwd))
				}
				fmt.Fprintf(w, "  answer with: agent tasks reply %s --accept|--decline --control-plane URL\n", visible(t.ID))
			}
			if t.Result != nil && t.Result.Summary != "" {
				fmt.Fprintf(w, "result:   %s\n", visible(t.Result.Summary))
			}
			fmt.Fprintln(w)
			for _, s := range card {
				fmt.Fprintf(w, "  %s %s\n", stepMarks[s.Status], s.Name)
			}
			if len(timeline) > 0 {
				fmt.Fprintln(w)
				for _, l := range timeline {
					fmt.Fprintln(w, "  "+visible(l))
				}
			}
			return nil
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"task", "progress_card", "timeline"} as JSON`)
	return cmd
}
