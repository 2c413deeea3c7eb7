package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// watchdog is the loop that applies the rules of time: tasks queued or
// stalled too long end, leases of offline agents lapse, ended tasks past
// retention go (see pass). It runs by RunWatchdog's ticker and on
// requests, at most once a second; the changes it makes are the rules'
// (update, route), and it wakes the dispatch's claims when a task may be
// claimed again.
type watchdog struct {
	opts     *Options
	log      *slog.Logger
	store    store.Store
	rules    *rules
	dispatch *dispatch

	started time.Time // leases do not lapse until agents had time to report

	mu sync.Mutex
	// lastWatch is when the watchdog last ran; wasOnline, whether it
	// found each agent online.
	lastWatch time.Time
	lastPrune time.Time
	wasOnline map[string]bool
	// strainedAt is when the control plane last shed a request or
	// answered a heartbeat slowly: no lease lapses for a while after.
	strainedAt time.Time
}

// watchEvery is how often the watchdog looks, at most: on requests, and
// by RunWatchdog's ticker.
const watchEvery = time.Second

// RunWatchdog runs the watchdog every period until ctx is done. The
// watchdog also runs on claims, event batches and heartbeats, at most once
// a second.
func (s *Server) RunWatchdog(ctx context.Context, period time.Duration) {
	s.watchdog.run(ctx, period)
}

// run is the watchdog's loop: a pass every period until ctx is done.
func (w *watchdog) run(ctx context.Context, period time.Duration) {
	tick(ctx, period, func() { w.pass(ctx) })
}

