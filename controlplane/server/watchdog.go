package server

import (
	"context"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// watchEvery is how often the watchdog looks, at most: on requests, and
// by RunWatchdog's ticker.
const watchEvery = time.Second

// RunWatchdog runs the watchdog every period until ctx is done. The
// watchdog also runs on claims, event batches and heartbeats, at most once
// a second.
func (s *Server) RunWatchdog(ctx context.Context, period time.Duration) {
	tick(ctx, period, func() { s.watchdog(ctx) })
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
func (s *Server) watchdog(ctx context.Context) {
	// Run on a heartbeat, it is not one: its store calls wait their turn.
	ctx = store.WithPriority(ctx, false)
	now := s.opts.Now()
	s.mu.Lock()
	due := s.lastWatch.IsZero() || now.Sub(s.lastWatch) >= watchEvery || now.Before(s.lastWatch)
	if due {
		s.lastWatch = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	if lead, err := s.store.Lead(ctx); err != nil || !lead {
		if err != nil {
			s.log.Warn("watchdog: the store did not say who leads", "err", err)
		}
		return
	}
	if err := s.watch(ctx, now); err != nil {
		s.log.Warn("watchdog", "err", err)
	}
	if err := s.prune(ctx, now); err != nil {
		s.log.Warn("retention: removing ended tasks", "err", err)
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
func (s *Server) prune(ctx context.Context, now time.Time) error {
	if s.opts.Retention <= 0 {
		return nil
	}
	s.mu.Lock()
	due := s.lastPrune.IsZero() || now.Sub(s.lastPrune) >= pruneEvery || now.Before(s.lastPrune)
	if due {
		s.lastPrune = now
	}
	s.mu.Unlock()
	if !due {
		return nil
	}
	total := 0
	defer func() {
		if total > 0 {
			s.log.Info("retention: ended tasks removed", "tasks", total, "ended_before", now.Add(-s.opts.Retention).Format(time.RFC3339))
		}
	}()
	for {
		n, err := s.store.Prune(ctx, now.Add(-s.opts.Retention), pruneBatch)
		total += n
		if err != nil || n < pruneBatch {
			return err
		}
	}
}

func (s *Server) watch(ctx context.Context, now time.Time) error {
	// Just started, the server knows no agent yet: give them three
	// heartbeat intervals to report before any lease lapses. So too
	// after it was strained (admission.go): agents late then may have
	// been late here.
	settled := now.Sub(s.calmSince()) > 3*s.opts.HeartbeatInterval
	online := map[string]bool{}         // the lease holders asked, by id
	records := map[string]store.Agent{} // their records
	isOnline := func(id string) (bool, error) {
		if on, ok := online[id]; ok {
			return on, nil
		}
		a, ok, err := s.store.Agent(ctx, id)
		if err != nil {
			return false, err
		}
		online[id] = ok && a.Online(now, s.opts.HeartbeatInterval)
		if ok {
			records[id] = a
		}
		return online[id], nil
	}
	if !s.store.Shared() || len(s.opts.Notify) > 0 {
		// Every agent, to notice one gone silent (noteOnline): cheap
		// where they are in memory; waiting claims poll a shared store,
		// but people asked to hear of it.
		agents, err := s.store.Agents(ctx)
		if err != nil {
			return err
		}
		for _, a := range agents {
			online[a.View.AgentID] = a.Online(now, s.opts.HeartbeatInterval)
			records[a.View.AgentID] = a
		}
	}
	var due []string
	var unrouted []*state.Task // queued with requirements: routing by capability
	var late []*state.Task     // subtasks whose tree's time ran out (treebudget.go)
	err := s.store.Live(ctx, func(t *state.Task) error {
		if t.Phase == state.PhaseQueued && len(t.Requires) > 0 {
			unrouted = append(unrouted, t)
		}
		if pastTreeDeadline(t, now) {
			late = append(late, t)
		}
		lapse, err := s.lapses(t, now, settled, isOnline)
		if err != nil {
			return err
		}
		if _, ends := state.Watch(t, now, s.opts.Limits); lapse || ends {
			due = append(due, t.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.notifySilent(ctx, online, records)
	s.noteOnline(online)
	requeued := 0
	var ended []string // the agents of the running tasks it ended
	for _, id := range due {
		err := s.update(ctx, []string{id}, func(tx store.Tx) error {
			t := tx.Task(id)
			if t == nil {
				return nil
			}
			changed := false
			if lapse, err := s.lapses(t, now, settled, isOnline); err != nil {
				return err
			} else if lapse {
				s.log.Info("lease lapsed", "task", t.ID, "agent", t.Lease.AgentID)
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
			if v, ok := state.Watch(t, now, s.opts.Limits); ok {
				if err := t.Transition(v.Phase, v.Reason, now); err == nil {
					s.log.Info("watchdog", "task", t.ID, "phase", v.Phase, "reason", v.Reason)
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
	s.wakeClaims(requeued)
	s.wakeAgents(ended...)
	if err := s.stopLateSubtasks(ctx, late); err != nil {
		return err
	}
	return s.route(ctx, unrouted, now)
}

// lapses reports whether t's lease lapses now: it expired, and its agent
// is offline.
func (s *Server) lapses(t *state.Task, now time.Time, settled bool, isOnline func(string) (bool, error)) (bool, error) {
	if !settled || t.Lease == nil || t.Lease.Lapsed || !now.After(t.Lease.ExpiresAt) || t.Phase.Terminal() {
		return false, nil
	}
	on, err := isOnline(t.Lease.AgentID)
	return !on, err
}

// noteOnline wakes the claims waiting for work when an agent the watchdog
// asked about went offline since it last asked: an available agent gone
// silent leaves its GUI tasks to a degraded one that may be waiting.
func (s *Server) noteOnline(online map[string]bool) {
	wake := false
	s.mu.Lock()
	for id, on := range online {
		if was, ok := s.wasOnline[id]; ok && was && !on {
			wake = true
		}
		s.wasOnline[id] = on
	}
	s.mu.Unlock()
	if wake {
		s.wakeDegraded()
	}
}
