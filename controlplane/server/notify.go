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
func (s *Server) update(ctx context.Context, ids []string, fn func(store.Tx) error) error {
	if len(s.opts.Notify) == 0 {
		return s.store.Update(ctx, ids, fn)
	}
	return s.store.Update(ctx, ids, func(tx store.Tx) error {
		w := &watchedTx{Tx: tx, before: map[string]taskMark{}}
		if err := fn(w); err != nil {
			return err
		}
		s.notifyPhases(w)
		return nil
	})
}

// claimTasks is store.Claim, with the notifications of the phases fn
// changes: each task's, after fn took it.
func (s *Server) claimTasks(ctx context.Context, fn func(store.Tx, *state.Task) (bool, error)) error {
	if len(s.opts.Notify) == 0 {
		return s.store.Claim(ctx, fn)
	}
	return s.store.Claim(ctx, func(tx store.Tx, t *state.Task) (bool, error) {
		before := markOf(t)
		stop, err := fn(tx, t)
		if err == nil {
			if saved := tx.Task(t.ID); saved != nil {
				tx.Notify(s.taskNotes(before, saved)...)
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
func (s *Server) notifyPhases(w *watchedTx) {
	for _, id := range w.saved {
		before, ok := w.before[id]
		t := w.Tx.Task(id)
		if !ok || t == nil {
			continue
		}
		w.Notify(s.taskNotes(before, t)...)
	}
}

// taskMark is what tells a task's moves apart: its phase, and the
// question it asks in awaiting_reply (a second question in one
// transaction is a move too).
type taskMark struct {
	phase    state.Phase
	question string
}

func markOf(t *state.Task) taskMark {
	m := taskMark{phase: t.Phase}
	if t.Phase == state.PhaseAwaitingReply && t.AwaitingReply != nil {
		m.question = t.AwaitingReply.ID
	}
	return m
}

// phaseEvent is the event of a task that moved from before to where it
// is, and the attempt it is about; "" when a person hears of none.
func (s *Server) phaseEvent(before taskMark, t *state.Task) (api.NotifyEvent, *state.Attempt) {
	if t == nil || markOf(t) == before || t.CancelRequested && t.Phase.Terminal() {
		return "", nil // no move, or a person's cancel: they know
	}
	var last *state.Attempt
	if n := len(t.Attempts); n > 0 {
		last = &t.Attempts[n-1]
	}
	switch t.Phase {
	case state.PhaseAwaitingReply:
		return api.NotifyAwaitingReply, last
	case state.PhaseCompleted:
		return api.NotifyCompleted, last
	case state.PhaseFailed, state.PhaseTimedOut, state.PhaseExpired, state.PhaseRecoverableFailed:
		if last != nil && last.Retry != nil && last.Retry.Decision == state.DecisionStopped && last.Retry.Gate.Blocks() {
			return api.NotifyBlocked, last
		}
		return api.NotifyFailed, last
	}
	return "", nil
}

// taskNotes are the records of task t's move from phase before, one per
// target that wants its event; none when it is not one a person hears
// of.
func (s *Server) taskNotes(before taskMark, t *state.Task) []store.Notification {
	ev, last := s.phaseEvent(before, t)
	if ev == "" || !s.wanted(ev) {
		return nil
	}
	attempt, question := 0, ""
	if last != nil {
		attempt = last.Number
	}
	nt := &api.NotifiedTask{ID: t.ID, Title: t.Title, Phase: t.Phase, Reason: t.PhaseReason, Repo: t.Repo,
		Attempt: attempt, MaxAttempts: t.MaxAttempts}
	if t.Lease != nil {
		nt.Agent = t.Lease.AgentID
	}
	if ev == api.NotifyCompleted && t.Result != nil && t.Result.Changes != nil {
		nt.PullRequest = t.Result.Changes.PullRequest
	}
	if ev == api.NotifyAwaitingReply && t.AwaitingReply != nil {
		q := *t.AwaitingReply
		nt.Question, question = &q, q.ID
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
	n := api.Notification{ID: noteID(t.ID, string(ev), fmt.Sprint(attempt), question), Event: ev, At: t.UpdatedAt,
		Text: taskText(ev, nt), Link: s.link("/tasks/" + t.ID), Task: nt}
	return s.records(n)
}

// agentNotes are the records of agent a's event ev, marked by at (the
// time that marks the change: a record made again for it has the same
// ID).
func (s *Server) agentNotes(ev api.NotifyEvent, a api.AgentView, at time.Time) []store.Notification {
	if !s.wanted(ev) {
		return nil
	}
	na := &api.NotifiedAgent{ID: a.AgentID, Hostname: a.Hostname, Grade: string(a.Health.Grade), Reason: a.Health.Reason,
		LastHeartbeat: a.LastHeartbeat}
	n := api.Notification{ID: noteID(a.AgentID, string(ev), at.UTC().Format(time.RFC3339Nano)), Event: ev, At: at,
		Text: agentText(ev, na), Link: s.link("/agents"), Agent: na}
	return s.records(n)
}

// notifyAgent stores the records of agent a's event ev alone (no task
// transaction carries them). A failure is logged: the change is stored
// anyway, for an agent's record is what it says in its heartbeats.
func (s *Server) notifyAgent(ctx context.Context, ev api.NotifyEvent, a api.AgentView, at time.Time) {
	ns := s.agentNotes(ev, a, at)
	if len(ns) == 0 {
		return
	}
	if err := s.store.Notify(ctx, ns...); err != nil {
		s.log.Error("store a notification", "event", ev, "agent", a.AgentID, "err", err)
	}
}

// wanted reports whether a target wants ev.
func (s *Server) wanted(ev api.NotifyEvent) bool {
	return slices.ContainsFunc(s.opts.Notify, func(t NotifyTarget) bool { return t.wants(ev) })
}

func (t NotifyTarget) wants(ev api.NotifyEvent) bool {
	return len(t.Events) == 0 || slices.Contains(t.Events, ev)
}

// records are n's records: one per target that wants its event, with the
// same ID, due now.
func (s *Server) records(n api.Notification) []store.Notification {
	body, err := json.Marshal(n)
	if err != nil {
		s.log.Error("encode a notification", "event", n.Event, "err", err)
		return nil
	}
	now := s.opts.Now()
	var out []store.Notification
	for _, t := range s.opts.Notify {
		if t.wants(n.Event) {
			out = append(out, store.Notification{ID: n.ID, Target: t.Name, Body: body, Created: now, Due: now})
		}
	}
	return out
}

// link is the console's page at path, "" without a public URL.
func (s *Server) link(path string) string {
	if s.opts.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(s.opts.PublicURL, "/") + path
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

// oneLine is s on one line, at most n runes.
func oneLine(s string, n int) string {
	return state.Ellipsize(strings.Join(strings.Fields(s), " "), n)
}

// taskText says a task's notification in one line.
func taskText(ev api.NotifyEvent, t *api.NotifiedTask) string {
	name := fmt.Sprintf("Task %q", oneLine(cmp.Or(t.Title, t.ID), 80))
	agent := ""
	if t.Agent != "" {
		agent = " (agent " + t.Agent + ")"
	}
	attempts := ""
	if t.Attempt > 0 {
		attempts = fmt.Sprintf(" after %d attempt%s", t.Attempt, plural(t.Attempt))
	}
	switch ev {
	case api.NotifyAwaitingReply:
		return name + " awaits approval: " + question(t.Question) + agent
	case api.NotifyCompleted:
		if t.PullRequest != "" {
			return name + " completed" + attempts + agent + "; pull request: " + t.PullRequest
		}
		return name + " completed" + attempts + agent
	case api.NotifyBlocked:
		return fmt.Sprintf("%s is blocked: the safety gate did not run it again (%s)%s%s; a person may continue or retry it", name, t.Gate, attempts, agent)
	}
	what := string(t.ErrorCode)
	if what == "" {
		what = oneLine(t.Reason, 120)
	}
	if what == "" {
		what = string(t.Phase)
	}
	verb := "failed"
	if t.Phase != state.PhaseFailed {
		verb = "ended " + string(t.Phase)
	}
	return name + " " + verb + ": " + what + attempts + agent
}

// question says what an approval asks, short.
func question(q *state.ApprovalRequest) string {
	if q == nil {
		return "a question"
	}
	var what string
	switch {
	case q.Command != "":
		what = fmt.Sprintf("run %q", oneLine(q.Command, 120))
	case len(q.Paths) == 1:
		what = "change " + oneLine(q.Paths[0], 120)
	case len(q.Paths) > 1:
		what = fmt.Sprintf("change %d files", len(q.Paths))
	case q.Reason != "":
		what = oneLine(q.Reason, 120)
	default:
		what = string(q.Kind)
	}
	if q.Cwd != "" {
		what += " in " + oneLine(q.Cwd, 120)
	}
	return what
}

// agentText says an agent's notification in one line.
func agentText(ev api.NotifyEvent, a *api.NotifiedAgent) string {
	name := "Agent " + a.ID
	if a.Hostname != "" {
		name += " (" + oneLine(a.Hostname, 80) + ")"
	}
	if ev == api.NotifyAgentUnhealthy {
		s := name + " is unavailable"
		if a.Reason != "" {
			s += ": " + oneLine(a.Reason, 160)
		}
		return s
	}
	return name + " went offline; last heartbeat " + a.LastHeartbeat.UTC().Format(time.RFC3339)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// notifyHeartbeat writes the notifications of a heartbeat that changed
// agent was into now: it said it goes offline (marked by the start of
// the run that ends), or its grade became unavailable (marked by when
// it did, as the agent says).
func (s *Server) notifyHeartbeat(ctx context.Context, was, now api.AgentView) {
	if len(s.opts.Notify) == 0 {
		return
	}
	if now.State == api.AgentOffline && was.State != api.AgentOffline {
		s.notifyAgent(ctx, api.NotifyAgentOffline, now, orTime(now.StartedAt, now.LastHeartbeat))
	}
	if now.Health.Grade == health.Unavailable && was.Health.Grade != health.Unavailable {
		s.notifyAgent(ctx, api.NotifyAgentUnhealthy, now, orTime(now.Health.Since, now.LastHeartbeat))
	}
}

// notifySilent writes the notifications of the agents the watchdog
// found online before and silent now (marked by their last heartbeat).
// One that said it goes offline was notified by its heartbeat.
func (s *Server) notifySilent(ctx context.Context, online map[string]bool, records map[string]store.Agent) {
	if len(s.opts.Notify) == 0 {
		return
	}
	var silent []api.AgentView
	s.mu.Lock()
	for id, on := range online {
		if a, ok := records[id]; ok && !on && s.wasOnline[id] && a.View.State != api.AgentOffline {
			silent = append(silent, a.View)
		}
	}
	s.mu.Unlock()
	for _, a := range silent {
		s.notifyAgent(ctx, api.NotifyAgentOffline, a, a.LastHeartbeat)
	}
}

// orTime is t, or else when t is zero.
func orTime(t, otherwise time.Time) time.Time {
	if t.IsZero() {
		return otherwise
	}
	return t
}
