package console

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// The views: what a page shows of a task, an attempt, an event, an
// approval and an agent, derived here once for the pages and the live
// stream alike. The words are the terminal's (state.ProgressCard,
// state.Compact, state.ChangesLines), and so are the phase groups that
// colour a card (taskview.GroupOf).

// card is a task's live progress card.
type card struct {
	ID, Title, Phase string
	// Outcome colours the card: its phase's group (taskview.Group):
	// queued, running, waiting, parked, completed, failed or cancelled.
	Outcome string
	Attempt string // "attempt 1 of 3"
	// Countdown is the retry's wait while it backs off, NotBefore its end
	// (RFC 3339) for the script's countdown.
	Countdown, NotBefore string
	// Elapsed is the time since the task was submitted, to its end; while
	// it runs, Started (RFC 3339) lets the script advance it.
	Elapsed, Started string
	Progress         string
	Percent          int
	// Result, for a task that ended, is what it came to (its summary,
	// or why it ended: state.ResultLine), shown where a running task
	// shows its progress.
	Result      string
	Steps       []state.Step
	Repo, Agent string
	Cancelling  bool
	// Unroutable says why no online agent can take the queued task
	// (routing by capability).
	Unroutable string
}

// outcome is the colour of a task's card: its phase's group, as the
// terminal colours it too (taskview.GroupOf).
func outcome(p state.Phase) string { return string(taskview.GroupOf(p)) }

const rfc3339 = time.RFC3339Nano

func cardOf(v *api.TaskView, now time.Time) card {
	t := v.Task()
	c := card{ID: t.ID, Title: t.Title, Phase: string(t.Phase), Outcome: outcome(t.Phase), Steps: v.ProgressCard,
		Repo: t.Repo, Cancelling: t.CancelRequested && !t.Phase.Terminal()}
	if t.Lease != nil {
		c.Agent = t.Lease.AgentID
	}
	if t.Phase == state.PhaseQueued {
		c.Unroutable = t.Unroutable
	}
	if t.Phase.Terminal() {
		c.Result = state.ResultLine(t)
	}
	if a := t.Current(); a != nil {
		c.Attempt = "attempt " + a.NumberText()
		if a.MaxAttempts == 0 && t.MaxAttempts > 0 {
			// An agent from before attempts kept their limit: the task's.
			c.Attempt += fmt.Sprintf("/%d", t.MaxAttempts)
		}
		if a.Status == state.AttemptPending && !t.Phase.Terminal() && a.NotBefore.After(now) {
			c.Countdown = "retry in " + state.Compact(a.NotBefore.Sub(now).Round(time.Second))
			if t.Phase == state.PhaseParked {
				c.Countdown = "resumes in " + state.Compact(a.NotBefore.Sub(now).Round(time.Second))
			}
			c.NotBefore = a.NotBefore.Format(rfc3339)
		}
	} else {
		c.Attempt = "no attempt yet"
	}
	end := now
	if t.Phase.Terminal() {
		end = state.EndedAt(t)
	} else {
		c.Started = t.CreatedAt.Format(rfc3339)
	}
	c.Elapsed = state.Compact(end.Sub(t.CreatedAt).Truncate(time.Second))
	switch p := t.Progress; {
	case c.Result != "":
		// An ended task says what it came to; its last progress is stale.
	case t.AwaitingReply != nil:
		c.Progress = "waiting for a person: " + approvalWhat(t.AwaitingReply)
	case t.Phase == state.PhaseParked:
		c.Progress = state.ParkedText(t)
	case t.Liveness != "" && t.Phase.Running():
		c.Progress = t.Liveness + ": its processes use CPU or I/O, no event since " + t.LastProgressAt.UTC().Format(time.RFC3339)
	case p.Message != "" || p.Percent > 0:
		c.Progress, c.Percent = p.Message, p.Percent
		if p.Percent > 0 {
			c.Progress = fmt.Sprintf("%d%% %s", p.Percent, p.Message)
		}
	}
	return c
}

// approvalWhat is what a request asks, in a line.
func approvalWhat(r *state.ApprovalRequest) string { return r.What() }

