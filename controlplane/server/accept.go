package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// acceptEvents applies a batch in order, in one store transaction over
// the tasks it names. Each event is accepted, a duplicate (its key was
// accepted before: nothing changes), or rejected with a reason the agent
// records as the record's dead reason. Changed tasks and accepted events
// are stored, synced, before the answer; when they cannot be, nothing of
// the batch is (the agent sends it again). A log event past its attempt's
// cap is accepted and counted, its lines not stored (see admitLog).
func (rl *rules) acceptEvents(ctx context.Context, req api.EventsRequest) (api.EventsResponse, error) {
	if err := checkAgentID(req.AgentID); err != nil {
		return api.EventsResponse{}, err
	}
	if len(req.Events) > api.MaxEventsPerBatch {
		return api.EventsResponse{}, invalidRequest("%d events in one batch; the limit is %d", len(req.Events), api.MaxEventsPerBatch)
	}
	rl.watchdog.pass(ctx)
	var ids []string
	for _, ev := range req.Events {
		if ev.TaskID != "" && len(ev.TaskID) <= api.MaxIDBytes && !slices.Contains(ids, ev.TaskID) {
			ids = append(ids, ev.TaskID)
		}
	}
	var (
		resp   api.EventsResponse
		queued bool
		trees  []string // the trees whose tasks reported usage
	)
	err := rl.update(ctx, ids, func(tx store.Tx) error {
		now := rl.opts.Now()
		resp = api.EventsResponse{Results: make([]api.EventResult, len(req.Events))}
		queued, trees = false, trees[:0]
		for i, ev := range req.Events {
			res, err := rl.acceptEvent(tx, req.AgentID, ev, now)
			if err != nil {
				return err
			}
			resp.Results[i] = res
			if t := tx.Task(ev.TaskID); t != nil && ev.Kind == state.EventAttempt && res.Status == api.StatusAccepted {
				if root := treeRoot(t); root != "" && !slices.Contains(trees, root) {
					trees = append(trees, root)
				}
			}
		}
		resp.Stop, resp.CancelOrders = nil, nil
		for _, id := range ids {
			t := tx.Task(id)
			if t != nil && t.Phase == state.PhaseQueued {
				queued = true
			}
			if t != nil && t.Lease != nil && t.Lease.AgentID == req.AgentID {
				if o, ok := stopOrder(t); ok {
					resp.Stop = append(resp.Stop, o)
				} else if t.CancelRequested {
					// Running, it stops now; ended (its completion crossed
					// the cancel), the agent notes it as this side does.
					o, _ := cancelOrderOf(t, t.ID, req.AgentID)
					resp.CancelOrders = append(resp.CancelOrders, o)
				}
			}
		}
		return nil
	})
	if err != nil {
		return api.EventsResponse{}, storeErr("store events", err)
	}
	if queued {
		rl.dispatch.wakeClaims(1)
	}
	rl.countResults(resp.Results)
	// Tree budgets: the report that takes a tree past its root's budget
	// stops the tree, and its own task hears so in this answer.
	stopped, err := rl.stopSpentTrees(ctx, trees)
	if err != nil {
		rl.log.Warn("tree budgets: not checked after a report; the next report checks again", "err", err)
	}
	for _, id := range ids {
		if why, ok := stopped[id]; ok {
			resp.Stop = append(resp.Stop, api.StopOrder{TaskID: id, Reason: why})
		}
	}
	return resp, nil
}

