package tasksource

import (
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// Shown is a task as tasks show --json prints it: the task as every
// command shows one (api.ViewOf), its progress card beside it too (where
// scripts have read it), and its attempt timeline.
type Shown struct {
	Task         api.TaskView `json:"task"`
	ProgressCard []state.Step `json:"progress_card"`
	Timeline     []string     `json:"timeline"`
}

// ShownOf is t as shown at now.
func ShownOf(t *state.Task, now time.Time) Shown {
	v := api.ViewOf(t)
	return Shown{Task: v, ProgressCard: v.ProgressCard, Timeline: state.Timeline(t, now)}
}