// attemptRow is one attempt in the timeline.
type attemptRow struct {
	Number int
	// Of is the number against the attempt's limit: "2/3".
	Of                    string
	Status                string
	Outcome               string
	ErrorClass            string
	Gate                  string
	Model                 string
	Duration, Session     string
	Note                  string
	RetriedByPerson       bool
	Continued             bool
	StartedAt, EndedAt    string
	NotBefore, TimeoutHit string
	// Tokens is what the attempt used, when its CLI reported it (budgets).
	Tokens string
	// Denied are the tool calls the attempt was refused, a line each, and
	// how many it was refused in all.
	Denied     []string
	DeniedText string
}

func timelineOf(t *state.Task, now time.Time) []attemptRow {
	rows := make([]attemptRow, len(t.Attempts))
	for i, a := range t.Attempts {
		r := attemptRow{Number: a.Number, Of: a.NumberText(), Status: string(a.Status), Model: a.Model, Session: a.SessionID, RetriedByPerson: a.RetriedByPerson}
		r.Outcome = string(a.Status)
		if a.Error != nil {
			r.Outcome += ": " + a.Error.Error()
			r.ErrorClass = string(a.Error.Code)
		}
		if !a.StartedAt.IsZero() {
			end := a.CompletedAt
			if end.IsZero() {
				end = now
			}
			r.Duration = state.Compact(end.Sub(a.StartedAt))
		}
		if d := a.Retry; d != nil {
			r.Gate = string(d.Decision)
			if d.Decision.Next() && d.Delay.D() > 0 {
				r.Gate += " in " + state.Compact(d.Delay.D())
			}
			if d.Gate != "" {
				r.Gate += " · gate " + string(d.Gate)
			}
			if !d.TechnicallyRetryable {
				r.Gate += " · not retryable"
			}
		}
		if i+1 < len(t.Attempts) && t.Attempts[i+1].RetriedByPerson {
			if r.Gate != "" {
				r.Gate += " · "
			}
			if t.Attempts[i+1].Continues > 0 {
				r.Gate += "continued by a person"
			} else {
				r.Gate += "retried by a person"
			}
		}
		if a.Continues > 0 {
			r.Note = fmt.Sprintf("continued attempt %d's session", a.Continues)
			if i > 0 && t.Attempts[i-1].Error != nil && t.Attempts[i-1].Error.Code != "" {
				r.Note += " after " + string(t.Attempts[i-1].Error.Code)
			}
		}
		if k := state.KeptText(a); k != "" {
			r.Note = strings.TrimPrefix(r.Note+"; "+k, "; ")
		}
		if c := state.CancelNote(t); c != "" && i == len(t.Attempts)-1 {
			r.Note = strings.TrimPrefix(r.Note+"; "+c, "; ")
		}
		if a.Status == state.AttemptPending && !a.NotBefore.IsZero() {
			r.NotBefore = a.NotBefore.Format(rfc3339)
		}
		if a.Usage.TotalTokens > 0 {
			r.Tokens = state.Tokens(a.Usage.TotalTokens) + " tokens"
		}
		r.DeniedText = state.DeniedText(a.Denied.Count)
		for _, d := range a.Denied.Calls {
			l := strings.TrimSpace(d.Tool + " " + state.Ellipsize(d.Input, 160))
			if d.Why != "" {
				l += " (" + d.Why + ")"
			}
			r.Denied = append(r.Denied, l)
		}
		if more := a.Denied.Count - len(a.Denied.Calls); more > 0 {
			r.Denied = append(r.Denied, fmt.Sprintf("and %d more", more))
		}
		rows[i] = r
	}
	return rows
}

// eventRow is one of a task's events, in a line.
type eventRow struct {
	Seq     int
	Kind    string
	At      string
	Attempt int
	Text    string
}

