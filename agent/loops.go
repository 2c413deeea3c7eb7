package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/datadir"

	"github.com/edgeagent/agent/internal/utc"
)

// Batch limits of one delivery.
const (
	sendBatchRecords = api.MaxEventsPerBatch
	sendBatchBytes   = api.MaxBatchBytes - 64<<10 // room for the envelope
	// loopTick wakes idle loops, so the service watchdog sees them alive.
	loopTick = 5 * time.Second
)

// sendLoop delivers pending records whenever something is appended, on
// every heartbeat that gets through (a replay, which also ends a backoff),
// and on its own backoff after a failure. It retries forever: the records
// are on disk, and the wait grows from 500 ms to SendBackoffMax, with
// jitter, while the control plane is unreachable.
func (a *Agent) sendLoop(ctx context.Context) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.RandomizationFactor = 500*time.Millisecond, a.cfg.SendBackoffMax, 0.5
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	tick := time.NewTicker(loopTick)
	defer tick.Stop()
	waiting := false // a retry is scheduled: kicks wait for it
	for {
		a.sendTick.Store(time.Now().UnixNano())
		select {
		case <-ctx.Done():
			retry.Stop()
			return
		case <-tick.C:
			continue
		case <-a.kickSend:
			if waiting {
				continue
			}
		case <-a.replay:
			// A heartbeat got through: the control plane is back, so the
			// backoff is over and pending records go now.
			retry.Stop()
			waiting = false
			b.Reset()
		case <-retry.C:
			waiting = false
		}
		if err := a.sender.drain(ctx, nil); err != nil {
			if controlplane.Refused(err) {
				a.die(err)
				return
			}
			if ctx.Err() != nil {
				return // stopping: not a failure worth a warning
			}
			d := b.NextBackOff()
			a.log.Warn("delivery failed; records stay pending", "err", err, "retry_in", d.Round(time.Millisecond))
			retry.Reset(d)
			waiting = true
		} else {
			b.Reset() // nothing left pending
		}
	}
}

// heartbeatLoop reports the agent every interval (the control plane may
// change it). Each heartbeat carries the executor's health, the running
// tasks and the outbox figures; its answer names tasks to cancel. Each one
// also replays pending records and lets the claimer look for work. A failed
// heartbeat is not retried on its own: the next one comes an interval
// later.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for first := true; ; first = false {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-a.replies.wake:
			timer.Stop()
		}
		a.beatTick.Store(time.Now().UnixNano())
		if err := a.outbox.CheckLock(); err != nil {
			a.die(err) // two writers on one outbox would lose records
			return
		}
		a.probe(ctx)
		if st := a.held.status(); st.Failing != "" {
			if a.held.flush(a.outbox, a.store) {
				a.log.Info("writes work again: held reports and task states are written", "reports", st.HeldReports, "tasks", st.HeldTasks)
				a.kick(a.kickSend)
			} else {
				a.log.Warn("writes still fail: reports held in memory, claiming nothing", "reason", st.Failing, "held", st.HeldReports)
			}
		}
		req := a.heartbeatRequest()
		sentAt := time.Now()
		resp, err := a.client.Heartbeat(ctx, req)
		a.obs.Heartbeat(time.Since(sentAt), err == nil)
		a.cfg.Notify(serviceStatus(req, err == nil))
		a.mu.Lock()
		wasReached := a.reached
		a.reached = err == nil
		interval := a.interval
		a.mu.Unlock()
		switch {
		case controlplane.Refused(err):
			a.die(err)
			return
		case err != nil && ctx.Err() == nil:
			// Said once when the control plane goes away, not every beat.
			if wasReached || first {
				a.log.Warn("heartbeat failed; the control plane seems unreachable, records stay pending", "err", err)
			}
		case err == nil:
			if !wasReached {
				a.log.Info("control plane reached", "url", a.client.URL())
			}
			if d, asked := a.clampInterval(resp.HeartbeatIntervalS); d != interval {
				if asked != d {
					a.log.Warn("heartbeat interval from the control plane is out of bounds; clamped", "asked", asked, "using", d)
				}
				a.mu.Lock()
				a.interval, interval = d, d
				a.mu.Unlock()
			}
			for _, id := range resp.Cancel {
				a.cancelTask(id)
			}
			a.replies.deliver(resp.Replies)
		}
		a.writeHealth(err == nil)
		if err == nil {
			a.kick(a.replay)
			a.kick(a.kickClaim)
		}
		if a.replies.any() {
			// A person's answer is awaited: ask for it often.
			interval = min(interval, replyBeat)
		}
		timer.Reset(interval)
	}
}