// acceptEvent applies one event of a batch in its transaction.
func (rl *rules) acceptEvent(tx store.Tx, agentID string, ev api.Event, now time.Time) (api.EventResult, error) {
	res := api.EventResult{Key: ev.Key, Status: api.StatusAccepted}
	switch {
	case ev.Key == "":
		res.Status, res.Reason = api.StatusRejected, api.Invalid("no key")
		return res, nil
	case len(ev.Key) > api.MaxKeyBytes || len(ev.LeaseID) > api.MaxIDBytes || len(ev.TaskID) > api.MaxIDBytes:
		res.Status, res.Reason = api.StatusRejected, api.Invalid(fmt.Sprintf("key over %d bytes or id over %d", api.MaxKeyBytes, api.MaxIDBytes))
		return res, nil
	}
	t := tx.Task(ev.TaskID)
	// The keys of an ended task are asked for only by the agent that held
	// its lease: another's late event is rejected (terminal) by apply
	// without them.
	if t != nil && !(t.Phase.Terminal() && (t.Lease == nil || t.Lease.AgentID != agentID)) {
		dup, err := tx.Seen(t.ID, ev.Key)
		if err != nil {
			return res, fmt.Errorf("read the keys of task %s: %w", t.ID, err)
		}
		if dup {
			res.Status = api.StatusDuplicate
			return res, nil
		}
	}
	var logged api.LogPayload
	if ev.Kind == state.EventLog {
		var err error
		if logged, err = decodeLog(ev.Payload); err != nil {
			res.Status, res.Reason = api.StatusRejected, api.Invalid(err.Error())
			return res, nil
		}
		if logged.Cut != nil { // the control plane's mark, read from the decoded payload
			res.Status, res.Reason = api.StatusRejected, api.Invalid("output_cut is the control plane's mark, not an agent's")
			return res, nil
		}
		if w := logged.Withheld; w != nil && (w.CapBytes < 0 || w.Lines < 0 || w.Bytes < 0) {
			res.Status, res.Reason = api.StatusRejected, api.Invalid("output_withheld: counts below 0")
			return res, nil
		}
	}
	if t == nil {
		res.Status, res.Reason = api.StatusRejected, api.ReasonUnknown
		return res, nil
	}
	// apply changes t only when it accepts: a rejection leaves it as it
	// was (it works on a copy until then). A log event's apply changes
	// nothing before it decides: the common case needs no copy.
	work := t
	if ev.Kind != state.EventLog {
		work = t.Clone()
	}
	if reason := rl.apply(work, agentID, ev, now); reason != "" {
		res.Status, res.Reason = api.StatusRejected, reason
		return res, nil
	}
	*t = *work
	se := api.StoredEvent{Event: ev, AgentID: agentID, ReceivedAt: now}
	line, err := encodeStored(se)
	seq := tx.LastSeq(t.ID) + 1
	if err == nil && ev.Kind == state.EventLog {
		line, err = rl.admitLog(t, se, logged, line, seq)
	}
	if err != nil {
		return res, fmt.Errorf("store event %s: %w", ev.Key, err)
	}
	if line != nil {
		tx.Append(t.ID, ev.Key, ev.Kind, seq, line[:len(line)-1])
		if ev.Kind == state.EventDiff {
			t.Diff.Seq = seq
		}
	} else {
		tx.Append(t.ID, ev.Key, ev.Kind, 0, nil)
	}
	tx.Save(t)
	return res, nil
}

