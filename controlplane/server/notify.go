package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/taskview"
	"github.com/edgeagent/agent/state"
)

// Notifications. Every transaction of the server goes through update or
// claimTasks: when targets are configured (Options.Notify), they watch
// each task's phase as the transaction first read it and as it saves it,
// and a task that changed phase into one a person hears of gets its
// notification written in the same transaction (Tx.Notify): stored with
// the change or not at all. A file store's recovery, which applies
// stored events again (replay), writes them too. An agent's changes
// (offline, unhealthy) hold no task: they are written alone
// (store.Notify) before the change is stored, so a crash in between
// makes the change, and its notification, again.
//
// A notification's ID comes from its cause (the task, the event, the
// attempt and the question; the agent, the event and the time that marks
// the change): a change made again after a crash writes the same ID,
// which the store keeps once per target and a receiver drops.

// update is store.Update, with the notifications of the phases fn
// changes.
func (rl *rules) update(ctx context.Context, ids []string, fn func(store.Tx) error) error {
	return rl.store.Update(ctx, ids, rl.watched(fn))
}

// watched is fn writing, with the notification targets set, the
// notifications of the phases it changes.
func (rl *rules) watched(fn func(store.Tx) error) func(store.Tx) error {
	if len(rl.opts.Notify) == 0 {
		return fn
	}
	return func(tx store.Tx) error {
		w := &watchedTx{Tx: tx, before: map[string]taskMark{}}
		if err := fn(w); err != nil {
			return err
		}
		rl.notifyPhases(w)
		return nil
	}
}

// claimTasks is store.Claim, with the notifications of the phases fn
// changes: each task's, after fn took it.
func (rl *rules) claimTasks(ctx context.Context, fn func(store.Tx, *state.Task) (bool, error)) error {
	if len(rl.opts.Notify) == 0 {
		return rl.store.Claim(ctx, fn)
	}
	return rl.store.Claim(ctx, func(tx store.Tx, t *state.Task) (bool, error) {
		before := markOf(t)
		stop, err := fn(tx, t)
		if err == nil {
			if saved := tx.Task(t.ID); saved != nil {
				tx.Notify(rl.taskNotes(before, saved)...)
			}
		}
		return stop, err
	})
}

// watchedTx is a transaction whose tasks' phases are watched: before is
// each task's phase as first read, saved the tasks saved.
type watchedTx struct {
	store.Tx
	before map[string]taskMark
	saved  []string
}

// Task is the transaction's task, its phase noted the first time.
func (w *watchedTx) Task(id string) *state.Task {
	t := w.Tx.Task(id)
	if _, ok := w.before[id]; !ok && t != nil {
		w.before[id] = markOf(t)
	}
	return t
}

func (w *watchedTx) Save(t *state.Task) {
	w.Tx.Save(t)
	if !slices.Contains(w.saved, t.ID) {
		w.saved = append(w.saved, t.ID)
	}
}

// notifyPhases writes the notifications of the tasks w saved in a phase
// other than the one it read them in.
func (rl *rules) notifyPhases(w *watchedTx) {
	for _, id := range w.saved {
		before, ok := w.before[id]
		t := w.Tx.Task(id)
		if !ok || t == nil {
			continue
		}
		w.Notify(rl.taskNotes(before, t)...)
	}
}

// taskMark is what tells a task's moves apart: its phase, the question
// it asks in awaiting_reply (a second question in one transaction is a
// move too), the last question that expired unanswered, and the attempt
// a retry scheduled waits to start (retrying.go).
type taskMark struct {
	phase    state.Phase
	question string
	expired  string
	retry    int
}

func markOf(t *state.Task) taskMark {
	m := taskMark{phase: t.Phase}
	if t.Phase == state.PhaseAwaitingReply && t.AwaitingReply != nil {
		m.question = t.AwaitingReply.ID
	}
	if t.ApprovalExpired != nil {
		m.expired = t.ApprovalExpired.ID
	}
	m.retry = scheduledRetry(t)
	return m
}