// tick calls fn every period until ctx is done.
func tick(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// watchdog applies the rules, in one replica at a time (store.Lead):
// tasks queued too long expire, stalled tasks end, and the leases of
// offline agents lapse (a task still only claimed goes back to the queue).
// It looks at the tasks that have not ended, without locks, and changes
// those the rules end in a transaction each, deciding again there: what
// it does is idempotent, whichever replica does it. A failure is logged:
// the next pass tries again.
func (w *watchdog) pass(ctx context.Context) {
	// Run on a heartbeat, it is not one: its store calls wait their turn.
	ctx = store.WithPriority(ctx, false)
	now := w.opts.Now()
	w.mu.Lock()
	due := w.lastWatch.IsZero() || now.Sub(w.lastWatch) >= watchEvery || now.Before(w.lastWatch)
	if due {
		w.lastWatch = now
	}
	w.mu.Unlock()
	if !due {
		return
	}
	if lead, err := w.store.Lead(ctx); err != nil || !lead {
		if err != nil {
			w.log.Warn("watchdog: the store did not say who leads", "err", err)
		}
		return
	}
	if err := w.watch(ctx, now); err != nil {
		w.log.Warn("watchdog", "err", err)
	}
	if err := w.prune(ctx, now); err != nil {
		w.log.Warn("retention: removing ended tasks", "err", err)
	}
}

// pruneEvery is how often the watchdog removes the tasks past retention,
// and pruneBatch how many a store call removes at most.
const (
	pruneEvery = time.Minute
	pruneBatch = 500
)

// prune removes the tasks that ended more than Options.Retention ago,
// with their events, once a minute at most.
func (w *watchdog) prune(ctx context.Context, now time.Time) error {
	if w.opts.Retention <= 0 {
		return nil
	}
	w.mu.Lock()
	due := w.lastPrune.IsZero() || now.Sub(w.lastPrune) >= pruneEvery || now.Before(w.lastPrune)
	if due {
		w.lastPrune = now
	}
	w.mu.Unlock()
	if !due {
		return nil
	}
	total := 0
	defer func() {
		if total > 0 {
			w.log.Info("retention: ended tasks removed", "tasks", total, "ended_before", now.Add(-w.opts.Retention).Format(time.RFC3339))
		}
	}()
	for {
		n, err := w.store.Prune(ctx, now.Add(-w.opts.Retention), pruneBatch)
		total += n
		if err != nil || n < pruneBatch {
			return err
		}
	}
}

func (w *watchdog) watch(ctx context.Context, now time.Time) error {
	// Just started, the server knows no agent yet: give them three
	// heartbeat intervals to report before any lease lapses. So too
	// after it was strained (admission.go): agents late then may have
	// been late here.
	settled := now.Sub(w.calmSince()) > 3*w.opts.HeartbeatInterval
	online := map[string]bool{}         // the lease holders asked, by id
	records := map[string]store.Agent{} // their records
	isOnline := func(id string) (bool, error) {
		if on, ok := online[id]; ok {
			return on, nil
		}
		a, ok, err := w.store.Agent(ctx, id)
		if err != nil {
			return false, err
		}
		online[id] = ok && a.Online(now, w.opts.HeartbeatInterval)
		if ok {
			records[id] = a
		}
		return online[id], nil
	}
	if !w.store.Shared() || len(w.opts.Notify) > 0 {
		// Every agent, to notice one gone silent (noteOnline): cheap
		// where they are in memory; waiting claims poll a shared store,
		// but people asked to hear of it.
		agents, err := w.store.Agents(ctx)
		if err != nil {
			return err
		}
		for _, a := range agents {
			online[a.View.AgentID] = a.Online(now, w.opts.HeartbeatInterval)
			records[a.View.AgentID] = a
		}
	}
	var due []string
	var unrouted []*state.Task // queued with requirements: routing by capability
	var late []*state.Task     // subtasks whose tree's time ran out (treebudget.go)
	err := w.store.Live(ctx, func(t *state.Task) error {
		if t.Phase == state.PhaseQueued && len(t.Requires) > 0 {
			unrouted = append(unrouted, t)
		}
		if pastTreeDeadline(t, now) {
			late = append(late, t)
		}
		lapse, err := w.lapses(t, now, settled, isOnline)
		if err != nil {
			return err
		}
		if _, ends := state.Watch(t, now, w.opts.Limits); lapse || ends {
			due = append(due, t.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.notifySilent(ctx, online, records)
	w.noteOnline(online)
	requeued := 0
	var ended []string // the agents of the running tasks it ended
	for _, id := range due {
		err := w.rules.update(ctx, []string{id}, func(tx store.Tx) error {
			t := tx.Task(id)
			if t == nil {
				return nil
			}
			changed := false
			if lapse, err := w.lapses(t, now, settled, isOnline); err != nil {
				return err
			} else if lapse {
				w.log.Info("lease lapsed", "task", t.ID, "agent", t.Lease.AgentID)
				if t.Phase == state.PhaseClaimed {
					t.Lease = nil
					t.Transition(state.PhaseQueued, "lease lapsed before the executor started", now)
					requeued++
				} else {
					// Still bound to its agent and lease id: only they
					// take it back (see apply).
					t.Lease.Lapsed = true
				}
				changed = true
			}
			if v, ok := state.Watch(t, now, w.opts.Limits); ok {
				if err := t.Transition(v.Phase, v.Reason, now); err == nil {
					w.log.Info("watchdog", "task", t.ID, "phase", v.Phase, "reason", v.Reason)
					changed = true
					if t.Lease != nil {
						ended = append(ended, t.Lease.AgentID) // its agent stops it at once
					}
				}
			}
			if changed {
				tx.Save(t)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	w.dispatch.wakeClaims(requeued)
	w.dispatch.wakeAgents(ended...)
	if err := w.rules.stopLateSubtasks(ctx, late); err != nil {
		return err
	}
	return w.rules.route(ctx, unrouted, now)
}

// lapses reports whether t's lease lapses now: it expired, and its agent
// is offline.
func (w *watchdog) lapses(t *state.Task, now time.Time, settled bool, isOnline func(string) (bool, error)) (bool, error) {
	if !settled || t.Lease == nil || t.Lease.Lapsed || !now.After(t.Lease.ExpiresAt) || t.Phase.Terminal() {
		return false, nil
	}
	on, err := isOnline(t.Lease.AgentID)
	return !on, err
}

// noteOnline wakes the claims waiting for work when an agent the watchdog
// asked about went offline since it last asked: an available agent gone
// silent leaves its GUI tasks to a degraded one that may be waiting.
func (w *watchdog) noteOnline(online map[string]bool) {
	wake := false
	w.mu.Lock()
	for id, on := range online {
		if was, ok := w.wasOnline[id]; ok && was && !on {
			wake = true
		}
		w.wasOnline[id] = on
	}
	w.mu.Unlock()
	if wake {
		w.dispatch.wakeDegraded()
	}
}