// apply applies one event to its task t, or says why it is rejected
// (having changed t perhaps: the caller works on a copy).
func (rl *rules) apply(t *state.Task, agentID string, ev api.Event, now time.Time) (reason api.RejectReason) {
	if t.Phase.Terminal() {
		// The completion that follows the agent's own terminal phase is
		// the one late event a terminal task takes, from that agent under
		// its lease alone.
		var c state.CompleteEvent
		if ev.Kind == state.EventComplete && json.Unmarshal(ev.Payload, &c) == nil && c.Status == t.Phase && t.Result == nil {
			if t.Lease == nil || t.Lease.ID != ev.LeaseID || t.Lease.AgentID != agentID {
				return api.ReasonLease
			}
			rl.setResult(t, c)
			return ""
		}
		if ev.Kind == state.EventPush {
			return applyPush(t, agentID, ev, now)
		}
		return api.ReasonTerminal
	}
	if r := t.PersonRetry; r != nil && ev.Attempt > 0 && ev.Attempt <= r.After {
		// A report of an attempt that ended before a person retried the
		// task: it was made while the task was terminal.
		return api.ReasonTerminal
	}
	switch {
	case t.Lease == nil:
		return api.ReasonLease // never leased, or back in the queue
	case t.Lease.ID != ev.LeaseID || t.Lease.AgentID != agentID:
		return api.ReasonLease // another's lease, or another agent holding it
	case t.Lease.Lapsed:
		// The lease lapsed while the agent was away, and nobody else took
		// the task: the agent that held it, under its lease id, gets it
		// back.
		t.Lease.Lapsed = false
	}
	bad := func(err error) api.RejectReason { return api.Invalid(err.Error()) }
	switch ev.Kind {
	case state.EventPhase:
		var p state.PhaseEvent
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		if p.Phase == state.PhaseParked && (p.Parked == nil || !p.Parked.Reason.Known()) {
			return api.Invalid("a parked phase says why it parked: parked.reason usage_limit")
		}
		if err := t.Transition(p.Phase, p.Reason, now); err != nil {
			return bad(err)
		}
		if p.Phase == state.PhaseParked {
			park := *p.Parked
			park.ContinueAsked = time.Time{} // a person's, never the agent's
			t.Parked = &park
		}
		if p.Phase == state.PhaseAwaitingReply && p.Request != nil {
			r := *p.Request
			r.Bound() // as the agent did: what a phone and a notification show stays small
			t.AwaitingReply, t.Reply = &r, nil
		}
		if p.Expired != nil {
			r := *p.Expired
			r.Bound()
			t.ApprovalExpired = &r
		}
	case state.EventProgress:
		var p state.ProgressEvent
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return bad(err)
		}
		t.Progress = p
	case state.EventLog:
		// Its payload is read and checked by acceptEvents (decodeLog), and
		// what of it is stored decided there (admitLog).
	case state.EventAttempt:
		var a state.Attempt
		if err := json.Unmarshal(ev.Payload, &a); err != nil {
			return bad(err)
		}
		if err := t.PutAttempt(a); err != nil {
			return bad(err)
		}
	case state.EventComplete:
		var c state.CompleteEvent
		if err := json.Unmarshal(ev.Payload, &c); err != nil {
			return bad(err)
		}
		if err := t.Transition(c.Status, "", now); err != nil {
			return bad(err)
		}
		rl.setResult(t, c)
	case state.EventDiff:
		var d state.DiffEvent
		if err := json.Unmarshal(ev.Payload, &d); err != nil {
			return bad(err)
		}
		if len(d.Patch) > state.MaxDiffBytes {
			return api.Invalid(fmt.Sprintf("a diff's patch is over %d bytes", state.MaxDiffBytes))
		}
		// Its seq is known once it is stored (acceptEvent sets it).
		t.Diff = state.DiffRef{Attempt: ev.Attempt, Files: d.Files, Insertions: d.Insertions, Deletions: d.Deletions,
			Bytes: max(d.Bytes, int64(len(d.Patch))), Cut: d.Cut}
	case state.EventPush:
		return api.Invalid("a push event is taken of a completed task only: the completion says how the first push went")
	default:
		return api.Invalid("unknown kind " + string(ev.Kind))
	}
	t.LastProgressAt, t.UpdatedAt, t.Liveness = now, now, ""
	t.Lease.ExpiresAt = now.Add(rl.opts.Lease)
	return ""
}

// applyPush applies the one late event a completed task takes besides
// its completion: how a person's push of its branch went (agent tasks
// push), from the agent holding its lease, under that lease. It changes
// the changes' push fields and nothing else.
func applyPush(t *state.Task, agentID string, ev api.Event, now time.Time) api.RejectReason {
	switch {
	case t.Lease == nil || t.Lease.ID != ev.LeaseID || t.Lease.AgentID != agentID:
		return api.ReasonLease
	case t.Phase != state.PhaseCompleted:
		return api.ReasonTerminal
	case t.Result == nil || t.Result.Changes == nil:
		return api.Invalid("the task changed no repository: it has no branch to push")
	}
	var p state.PushEvent
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return api.Invalid(err.Error())
	}
	if p.PullRequest != "" {
		if err := checkPullRequestURL(p.PullRequest); err != nil {
			return api.Invalid(err.Error())
		}
	}
	ch := *t.Result.Changes
	ch.Pushed, ch.PullRequest, ch.PushError = p.Pushed, p.PullRequest, p.PushError
	r := *t.Result
	r.Changes = boundChanges(&ch)
	t.Result, t.UpdatedAt = &r, now
	return ""
}