// phaseEvent is the event of a task that moved from before to where it
// is, and the attempt it is about; "" when a person hears of none.
func (rl *rules) phaseEvent(before taskMark, t *state.Task) (api.NotifyEvent, *state.Attempt) {
	if t == nil || markOf(t).phase == before.phase && markOf(t).question == before.question || t.CancelRequested && t.Phase.Terminal() {
		return "", nil // no move, or a person's cancel: they know
	}
	var last *state.Attempt
	if n := len(t.Attempts); n > 0 {
		last = &t.Attempts[n-1]
	}
	if before.phase == state.PhaseParked && t.Phase == state.PhaseExecutorStarting {
		return api.NotifyResumed, last
	}
	switch t.Phase {
	case state.PhaseParked:
		return api.NotifyParked, last
	case state.PhaseAwaitingReply:
		return api.NotifyAwaitingReply, last
	case state.PhaseCompleted:
		return api.NotifyCompleted, last
	}
	if taskview.Failure(t.Phase) {
		if last != nil && last.Retry != nil && last.Retry.Decision == state.DecisionStopped && last.Retry.Gate.Blocks() {
			return api.NotifyBlocked, last
		}
		return api.NotifyFailed, last
	}
	return "", nil
}

// taskNotes are the records of task t's move from phase before, one per
// target that wants its event; none when it is not one a person hears
// of. What the task or its agent chose to say (a question, a failure's
// reason) is quoted and said to be theirs (Said), never written as the
// control plane's own words.
func (rl *rules) taskNotes(before taskMark, t *state.Task) []store.Notification {
	notes := append(rl.expiredNotes(before, t), rl.retryingNotes(before, t)...)
	ev, last := rl.phaseEvent(before, t)
	if ev == "" || !rl.wanted(ev) {
		return notes
	}
	attempt, limit, question := 0, t.MaxAttempts, ""
	if last != nil {
		attempt, limit = last.Number, cmp.Or(last.MaxAttempts, limit) // the limit it ran under
	}
	nt := &api.NotifiedTask{ID: t.ID, Title: api.Inert(t.Title, maxTitleRunes), Phase: t.Phase, Reason: api.Inert(t.PhaseReason, api.MaxSaidRunes),
		Repo: t.Repo, Attempt: attempt, MaxAttempts: limit}
	if t.Lease != nil {
		nt.Agent = t.Lease.AgentID
	}
	if ev == api.NotifyCompleted {
		completed(t, nt)
	}
	if ev == api.NotifyAwaitingReply && t.AwaitingReply != nil {
		nt.Question, question = inertQuestion(t.AwaitingReply), t.AwaitingReply.ID
	}
	if last != nil && ev != api.NotifyAwaitingReply && ev != api.NotifyCompleted {
		if last.Error != nil {
			nt.ErrorCode = last.Error.Code
		}
		if last.Retry != nil {
			nt.Gate = last.Retry.Gate
		}
	}
	if nt.ErrorCode == "" && ev != api.NotifyAwaitingReply && ev != api.NotifyCompleted {
		nt.ErrorCode = t.LastErrorCode
	}
	if ev == api.NotifyCompleted {
		nt.Denied = t.Denied
	}
	code := nt.ErrorCode // as the agent said it: the text quotes it
	if !code.Known() {
		nt.ErrorCode = state.ErrorCode(api.Inert(string(code), 64))
	}
	nt.Gate = state.GateReason(api.Inert(string(nt.Gate), 64))
	text, said := taskText(ev, t, nt, code)
	n := api.Notification{ID: noteID(t.ID, string(ev), fmt.Sprint(attempt), question), Event: ev, At: t.UpdatedAt,
		Text: text, Link: rl.link("/tasks/" + t.ID), Task: nt, Said: said}
	if ev == api.NotifyAwaitingReply {
		n.Actions = rl.approvalActions(t.ID, t.AwaitingReply)
	}
	return append(notes, rl.records(n)...)
}

// expiredNotes are the records of a question of t that expired
// unanswered since before: the agent declined it on its own, and the
// person it was for hears so, whatever else the task did meanwhile.
func (rl *rules) expiredNotes(before taskMark, t *state.Task) []store.Notification {
	ev := api.NotifyApprovalExpired
	if t == nil || t.ApprovalExpired == nil || t.ApprovalExpired.ID == before.expired || !rl.wanted(ev) {
		return nil
	}
	nt := &api.NotifiedTask{ID: t.ID, Title: api.Inert(t.Title, maxTitleRunes), Phase: t.Phase, Repo: t.Repo, MaxAttempts: t.MaxAttempts,
		Question: inertQuestion(t.ApprovalExpired)}
	if c := t.Current(); c != nil {
		nt.Attempt = c.Number
	}
	if t.Lease != nil {
		nt.Agent = t.Lease.AgentID
	}
	text, said := taskText(ev, t, nt, "")
	n := api.Notification{ID: noteID(t.ID, string(ev), t.ApprovalExpired.ID), Event: ev, At: t.UpdatedAt,
		Text: text, Link: rl.link("/tasks/" + t.ID), Task: nt, Said: said}
	return rl.records(n)
}