// The heartbeat interval a control plane may set: not so short that the
// agent spins, not so long that it goes silent.
const (
	minBeat = time.Second
	maxBeat = 5 * time.Minute
)

// clampInterval takes the control plane's interval within [minBeat,
// maxBeat] (or below minBeat when the agent's own interval is, as in
// tests). It returns the interval to use and the one asked for.
func (a *Agent) clampInterval(seconds float64) (use, asked time.Duration) {
	switch {
	case seconds != seconds || seconds <= 0: // NaN, or nothing said
		return a.cfg.HeartbeatInterval, a.cfg.HeartbeatInterval
	case seconds > maxBeat.Seconds(): // and beyond what a Duration holds
		return maxBeat, time.Duration(min(seconds, 1e9) * float64(time.Second))
	}
	asked = time.Duration(seconds * float64(time.Second))
	return min(max(asked, min(minBeat, a.cfg.HeartbeatInterval)), maxBeat), asked
}

// replyBeat is the heartbeat interval while an attempt awaits a person's
// answer.
const replyBeat = time.Second

// probe checks an unavailable executor again when a probe is due.
func (a *Agent) probe(ctx context.Context) {
	if !a.health.ProbeDue() {
		return
	}
	exe := a.live.Load().Executor
	if err := exe.Probe(ctx); err != nil {
		a.health.Observe(health.StartFailure, err.Error())
		return
	}
	a.health.Observe(health.ProbeOK, "")
	a.log.Info("executor can start again", "executor", exe.Name())
}

func (a *Agent) heartbeatRequest() api.HeartbeatRequest {
	snap := a.health.Snapshot()
	h := api.Health{Grade: snap.Grade, Reason: snap.Reason, Since: snap.Since, Isolation: snap.Isolation,
		RecentErrors: []api.HealthProblem{}}
	storage := a.held.status()
	if storage.Failing != "" {
		// The agent cannot keep what it is given: no better than degraded,
		// whatever the executor's health.
		if snap.Grade == health.Available {
			h.Grade, h.Since = health.Degraded, storage.Since
		}
		h.Reason = storage.Failing
	}
	for _, p := range snap.RecentErrors {
		h.RecentErrors = append(h.RecentErrors, api.HealthProblem{At: p.At, Signal: p.Signal, Detail: p.Detail})
	}
	st := a.outbox.Stats()
	req := api.HeartbeatRequest{AgentID: a.id, Hostname: a.host, Version: a.cfg.Version, StartedAt: a.started, Health: h,
		Outbox: api.OutboxStats{Pending: st.Pending, OldestPendingAgeS: st.OldestPendingAge, Dead: st.Dead, Bytes: st.FileBytes,
			WriteFailing: storage.Failing, Held: storage.HeldReports},
		Running: []api.RunningTask{}}
	a.mu.Lock()
	for id, s := range a.running {
		req.Running = append(req.Running, api.RunningTask{TaskID: id, Attempt: s.attempt, Phase: s.phase, LastProgressAt: s.lastProgress})
	}
	if a.stopping {
		req.State = api.AgentDraining // claims nothing, finishes what it runs
	} else {
		req.State = api.AgentRunning
	}
	a.mu.Unlock()
	req.Capacity = api.Capacity{Max: a.live.Load().MaxConcurrent, Running: len(req.Running)}
	return req
}

// serviceStatus is the one line a service manager shows for the agent
// (sd_notify STATUS=, in systemctl status).
func serviceStatus(req api.HeartbeatRequest, reached bool) string {
	cp := "control plane reachable"
	if !reached {
		cp = "control plane unreachable"
	}
	return fmt.Sprintf("STATUS=%s: %d of %d tasks running, %d records pending, executor %s, %s",
		req.State, req.Capacity.Running, req.Capacity.Max, req.Outbox.Pending, req.Health.Grade, cp)
}

// writeHealth records the health for `agent health`.
func (a *Agent) writeHealth(reached bool) {
	cp := "reachable"
	if !reached {
		cp = "unreachable"
	}
	h := datadir.HealthFile{Snapshot: a.health.Snapshot(), AgentID: a.id, UpdatedAt: utc.Now(), ControlPlane: cp, Storage: a.held.status()}
	if err := a.layout.WriteHealth(h); err != nil {
		a.log.Warn("write health file", "err", err)
	}
}

