package agent

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// heartbeat reports the agent every interval (the control plane may
// change it). Each heartbeat carries the executor's health, the running
// tasks and the outbox figures; its answer names tasks to cancel. Each one
// also replays pending records and lets the claimer look for work. A failed
// heartbeat is not retried on its own: the next one comes an interval
// later. It fails when the control plane refuses the agent, and when the
// outbox's lock is no longer the agent's.
type heartbeat struct {
	client  *controlplane.Client
	outbox  *outbox.Outbox
	store   *state.Store
	held    *holdback
	health  *health.Tracker
	live    *atomic.Pointer[Live]
	replies *replies
	link    *link
	obs     observer
	log     *slog.Logger
	notify  func(string)                // Config.Notify
	base    time.Duration               // Config.HeartbeatInterval
	request func() api.HeartbeatRequest // what the agent is, now
	cancel  func(api.CancelOrder)
	stop    func(api.StopOrder)   // a task over its tree's budget
	wake    func(api.ResumeOrder) // a parked task a person continued, or whose budget they raised
	record  func(reached bool)    // writes the health file
	// outputCap keeps the output cap the control plane says it keeps
	// (see outputBounds).
	outputCap *atomic.Int64

	sendNow, replay, claimNow chan<- struct{}
	alive                     atomic.Int64 // when it last went round, for the watchdog
}

func (h *heartbeat) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for first := true; ; first = false {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-h.replies.wake:
			timer.Stop()
		}
		h.alive.Store(time.Now().UnixNano())
		if err := h.outbox.CheckLock(); err != nil {
			return err // two writers on one outbox would lose records
		}
		h.probe(ctx)
		if st := h.held.status(); st.Failing != "" {
			if h.held.flush(h.outbox, h.store) {
				h.log.Info("writes work again: held reports and task states are written", "reports", st.HeldReports, "tasks", st.HeldTasks)
				kick(h.sendNow)
			} else {
				h.log.Warn("writes still fail: reports held in memory, claiming nothing", "reason", st.Failing, "held", st.HeldReports)
			}
		}
		req := h.request()
		sentAt := time.Now()
		resp, err := h.client.Heartbeat(ctx, req)
		h.obs.Heartbeat(time.Since(sentAt), err == nil)
		h.notify(serviceStatus(req, err == nil))
		wasReached, interval := h.link.beat(err == nil)
		switch {
		case controlplane.Refused(err):
			return err
		case err != nil && ctx.Err() == nil:
			// Said once when the control plane goes away, not every beat.
			if wasReached || first {
				h.log.Warn("heartbeat failed; the control plane seems unreachable, records stay pending", "err", err)
			}
		case err == nil:
			if !wasReached {
				h.log.Info("control plane reached", "url", h.client.URL())
			}
			if d, asked := h.clampInterval(resp.HeartbeatIntervalS); d != interval {
				if asked != d {
					h.log.Warn("heartbeat interval from the control plane is out of bounds; clamped", "asked", asked, "using", d)
				}
				h.link.setInterval(d)
				interval = d
			}
			if h.outputCap != nil {
				h.outputCap.Store(resp.MaxAttemptOutputBytes)
			}
			obey(resp.CancelOrders, resp.Stop, resp.Cancel, h.cancel, h.stop)
			if h.wake != nil {
				for _, o := range resp.Resume {
					h.wake(o)
				}
			}
			h.replies.deliver(resp.Replies)
			h.link.setPublicURL(publicURL(resp.PublicURL))
		}
		if err == nil || ctx.Err() == nil {
			// A beat cut short by the agent's own stop says nothing of
			// whether the control plane can be reached.
			h.record(err == nil)
		}
		if err == nil {
			kick(h.replay)
			kick(h.claimNow)
		}
		if h.replies.any() {
			// A person's answer is awaited: ask for it often.
			interval = min(interval, replyBeat)
		}
		timer.Reset(interval)
	}
}

// obey carries out a control plane's orders: stops, then cancels, each
// with the phase and reason the control plane gives; a task Cancel names
// with no order (a control plane from before orders) is cancelled with
// a reason that says where the cancel came from. A nil function leaves
// its orders alone.
func obey(orders []api.CancelOrder, stops []api.StopOrder, ids []string, cancel func(api.CancelOrder), stop func(api.StopOrder)) {
	if cancel == nil {
		cancel = func(api.CancelOrder) {}
	}
	if stop == nil {
		stop = func(api.StopOrder) {}
	}
	done := map[string]bool{}
	for _, o := range stops {
		stop(o)
		done[o.TaskID] = true
	}
	for _, o := range orders {
		if !done[o.TaskID] {
			cancel(o)
			done[o.TaskID] = true
		}
	}
	for _, id := range ids {
		if !done[id] { // Cancel names them all, for agents from before orders
			cancel(api.CancelOrder{TaskID: id, Phase: state.PhaseCancelled, Reason: "cancelled at the control plane's word"})
		}
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
func (h *heartbeat) clampInterval(seconds float64) (use, asked time.Duration) {
	switch {
	case seconds != seconds || seconds <= 0: // NaN, or nothing said
		return h.base, h.base
	case seconds > maxBeat.Seconds(): // and beyond what a Duration holds
		return maxBeat, time.Duration(min(seconds, 1e9) * float64(time.Second))
	}
	asked = time.Duration(seconds * float64(time.Second))
	return min(max(asked, min(minBeat, h.base)), maxBeat), asked
}

// replyBeat is the heartbeat interval while an attempt awaits a person's
// answer.
const replyBeat = time.Second

// probe checks an unavailable executor again when a probe is due.
func (h *heartbeat) probe(ctx context.Context) {
	if !h.health.ProbeDue() {
		return
	}
	exe := h.live.Load().Executor
	if err := exe.Probe(ctx); err != nil {
		h.health.Observe(health.StartFailure, err.Error())
		return
	}
	h.health.Observe(health.ProbeOK, "")
	h.log.Info("executor can start again", "executor", exe.Name())
}

// publicURL is the console's address a heartbeat's answer gave, if it is
// an absolute http(s) URL and nothing else: it goes into the links of
// pull requests.
func publicURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		strings.ContainsAny(raw, " \t\r\n<>\"`()[]") {
		return ""
	}
	return raw
}
