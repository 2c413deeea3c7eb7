package agent

import (
	"slices"
	"testing"

	"github.com/edgeagent/agent/state"
)

// A task that requires a model runs every attempt with it; any other
// task, with the agent's chain.
func TestModelsForATaskThatRequiresOne(t *testing.T) {
	t.Parallel()
	chain := []string{"gpt-5-mini", "gpt-5"}
	for _, c := range []struct {
		requires []state.Requirement
		want     []string
	}{
		{nil, chain},
		{[]state.Requirement{"label=gpu"}, chain},
		{[]state.Requirement{"executor=codex", "model=gpt-5"}, []string{"gpt-5"}},
		{[]state.Requirement{"model=gpt-4"}, chain}, // not the agent's: the control plane would not have granted it
	} {
		if got := modelsFor(chain, &state.Task{Requires: c.requires}); !slices.Equal(got, c.want) {
			t.Errorf("requires %v: models %v, want %v", c.requires, got, c.want)
		}
	}
}
