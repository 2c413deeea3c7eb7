package agent

import (
	"fmt"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/utc"
)

// heartbeatRequest is what a heartbeat says of the agent now.
func (a *Agent) heartbeatRequest() api.HeartbeatRequest {
	h := a.health.Snapshot()
	storage := a.held.status()
	if storage.Failing != "" {
		// The agent cannot keep what it is given: no better than degraded,
		// whatever the executor's health.
		if h.Grade == health.Available {
			h.Grade, h.Since = health.Degraded, storage.Since
		}
		h.Reason = storage.Failing
	}
	st := a.outbox.Stats()
	req := api.HeartbeatRequest{AgentID: a.id, Hostname: a.host, Version: a.cfg.Version, StartedAt: a.started, Health: h,
		Outbox: api.OutboxStats{Pending: st.Pending, OldestPendingAgeS: st.OldestPendingAge, Dead: st.Dead, Bytes: st.FileBytes,
			WriteFailing: storage.Failing, Held: storage.HeldReports},
		Repos: repoNames(a.cfg.Repos), Labels: a.cfg.Labels, Capabilities: a.capabilities(),
	}
	req.Running, req.State = a.running.report()
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
	if len(a.client.URLs()) > 1 {
		cp += " at " + a.client.URL() // which replica, of several
	}
	h := datadir.HealthFile{Snapshot: a.health.Snapshot(), AgentID: a.id, UpdatedAt: utc.Now(), ControlPlane: cp, Storage: a.held.status(),
		Workspaces: a.usage.Load(), PublicURL: a.link.PublicURL(), Starts: datadir.StartQueue(a.starts.Figures())}
	if err := a.layout.WriteHealth(h); err != nil {
		a.log.Warn("write health file", "err", err)
	}
}