// maxURLBytes bounds a pull request's address.
const maxURLBytes = 2048

// checkPullRequestURL refuses a pull request's address that is not an
// absolute http(s) URL of at most maxURLBytes: the console links to it.
func checkPullRequestURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > maxURLBytes || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.User != nil || strings.ContainsAny(raw, " \t\r\n") {
		return fmt.Errorf("pull_request %q: want an http(s) URL of at most %d bytes", state.Ellipsize(raw, 100), maxURLBytes)
	}
	return nil
}

func (rl *rules) setResult(t *state.Task, c state.CompleteEvent) {
	t.Result = &state.Result{Summary: c.Summary, Data: c.Result, Changes: boundChanges(c.Changes), Usage: c.Usage}
	if c.Error != nil && t.PhaseReason == "" {
		t.PhaseReason = c.Error.Error()
	}
}

// Caps on a result's changes as the control plane keeps them, which every
// list of tasks carries: at most state.MaxChangesCommits commits (the rest
// counted in CommitsCut), each subject and name cut to a line's length.
const (
	maxSubjectRunes   = 200
	maxRefRunes       = 256
	maxPushErrorRunes = 1000
)

// boundChanges is c as the control plane keeps it: a copy within the caps.
func boundChanges(c *state.Changes) *state.Changes {
	if c == nil {
		return nil
	}
	b := *c
	cut := func(s string) string { return state.Ellipsize(s, maxRefRunes) }
	b.Repo, b.Branch, b.Base, b.BaseCommit, b.Head, b.Path = cut(b.Repo), cut(b.Branch), cut(b.Base), cut(b.BaseCommit), cut(b.Head), cut(b.Path)
	b.CommitsCut, b.Files, b.Insertions, b.Deletions = max(b.CommitsCut, 0), max(b.Files, 0), max(b.Insertions, 0), max(b.Deletions, 0)
	if n := len(c.Commits); n > state.MaxChangesCommits {
		b.CommitsCut += n - state.MaxChangesCommits
	}
	b.Commits = make([]state.Commit, 0, min(len(c.Commits), state.MaxChangesCommits))
	for _, cm := range c.Commits[:min(len(c.Commits), state.MaxChangesCommits)] {
		b.Commits = append(b.Commits, state.Commit{SHA: cut(cm.SHA), Subject: state.Ellipsize(cm.Subject, maxSubjectRunes)})
	}
	if c.Pushed != nil {
		b.Pushed = &state.Push{Remote: cut(c.Pushed.Remote), Branch: cut(c.Pushed.Branch), Commit: cut(c.Pushed.Commit), At: c.Pushed.At}
	}
	if b.PullRequest != "" && checkPullRequestURL(b.PullRequest) != nil {
		b.PullRequest, b.PushError = "", strings.TrimPrefix(b.PushError+"; the agent's pull request address was not an http(s) URL", "; ")
	}
	b.PushError = state.Ellipsize(b.PushError, maxPushErrorRunes)
	return &b
}

// replay applies again the events a crash left unapplied to their task,
// as they were then (same agent, same time): a file store's recovery.
func (rl *rules) replay(t *state.Task, missed []store.Missed) {
	for _, e := range missed {
		if reason := rl.apply(t, e.AgentID, e.Event, e.ReceivedAt); reason != "" {
			rl.log.Warn("replaying a stored event after a crash: not applied", "task", t.ID, "key", e.Key, "reason", reason)
		} else if e.Kind == state.EventLog {
			if l, err := decodeLog(e.Payload); err == nil {
				replayLog(t, e.Size, l, e.Attempt, e.Seq)
			}
		} else if e.Kind == state.EventDiff {
			t.Diff.Seq = e.Seq
		}
	}
}
