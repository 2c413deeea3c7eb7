package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/internal/taskview"
)

func newHealthCmd() *cobra.Command {
	var (
		dataDir string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Show the executor's health grade and recent errors, as of the agent's last heartbeat (exit 1 when unavailable)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := datadir.ReadHealth(dataDir)
			if err != nil {
				return err
			}
			// A script can ask: exit 1 when the executor is unavailable.
			unavailable := exitCode(0)
			if h.Grade == health.Unavailable {
				unavailable = 1
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), h); err != nil {
					return err
				}
				return exitOr(unavailable)
			}
			now := time.Now()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "executor:       %s\n", h.Executor)
			fmt.Fprintf(w, "grade:          %s (since %s)\n", h.Grade, taskview.Ago(now, h.Since))
			if h.Reason != "" {
				fmt.Fprintf(w, "reason:         %s\n", taskview.Visible(h.Reason))
			}
			if h.Isolation != "" {
				fmt.Fprintf(w, "isolation:      %s\n", taskview.Visible(h.Isolation))
			}
			fmt.Fprintf(w, "control plane:  %s\n", taskview.Visible(h.ControlPlane))
			if st := h.Storage; st.Failing != "" {
				fmt.Fprintf(w, "storage:        %s (since %s; %d reports and %d task states held in memory)\n",
					taskview.Visible(st.Failing), taskview.Ago(now, st.Since), st.HeldReports, st.HeldTasks)
			} else {
				fmt.Fprintf(w, "storage:        writes work\n")
			}
			if free := durable.FreeBytes(dataDir); free >= 0 {
				fmt.Fprintf(w, "disk free:      %s\n", bytesHuman(free))
			}
			if s := h.Starts; s.Max > 0 {
				fmt.Fprintf(w, "starts:         %d starting, %d queued (--max-starts %d)\n", s.Starting, s.Queued, s.Max)
			}
			if ws := h.Workspaces; ws != nil {
				fmt.Fprintf(w, "workspaces:     %d taking %s; %d kept, holding work (agent workspaces ls); measured %s\n",
					ws.Count, bytesHuman(ws.Bytes), ws.Kept, taskview.Ago(now, ws.At))
			}
			fmt.Fprintf(w, "recorded:       %s by agent %s\n", taskview.Ago(now, h.UpdatedAt), taskview.Visible(h.AgentID))
			if len(h.RecentErrors) > 0 {
				fmt.Fprintln(w, "recent errors:")
				for _, p := range h.RecentErrors {
					fmt.Fprintf(w, "  %-8s %-20s %s\n", taskview.Ago(now, p.At), p.Signal, taskview.Visible(p.Detail))
				}
			}
			return exitOr(unavailable)
		},
	}
	dataDirFlag(cmd, &dataDir)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the health record as JSON")
	return cmd
}