// claimBlocked says why the agent claims nothing now, or "".
func claimBlocked(free int, stopping, reached bool, grade health.Grade, diskFailing string) string {
	switch {
	case stopping:
		return "draining"
	case free <= 0:
		return "no room: every slot runs a task"
	case !reached:
		return "the control plane is unreachable"
	case grade == health.Unavailable:
		return "the executor is unavailable"
	case diskFailing != "":
		// A failing disk could not keep what a task reports.
		return "writes fail: " + diskFailing
	}
	return ""
}

// claimLoop asks for work when a heartbeat got through or a task ended,
// while there is room, the executor is not unavailable and the agent is not
// stopping. Each claim carries an id; a claim whose answer did not come
// (the control plane may have granted it) is asked again with the same
// id, which gets the same grant, before anything else is claimed. A grant
// larger than asked for, or a task that cannot be saved, is released back
// to the queue.
func (a *Agent) claimLoop(ctx context.Context) {
	tick := time.NewTicker(loopTick)
	defer tick.Stop()
	claimID := "" // a claim whose answer did not come
	lastBlocked := ""
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		a.claimTick.Store(time.Now().UnixNano())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			continue
		case <-a.kickClaim:
		case <-retry.C:
		}
		a.mu.Lock()
		free, stopping, reached := a.live.Load().MaxConcurrent-len(a.running), a.stopping, a.reached
		a.mu.Unlock()
		grade := a.health.Grade()
		if why := claimBlocked(free, stopping, reached, grade, a.held.status().Failing); why != "" {
			if why != lastBlocked {
				a.log.Debug("not claiming", "why", why)
			}
			lastBlocked = why
			continue
		}
		lastBlocked = ""
		if claimID == "" {
			claimID = newClaimID()
		}
		resp, err := a.client.Claim(ctx, api.ClaimRequest{AgentID: a.id, Max: free, HealthGrade: grade, RequestID: claimID})
		if err != nil {
			if controlplane.Refused(err) {
				a.die(err)
				return
			}
			if ctx.Err() == nil {
				a.log.Warn("claim failed; it is asked again with the same id", "claim", claimID, "err", err, "retry_in", claimRetry)
			}
			// The control plane may have granted it: ask again soon, not
			// only at the next heartbeat.
			retry.Reset(claimRetry)
			continue
		}
		a.log.Debug("claim answered", "claim", claimID, "asked", free, "granted", len(resp.Tasks), "health", grade)
		claimID = ""
		var release []string
		for i, c := range resp.Tasks {
			t := c.Task
			lease := c.Lease
			t.Lease = &lease
			if i >= free || a.isRunning(t.ID) {
				release = append(release, t.ID)
				continue
			}
			if err := a.store.Save(&t); err != nil {
				a.log.Error("save claimed task; releasing it", "task", t.ID, "err", err)
				release = append(release, t.ID)
				continue
			}
			a.log.Info("task claimed", "task", t.ID, "title", t.Title)
			a.supervise(a.tasksCtx, &t)
		}
		if len(release) > 0 {
			a.log.Warn("releasing claimed tasks this agent will not run", "tasks", release)
			if err := a.client.Release(ctx, a.id, release); err != nil && ctx.Err() == nil {
				a.log.Warn("release failed; the control plane requeues them when they stay out of heartbeats", "err", err)
			}
		}
	}
}

// claimRetry is the wait before a claim whose answer did not come is asked
// again.
const claimRetry = time.Second

// isRunning reports whether the agent runs task id.
func (a *Agent) isRunning(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running[id] != nil
}

// newClaimID makes a claim's id.
func newClaimID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "claim-" + hex.EncodeToString(b)
}

// watchdogLoop pings the service manager's watchdog at half its interval,
// but only while the agent's own loops are alive: a loop that has not
// ticked within the interval stops the pings, and the service manager
// restarts the agent.
func (a *Agent) watchdogLoop(ctx context.Context) {
	tick := time.NewTicker(a.cfg.WatchdogInterval / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.mu.Lock()
		interval := a.interval
		a.mu.Unlock()
		now := time.Now().UnixNano()
		limit := int64(max(a.cfg.WatchdogInterval, interval+loopTick))
		if now-a.sendTick.Load() < limit && now-a.beatTick.Load() < limit && now-a.claimTick.Load() < limit {
			a.cfg.Notify("WATCHDOG=1")
		}
	}
}
