package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// inboxDiffLines bounds the diff lines the inbox shows of each question;
// tasks show prints the whole (bounded) diff.
const inboxDiffLines = 20

// inboxEntry is one question waiting for a person, as tasks inbox --json
// prints it.
type inboxEntry struct {
	TaskID string `json:"task_id"`
	Title  string `json:"title,omitempty"`
	// Parent is the task that submitted this one, for a subtask.
	Parent  string                `json:"parent,omitempty"`
	Agent   string                `json:"agent,omitempty"`
	Attempt int                   `json:"attempt,omitempty"`
	Request state.ApprovalRequest `json:"request"`
}

func newTasksInboxCmd() *cobra.Command {
	var (
		cp     cpFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "List the approvals waiting for a person across the fleet, oldest first (the console's inbox)",
		Long: `inbox lists every task of the control plane that waits for a person's answer
(phase awaiting_reply): Codex and Claude Code asking before a command or a
file change, an exec task's approval line, a subtask's as its own, oldest
question first. Each says what it would do (the command and its directory;
the files and their diff, the first lines of it; a tool and its input), who
asks (the task, its agent, the parent task of a subtask), how long it has
waited and when it is declined if nobody answers. Answer with agent tasks
reply ID --accept|--decline, or in the console's inbox.`,
		Example: `  agent tasks inbox --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token
  agent tasks inbox --json --control-plane http://127.0.0.1:8080 --token-file ./cp/operator-token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cp.client()
			if err != nil {
				return err
			}
			tasks, err := remoteSource{c}.Tasks(cmd.Context(), api.TaskFilter{Phase: state.PhaseAwaitingReply}, 0)
			if err != nil {
				return fmt.Errorf("tasks inbox: %w", err)
			}
			entries := inboxOf(tasks)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), entries)
			}
			printInbox(cmd.OutOrStdout(), newHint(&cp), entries, time.Now())
			return nil
		},
	}
	cp.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the questions as a JSON array of {"task_id", "title", "parent", "agent", "attempt", "request"}, oldest first`)
	return cmd
}

// inboxOf is the questions the tasks wait on and nobody answered yet,
// oldest first.
func inboxOf(tasks []*state.Task) []inboxEntry {
	entries := []inboxEntry{}
	for _, t := range tasks {
		if t.Phase != state.PhaseAwaitingReply || t.AwaitingReply == nil || t.Reply != nil {
			continue
		}
		e := inboxEntry{TaskID: t.ID, Title: t.Title, Parent: t.Parent, Request: *t.AwaitingReply}
		if t.Lease != nil {
			e.Agent = t.Lease.AgentID
		}
		if c := t.Current(); c != nil {
			e.Attempt = c.Number
		}
		if e.Request.Asked.IsZero() {
			e.Request.Asked = t.UpdatedAt // an agent from before questions said when
		}
		entries = append(entries, e)
	}
	slices.SortStableFunc(entries, func(a, b inboxEntry) int {
		return cmp.Or(a.Request.Asked.Compare(b.Request.Asked), strings.Compare(a.TaskID, b.TaskID))
	})
	return entries
}

// printInbox writes the questions for a person.
func printInbox(w io.Writer, h hint, entries []inboxEntry, now time.Time) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no approval waits for a person")
		return
	}
	for i, e := range entries {
		if i > 0 {
			fmt.Fprintln(w)
		}
		who := visible(e.TaskID)
		if e.Title != "" {
			who += "  " + visible(e.Title)
		}
		fmt.Fprintln(w, who)
		var by []string
		if e.Parent != "" {
			by = append(by, "subtask of "+visible(e.Parent))
		}
		if e.Agent != "" {
			by = append(by, "agent "+visible(e.Agent))
		}
		if e.Attempt > 0 {
			by = append(by, fmt.Sprintf("attempt %d", e.Attempt))
		}
		by = append(by, "asked "+ago(now, e.Request.Asked))
		fmt.Fprintf(w, "  %s\n", strings.Join(by, ", "))
		for _, l := range approvalLines(&e.Request, now, inboxDiffLines) {
			fmt.Fprintf(w, "  %s\n", l)
		}
		fmt.Fprintf(w, "  answer:   %s\n", h.tasks("reply", e.TaskID, "--accept|--decline"))
	}
	if s := h.placeholders(); s != "" {
		fmt.Fprintf(w, "\n%s\n", s)
	}
}

// approvalLines say what a question asks, for a terminal: what it would
// do, where, why, the diff (its first maxDiff lines; 0 for all of it)
// and when it is declined if nobody answers. Every line is made safe to
// print (visible).
func approvalLines(r *state.ApprovalRequest, now time.Time, maxDiff int) []string {
	var lines []string
	add := func(label, v string) {
		if v != "" {
			lines = append(lines, fmt.Sprintf("%-9s %s", label+":", visible(v)))
		}
	}
	add("request", r.ID+" ("+string(r.Kind)+strings.TrimSuffix(", "+r.Tool, ", ")+")")
	add("command", r.Command)
	add("in", r.Cwd)
	for _, p := range r.Paths {
		add("change", p)
	}
	if r.PathsMore > 0 {
		add("change", fmt.Sprintf("and %d more files", r.PathsMore))
	}
	if r.Kind == state.ApprovalTool || r.Command == "" && len(r.Paths) == 0 {
		add("input", r.Input)
	}
	add("reason", r.Reason)
	if r.Diff != "" {
		diff := strings.Split(strings.TrimSuffix(r.Diff, "\n"), "\n")
		plus, minus := diffStat(diff)
		head := fmt.Sprintf("+%d -%d", plus, minus)
		if r.DiffCut {
			head += " (cut: the change is larger)"
		}
		add("diff", head)
		shown := diff
		if maxDiff > 0 && len(diff) > maxDiff {
			shown = diff[:maxDiff]
		}
		for _, l := range shown {
			lines = append(lines, "  "+visible(l))
		}
		if len(shown) < len(diff) {
			lines = append(lines, fmt.Sprintf("  … %d more lines (agent tasks show ID)", len(diff)-len(shown)))
		}
	}
	switch {
	case !r.Deadline.IsZero() && r.Deadline.After(now):
		add("declined", "in "+age(r.Deadline.Sub(now))+" if nobody answers ("+r.Deadline.Local().Format(time.DateTime)+")")
	case r.Deadline.IsZero() && !r.Asked.IsZero():
		add("declined", "never on its own: the agent waits for an answer (--approval-timeout 0)")
	}
	return lines
}

// diffStat counts a unified diff's added and removed lines.
func diffStat(lines []string) (plus, minus int) {
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "+"):
			plus++
		case strings.HasPrefix(l, "-"):
			minus++
		}
	}
	return plus, minus
}
