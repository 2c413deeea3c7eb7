package agent

import (
	"log/slog"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/datadir"
)

// agentClient is agent id's client: its own control plane token is the one
// kept in the data directory, registered (with the shared token) when
// there is none or the control plane no longer knows it. url may name
// several replicas (URL1,URL2: see controlplane.NewClient); moving from
// one to the next is logged on log, when there is one.
func agentClient(l datadir.Layout, url, sharedToken string, insecure bool, version, id string, log *slog.Logger) (*controlplane.Client, error) {
	opts := controlplane.ClientOptions{
		Insecure: insecure, UserAgent: "agent/" + version, Timeout: 30 * time.Second,
		AgentID: id, AgentToken: l.ReadAgentToken(),
		SaveAgentToken: l.SaveAgentToken}
	if log != nil {
		opts.Moved = func(from, to string, why error) {
			log.Warn("control plane replica did not answer; moved to the next, and staying there while it answers", "from", from, "to", to, "err", why)
		}
	}
	return controlplane.NewClient(url, sharedToken, opts)
}