// eventOf renders e in a line; a log event's lines come apart (logLines).
func eventOf(e api.StoredEvent) eventRow {
	r := eventRow{Seq: e.Seq, Kind: string(e.Kind), At: e.CreatedAt.UTC().Format("15:04:05"), Attempt: e.Attempt}
	switch e.Kind {
	case state.EventPhase:
		var p state.PhaseEvent
		json.Unmarshal(e.Payload, &p)
		r.Text = string(p.Phase)
		if p.Reason != "" {
			r.Text += ": " + p.Reason
		}
		if p.Request != nil {
			r.Text += " — asks: " + approvalWhat(p.Request)
		}
	case state.EventProgress:
		var p state.Progress
		json.Unmarshal(e.Payload, &p)
		r.Text = p.Message
		if p.Percent > 0 {
			r.Text = fmt.Sprintf("%d%% %s", p.Percent, p.Message)
		}
	case state.EventLog:
		var p api.LogPayload
		json.Unmarshal(e.Payload, &p)
		r.Text = fmt.Sprintf("%s: %d lines", p.Stream, len(p.Lines))
		if len(p.Lines) == 1 {
			r.Text = fmt.Sprintf("%s: 1 line", p.Stream)
		}
		if p.Cut != nil {
			r.Text += fmt.Sprintf(" (output cut at %d bytes)", p.Cut.CapBytes)
		}
	case state.EventAttempt:
		var a state.Attempt
		json.Unmarshal(e.Payload, &a)
		r.Text = fmt.Sprintf("attempt %s %s", a.NumberText(), a.Status)
		if a.Model != "" {
			r.Text += " with " + a.Model
		}
		if a.Error != nil {
			r.Text += ": " + a.Error.Error()
		}
	case state.EventDiff:
		var d state.DiffEvent
		json.Unmarshal(e.Payload, &d)
		r.Text = "diff of " + d.Branch + ": " + diffText(d.Files, d.Insertions, d.Deletions)
	case state.EventComplete:
		var c state.CompleteEvent
		json.Unmarshal(e.Payload, &c)
		r.Text = string(c.Status)
		if c.Summary != "" {
			r.Text += ": " + c.Summary
		}
		if c.Error != nil {
			r.Text += ": " + c.Error.Error()
		}
	}
	r.Text = state.Ellipsize(state.PlainText(r.Text), 300)
	return r
}

// logLines are a log event's lines as the log tail shows them.
func logLines(e api.StoredEvent) []string {
	if e.Kind != state.EventLog {
		return nil
	}
	var p api.LogPayload
	if json.Unmarshal(e.Payload, &p) != nil {
		return nil
	}
	lines := make([]string, 0, len(p.Lines))
	for _, l := range p.Lines {
		l = state.PlainText(l) // a CLI's colours, for a terminal
		if p.Stream == state.LogStderr {
			l = "stderr: " + l
		}
		lines = append(lines, l)
	}
	return lines
}

// approval is a task awaiting a person's answer, as the inbox shows it:
// what it would do (a command and its directory; files and their diff; a
// tool and its input), who asks, and when it is declined if nobody
// answers.
type approval struct {
	TaskID, Title string
	RequestID     string
	Kind          string
	Tool          string
	Command       string
	Paths         []string
	PathsMore     int
	Cwd, Reason   string
	Input         string
	// Diff is a file change's diff, file by file (DiffStat says it in
	// words; DiffCut that the agent cut it).
	Diff     []diffFile
	DiffStat string
	DiffCut  bool
	// Deadline says when the agent declines it if nobody answers, "" when
	// it waits for ever.
	Deadline string
	Parent   string // the task that submitted this one, for a subtask
	Agent    string
	Since    string // RFC 3339: when it was asked
	Attempt  string
	Grade    string // the agent's health grade, when known
	CSRF     string
	Back     string
	// Link and LinkDecision, on an approval link's page: the one answer
	// the link gives, posted to the link itself (no session, no CSRF
	// token: the link is the credential).
	Link, LinkDecision string
}

func approvalOf(v *api.TaskView, csrf, back string, now time.Time) (approval, bool) {
	t := v.Task()
	if t.Phase != state.PhaseAwaitingReply || t.AwaitingReply == nil || t.Reply != nil {
		return approval{}, false
	}
	q := t.AwaitingReply
	since := q.Asked
	if since.IsZero() {
		since = t.UpdatedAt
	}
	a := approval{TaskID: t.ID, Title: t.Title, RequestID: q.ID, Kind: string(q.Kind), Tool: q.Tool, Command: q.Command, Paths: q.Paths,
		PathsMore: q.PathsMore, Cwd: q.Cwd, Reason: q.Reason, Input: q.Input, DiffCut: q.DiffCut, Parent: t.Parent,
		Since: since.Format(rfc3339), CSRF: csrf, Back: back}
	if a.Kind == "" {
		a.Kind = string(state.ApprovalCommand)
	}
	if q.Diff != "" {
		a.Diff = parseQuestionDiff(q.Diff)
		added, deleted := 0, 0
		for _, f := range a.Diff {
			added, deleted = added+f.Added, deleted+f.Deleted
		}
		a.DiffStat = diffText(len(a.Diff), added, deleted)
	}
	if !q.Deadline.IsZero() {
		a.Deadline = "in " + state.Compact(q.Deadline.Sub(now).Truncate(time.Minute)) + " if nobody answers"
		if q.Deadline.Sub(now) < time.Minute {
			a.Deadline = "within a minute if nobody answers"
		}
	} else if !q.Asked.IsZero() {
		a.Deadline = "never: the agent waits for an answer"
	}
	if t.Lease != nil {
		a.Agent = t.Lease.AgentID
	}
	if c := t.Current(); c != nil {
		a.Attempt = "attempt " + c.NumberText()
	}
	return a, true
}

