package taskview

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/state"
)

// InboxDiffLines bounds the diff lines the inbox shows of each question;
// tasks show prints the whole (bounded) diff.
const InboxDiffLines = 20

// InboxEntry is one question waiting for a person, as tasks inbox --json
// prints it.
type InboxEntry struct {
	TaskID string `json:"task_id"`
	Title  string `json:"title,omitempty"`
	// Parent is the task that submitted this one, for a subtask.
	Parent  string                `json:"parent,omitempty"`
	Agent   string                `json:"agent,omitempty"`
	Attempt int                   `json:"attempt,omitempty"`
	Request state.ApprovalRequest `json:"request"`
}

// InboxOf is the questions the tasks wait on and nobody answered yet,
// oldest first.
func InboxOf(tasks []*state.Task) []InboxEntry {
	entries := []InboxEntry{}
	for _, t := range tasks {
		if t.Phase != state.PhaseAwaitingReply || t.AwaitingReply == nil || t.Reply != nil {
			continue
		}
		e := InboxEntry{TaskID: t.ID, Title: t.Title, Parent: t.Parent, Request: *t.AwaitingReply}
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
	slices.SortStableFunc(entries, func(a, b InboxEntry) int {
		return cmp.Or(a.Request.Asked.Compare(b.Request.Asked), strings.Compare(a.TaskID, b.TaskID))
	})
	return entries
}

// Inbox writes the questions for a person (tasks inbox).
func Inbox(w io.Writer, h Hint, entries []InboxEntry, now time.Time) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "no approval waits for a person")
		return
	}
	for i, e := range entries {
		if i > 0 {
			fmt.Fprintln(w)
		}
		who := Visible(e.TaskID)
		if e.Title != "" {
			who += "  " + Visible(e.Title)
		}
		fmt.Fprintln(w, who)
		var by []string
		if e.Parent != "" {
			by = append(by, "subtask of "+Visible(e.Parent))
		}
		if e.Agent != "" {
			by = append(by, "agent "+Visible(e.Agent))
		}
		if e.Attempt > 0 {
			by = append(by, fmt.Sprintf("attempt %d", e.Attempt))
		}
		by = append(by, "asked "+Ago(now, e.Request.Asked))
		fmt.Fprintf(w, "  %s\n", strings.Join(by, ", "))
		for _, l := range ApprovalLines(&e.Request, now, InboxDiffLines) {
			fmt.Fprintf(w, "  %s\n", l)
		}
		fmt.Fprintf(w, "  answer:   %s\n", h.Tasks("reply", e.TaskID, "--accept|--decline"))
	}
	if s := h.Placeholders(); s != "" {
		fmt.Fprintf(w, "\n%s\n", s)
	}
}

// ApprovalLines say what a question asks, for a terminal: what it would
// do, where, why, the diff (its first maxDiff lines; 0 for all of it)
// and when it is declined if nobody answers. Every line is made safe to
// print (Visible).
func ApprovalLines(r *state.ApprovalRequest, now time.Time, maxDiff int) []string {
	var lines []string
	add := func(label, v string) {
		if v != "" {
			lines = append(lines, fmt.Sprintf("%-9s %s", label+":", Visible(v)))
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
			lines = append(lines, "  "+Visible(l))
		}
		if len(shown) < len(diff) {
			lines = append(lines, fmt.Sprintf("  … %d more lines (agent tasks show ID)", len(diff)-len(shown)))
		}
	}
	switch {
	case !r.Deadline.IsZero() && r.Deadline.After(now):
		add("declined", "in "+Age(r.Deadline.Sub(now))+" if nobody answers ("+r.Deadline.Local().Format(time.DateTime)+")")
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
