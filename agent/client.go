package agent

import (
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/datadir"
)

// agentClient is agent id's client: its own control plane token is the one
// kept in the data directory, registered (with the shared token) when
// there is none or the control plane no longer knows it.
func agentClient(l datadir.Layout, url, sharedToken string, insecure bool, version, id string) (*controlplane.Client, error) {
	return controlplane.NewClient(url, sharedToken, controlplane.ClientOptions{
		Insecure: insecure, UserAgent: "agent/" + version, Timeout: 30 * time.Second,
		AgentID: id, AgentToken: l.ReadAgentToken(),
		SaveAgentToken: l.SaveAgentToken})
}