// parseQuestionDiff splits a question's unified diff into files: each
// begins with its "--- " and "+++ " lines (a question's diff is made by
// the agent, not git).
func parseQuestionDiff(patch string) []diffFile {
	lines := strings.Split(strings.TrimSuffix(patch, "\n"), "\n")
	var files []diffFile
	var f *diffFile
	for i, line := range lines {
		if strings.HasPrefix(line, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ ") {
			files = append(files, diffFile{Path: strings.TrimPrefix(lines[i+1], "+++ ")})
			f = &files[len(files)-1]
			if f.Path == "/dev/null" {
				f.Path = strings.TrimPrefix(line, "--- ")
			}
			f.Lines = append(f.Lines, diffLine{Class: "meta", Text: line})
			continue
		}
		if f == nil {
			files = append(files, diffFile{Path: "(no file named)"})
			f = &files[len(files)-1]
		}
		class := ""
		switch {
		case strings.HasPrefix(line, "+++ ") && len(f.Lines) == 1:
			class = "meta"
		case strings.HasPrefix(line, "@@"):
			class = "hunk"
		case strings.HasPrefix(line, "+"):
			class = "add"
			f.Added++
		case strings.HasPrefix(line, "-"):
			class = "del"
			f.Deleted++
		}
		f.Lines = append(f.Lines, diffLine{Class: class, Text: line})
	}
	return files
}

// agentCard is an agent as the agents page shows it.
type agentCard struct {
	ID, Hostname  string
	Online        bool
	State         string
	Grade, Reason string
	Capacity      string
	Running       []api.RunningTask
	// Labels are those a person granted the agent, which route; and
	// SelfDescribed those it says of itself, which route nothing.
	Labels        []string
	SelfDescribed []string
	Heartbeat     string // RFC 3339
	Ago           string
	Version       string
	Isolation     string
	Repos         []string
	Outbox        string
	// Executor says what the agent runs its tasks through ("Codex
	// (codex)"), Models the models it may run (none: the executor's
	// choice), Platform its OS and arch.
	Executor string
	Models   []string
	Platform string
}

func agentOf(a api.AgentView, now time.Time) agentCard {
	c := agentCard{ID: a.AgentID, Hostname: a.Hostname, Online: a.Online, State: string(a.State), Grade: string(a.Health.Grade),
		Reason: a.Health.Reason, Capacity: fmt.Sprintf("%d of %d", a.Capacity.Running, a.Capacity.Max), Running: a.Running,
		Version: a.Version, Isolation: a.Health.Isolation, Repos: a.Repos}
	if c.State == "" {
		c.State = string(api.AgentRunning)
	}
	if !a.Online {
		c.State = string(api.AgentOffline)
	}
	if c.Isolation == "" {
		c.Isolation = "not reported"
	}
	for _, k := range slices.Sorted(maps.Keys(a.GrantedLabels)) {
		c.Labels = append(c.Labels, k+"="+a.GrantedLabels[k])
	}
	for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
		c.SelfDescribed = append(c.SelfDescribed, k+"="+a.Labels[k])
	}
	if !a.LastHeartbeat.IsZero() {
		c.Heartbeat = a.LastHeartbeat.Format(rfc3339)
		c.Ago = state.Compact(now.Sub(a.LastHeartbeat).Truncate(time.Second)) + " ago"
	}
	if a.Outbox.Pending > 0 || a.Outbox.Dead > 0 {
		c.Outbox = fmt.Sprintf("outbox: %d pending, %d dead", a.Outbox.Pending, a.Outbox.Dead)
	}
	c.Executor, c.Models = a.Executor, a.Models
	if cli := api.ExecutorCLI(a.Executor); cli != "" {
		c.Executor = cli + " (" + a.Executor + ")"
	}
	if a.OS != "" || a.Arch != "" {
		c.Platform = a.OS + "/" + a.Arch
	}
	return c
}