// maxTitleRunes bounds a task's title in a notification.
const maxTitleRunes = 80

// inertQuestion is q as a notification carries it: its words Inert, a
// path list cut to its first maxQuestionPaths. The console and the API
// have it whole.
func inertQuestion(q *state.ApprovalRequest) *state.ApprovalRequest {
	out := &state.ApprovalRequest{ID: q.ID, Kind: state.ApprovalKind(api.Inert(string(q.Kind), 32)), Tool: api.Inert(q.Tool, 64),
		Command: api.Inert(q.Command, maxQuestionRunes), Reason: api.Inert(q.Reason, maxQuestionRunes), Cwd: api.Inert(q.Cwd, maxQuestionRunes),
		Input: api.Inert(q.Input, maxQuestionRunes), PathsMore: q.PathsMore, DiffCut: q.DiffCut, Asked: q.Asked, Deadline: q.Deadline}
	for _, p := range q.Paths[:min(len(q.Paths), maxQuestionPaths)] {
		out.Paths = append(out.Paths, api.Inert(p, maxQuestionRunes))
	}
	out.PathsMore += len(q.Paths) - len(out.Paths)
	if q.Diff != "" {
		// The diff keeps its lines; each is made inert (it is bounded
		// where it was asked: state.MaxApprovalDiff).
		lines := strings.Split(q.Diff, "\n")
		for i, l := range lines {
			lines[i] = api.Inert(l, len(l)+1)
		}
		out.Diff = strings.Join(lines, "\n")
	}
	return out
}

// Bounds of a question's words in a notification.
const (
	maxQuestionRunes = 1000
	maxQuestionPaths = 20
)

// agentNotes are the records of agent a's event ev, marked by mark (the
// time that marks the change: a record made again for it has the same
// ID) and dated at (when the change was). The agent's own words (its
// host name, its health's reason) are quoted and said to be its.
func (rl *rules) agentNotes(ev api.NotifyEvent, a api.AgentView, mark, at time.Time) []store.Notification {
	if !rl.wanted(ev) {
		return nil
	}
	na := &api.NotifiedAgent{ID: a.AgentID, Hostname: api.Inert(a.Hostname, maxHostRunes), Grade: api.Inert(string(a.Health.Grade), 32),
		Reason: api.Inert(a.Health.Reason, api.MaxSaidRunes), LastHeartbeat: a.LastHeartbeat}
	text, said := agentText(ev, a)
	n := api.Notification{ID: noteID(a.AgentID, string(ev), mark.UTC().Format(time.RFC3339Nano)), Event: ev, At: at,
		Text: text, Link: rl.link("/agents"), Agent: na, Said: said}
	return rl.records(n)
}

// maxHostRunes bounds an agent's host name in a notification.
const maxHostRunes = 80

// notifyAgent stores the records of agent a's event ev alone (no task
// transaction carries them), marked by mark and dated at (see
// agentNotes). A failure is logged: the change is stored anyway, for an
// agent's record is what it says in its heartbeats.
func (rl *rules) notifyAgent(ctx context.Context, ev api.NotifyEvent, a api.AgentView, mark, at time.Time) {
	ns := rl.agentNotes(ev, a, mark, at)
	if len(ns) == 0 {
		return
	}
	if err := rl.store.Notify(ctx, ns...); err != nil {
		rl.log.Error("store a notification", "event", ev, "agent", a.AgentID, "err", err)
	}
}

// wanted reports whether a target wants ev.
func (rl *rules) wanted(ev api.NotifyEvent) bool {
	return slices.ContainsFunc(rl.opts.Notify, func(t NotifyTarget) bool { return t.wants(ev) })
}

func (t NotifyTarget) wants(ev api.NotifyEvent) bool {
	return len(t.Events) == 0 && ev.ByDefault() || slices.Contains(t.Events, ev)
}

// records are n's records: one per target that wants its event, with the
// same ID, due now.
func (rl *rules) records(n api.Notification) []store.Notification {
	body, err := json.Marshal(n)
	if err != nil {
		rl.log.Error("encode a notification", "event", n.Event, "err", err)
		return nil
	}
	now := rl.opts.Now()
	var out []store.Notification
	for _, t := range rl.opts.Notify {
		if t.wants(n.Event) {
			out = append(out, store.Notification{ID: n.ID, Target: t.Name, Body: body, Created: now, Due: now})
		}
	}
	return out
}

