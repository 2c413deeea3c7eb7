package server

import (
	"context"
	"time"

	"github.com/edgeagent/agent/state"
)

// RunWatchdog runs the watchdog every period until ctx is done. The
// watchdog also runs on every claim, event batch and heartbeat.
func (s *Server) RunWatchdog(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			s.watchdog(s.opts.Now())
			s.mu.Unlock()
		}
	}
}

// watchdog applies the rules: tasks queued too long expire, stalled tasks
// end, and the leases of offline agents lapse (a task still only claimed
// goes back to the queue). mu is held.
func (s *Server) watchdog(now time.Time) {
	defer s.dropKeys(now)
	// Just started, the server knows no agent yet: give them three
	// heartbeat intervals to report before any lease lapses.
	settled := now.Sub(s.started) > 3*s.opts.HeartbeatInterval
	for _, a := range s.agents {
		// An available agent gone silent leaves its GUI tasks to a
		// degraded one that may be waiting for work.
		online := a.online(now, s.opts.HeartbeatInterval)
		if a.wasOnline && !online {
			s.wakeClaims()
		}
		a.wasOnline = online
	}
	for _, t := range s.tasks {
		changed := false
		if settled && t.Lease != nil && !t.Lease.Lapsed && now.After(t.Lease.ExpiresAt) && !t.Phase.Terminal() {
			if a := s.agents[t.Lease.AgentID]; a == nil || !a.online(now, s.opts.HeartbeatInterval) {
				s.log.Info("lease lapsed", "task", t.ID, "agent", t.Lease.AgentID)
				if t.Phase == state.PhaseClaimed {
					t.Lease = nil
					t.Transition(state.PhaseQueued, "lease lapsed before the executor started", now)
				} else {
					// Still bound to its agent and lease id: only they
					// take it back (see apply).
					t.Lease.Lapsed = true
				}
				changed = true
			}
		}
		if v, ok := state.Watch(t, now, s.opts.Limits); ok {
			if err := t.Transition(v.Phase, v.Reason, now); err == nil {
				s.log.Info("watchdog", "task", t.ID, "phase", v.Phase, "reason", v.Reason)
				changed = true
			}
		}
		if changed {
			s.save(t)
		}
	}
}
