package agent

import (
	"runtime"
	"slices"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Routing by capability (docs/routing.md): what the agent advertises in
// its heartbeats and claims, and the models a task that requires one runs
// with.

// capabilities are what the agent advertises for routing by capability:
// its executor kind, the models of its live configuration, its OS and
// arch.
func (a *Agent) capabilities() api.Capabilities {
	return api.Capabilities{Executor: a.cfg.ExecutorKind, Models: slices.Clone(a.live.Load().Models), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// modelsFor is the model chain task t runs with: a task that requires a
// model (routing by capability: the control plane granted it because the
// agent's list has it) runs every attempt with that one; any other, the
// agent's chain.
func modelsFor(chain []string, t *state.Task) []string {
	for _, r := range t.Requires {
		if r.Key() == state.RequireModel && slices.Contains(chain, r.Value()) {
			return []string{r.Value()}
		}
	}
	return chain
}