// link is the console's page at path, "" without a public URL.
func (rl *rules) link(path string) string {
	if rl.opts.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(rl.opts.PublicURL, "/") + path
}

// noteID is a notification's ID from its cause's parts.
func noteID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "n-" + hex.EncodeToString(h.Sum(nil))[:24]
}

// taskText says a task's notification in one line, and what the task or
// its agent said in it. A title is quoted (a subtask's is its parent
// task's choice), and so is everything else a task or an agent chose.
func taskText(ev api.NotifyEvent, t *state.Task, nt *api.NotifiedTask, code state.ErrorCode) (string, *api.NotifySaid) {
	name := "Task " + api.Quoted(cmp.Or(t.Title, t.ID), maxTitleRunes)
	if t.Parent != "" {
		name = "Subtask " + api.Quoted(cmp.Or(t.Title, t.ID), maxTitleRunes) + " of task " + t.Parent
	}
	agent, by := "", ""
	if nt.Agent != "" {
		agent = " (agent " + api.Name(nt.Agent) + ")"
		by = "agent " + api.Name(nt.Agent)
	}
	attempts := ""
	if nt.Attempt > 0 {
		attempts = fmt.Sprintf(" after %d attempt%s", nt.Attempt, plural(nt.Attempt))
	}
	switch ev {
	case api.NotifyAwaitingReply:
		return askText(name+" awaits approval"+agent, "task "+t.ID, t.AwaitingReply)
	case api.NotifyApprovalExpired:
		return askText(name+": nobody answered in time, so the agent declined"+agent, "task "+t.ID, t.ApprovalExpired)
	case api.NotifyCompleted:
		denied := ""
		if nt.Denied > 0 {
			// Not plain success: the model was refused what it asked for.
			denied = " (" + state.DeniedText(nt.Denied) + ")"
		}
		what, said := completedText(t, nt)
		return name + " completed" + denied + attempts + agent + what, said
	case api.NotifyBlocked:
		return fmt.Sprintf("%s is blocked: the safety gate did not run it again (%s)%s%s; a person may continue or retry it", name, nt.Gate, attempts, agent), nil
	case api.NotifyParked:
		return parkedText(name, agent, t), nil
	case api.NotifyResumed:
		return name + " resumed: attempt " + fmt.Sprint(nt.Attempt) + " continues" + agent, nil
	}
	what := string(nt.Phase)
	if code.Known() {
		what = string(code)
	} else if code != "" {
		what = "error " + api.Quoted(string(code), 64)
	}
	verb := "failed"
	if t.Phase != state.PhaseFailed {
		verb = "ended " + string(t.Phase)
	}
	line := name + " " + verb + ": " + what + attempts + agent
	// A failure's reason is its agent's (a timeout's or an expiry's is
	// the control plane's own, and the phase says it).
	if (t.Phase == state.PhaseFailed || t.Phase == state.PhaseRecoverableFailed) && by != "" {
		if said := api.Said(by, t.PhaseReason); said != nil {
			return line + "; " + by + " says: " + api.Quoted(t.PhaseReason, api.MaxSaidRunes), said
		}
	}
	return line, nil
}

// parkedText says why task t parked and when it resumes.
func parkedText(name, agent string, t *state.Task) string {
	line := name + " parked" + agent
	if p := t.Parked; p != nil {
		line += " at its " + strings.ReplaceAll(api.Inert(string(p.Reason), 32), "_", " ")
		if !p.ResumesAt.IsZero() {
			line += "; it continues on its own when the limit resets, at " + p.ResumesAt.UTC().Format(time.RFC3339)
		}
	}
	if p := t.Parked; p != nil && p.Reason == state.ParkBudget {
		return line + " (" + state.BudgetText(p.MaxTokens, p.MaxTime.D()) + " reached); a person decides: agent tasks budget " + t.ID +
			" --add-tokens N or --add-time D continues it, agent tasks cancel ends it"
	}
	return line + " (agent tasks continue resumes it now, agent tasks cancel ends it)"
}

// askText is what a question asks, quoted as the task's words after
// line, and the words themselves.
func askText(line, by string, q *state.ApprovalRequest) (string, *api.NotifySaid) {
	if q == nil {
		return line + "; " + by + " asks a question", nil
	}
	in := ""
	if q.Cwd != "" {
		in = " in " + api.Quoted(q.Cwd, 120)
	}
	if q.Diff != "" {
		in += diffStat(q.Diff)
	}
	switch {
	case q.Command != "":
		return line + "; " + by + " asks to run " + api.Quoted(q.Command, api.MaxSaidRunes) + in, api.Said(by, q.Command)
	case len(q.Paths) == 1:
		return line + "; " + by + " asks to change " + api.Quoted(q.Paths[0], api.MaxSaidRunes) + in, api.Said(by, q.Paths[0])
	case len(q.Paths) > 1:
		return fmt.Sprintf("%s; %s asks to change %d files, the first %s%s", line, by, len(q.Paths), api.Quoted(q.Paths[0], api.MaxSaidRunes), in),
			api.Said(by, q.Paths[0])
	case q.Reason != "":
		return line + "; " + by + " asks: " + api.Quoted(q.Reason, api.MaxSaidRunes) + in, api.Said(by, q.Reason)
	}
	return line + "; " + by + " asks a question of kind " + api.Quoted(string(q.Kind), 32) + in, nil
}

// agentText says an agent's notification in one line, and what the agent
// said in it: its host name and its health's reason are quoted, its.
func agentText(ev api.NotifyEvent, a api.AgentView) (string, *api.NotifySaid) {
	by := "agent " + api.Name(a.AgentID)
	name := "Agent " + api.Name(a.AgentID)
	if a.Hostname != "" {
		name += " (host " + api.Quoted(a.Hostname, maxHostRunes) + ")"
	}
	if ev == api.NotifyAgentUnhealthy {
		s := name + " is unavailable"
		said := api.Said(by, a.Health.Reason)
		if said != nil {
			s += "; " + by + " says: " + api.Quoted(a.Health.Reason, api.MaxSaidRunes)
		}
		return s, said
	}
	if ev == api.NotifyAgentStopped {
		return name + " stopped, as it was told to (a planned stop or restart); its last heartbeat " + a.LastHeartbeat.UTC().Format(time.RFC3339), nil
	}
	return name + " went offline; last heartbeat " + a.LastHeartbeat.UTC().Format(time.RFC3339), nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// notifyHeartbeat writes the notifications of a heartbeat that changed
// agent was into now: it said it stops (agent.stopped, a planned stop,
// not agent.offline: marked by the start of the run that ends, dated
// by the heartbeat that said so), or its grade became unavailable
// (marked and dated by when it did, as the agent says).
func (rl *rules) notifyHeartbeat(ctx context.Context, was, now api.AgentView) {
	if len(rl.opts.Notify) == 0 {
		return
	}
	if now.State == api.AgentOffline && was.State != api.AgentOffline {
		rl.notifyAgent(ctx, api.NotifyAgentStopped, now, orTime(now.StartedAt, now.LastHeartbeat), now.LastHeartbeat)
	}
	if now.Health.Grade == health.Unavailable && was.Health.Grade != health.Unavailable {
		at := orTime(now.Health.Since, now.LastHeartbeat)
		rl.notifyAgent(ctx, api.NotifyAgentUnhealthy, now, at, at)
	}
}

// notifySilent writes the notifications of the agents the watchdog
// found online before and silent now (marked and dated by their last
// heartbeat). One that said it stops was not silent: its heartbeat
// said so (agent.stopped).
func (w *watchdog) notifySilent(ctx context.Context, online map[string]bool, records map[string]store.Agent) {
	if len(w.opts.Notify) == 0 {
		return
	}
	var silent []api.AgentView
	w.mu.Lock()
	for id, on := range online {
		if a, ok := records[id]; ok && !on && w.wasOnline[id] && a.View.State != api.AgentOffline {
			silent = append(silent, a.View)
		}
	}
	w.mu.Unlock()
	for _, a := range silent {
		w.rules.notifyAgent(ctx, api.NotifyAgentOffline, a, a.LastHeartbeat, a.LastHeartbeat)
	}
}

// orTime is t, or else when t is zero.
func orTime(t, otherwise time.Time) time.Time {
	if t.IsZero() {
		return otherwise
	}
	return t
}

// diffStat is a question's diff counted, " (+3 -1)": what a file change
// it asks for comes to.
func diffStat(diff string) string {
	plus, minus := 0, 0
	for l := range strings.SplitSeq(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "+"):
			plus++
		case strings.HasPrefix(l, "-"):
			minus++
		}
	}
	return fmt.Sprintf(" (+%d -%d)", plus, minus)
}
