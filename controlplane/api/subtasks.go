package api

import (
	"fmt"
	"sort"
	"strings"
)

// Subtasks: a task's executor holds a credential scoped to its own task,
// the task token, with which it submits children of its task (POST
// /v1/tasks/{id}/subtasks), lists them (GET /v1/tasks/{id}/subtasks),
// reads them and their events, and cancels them; nothing else. The
// control plane hands it out with each grant (Claimed.TaskToken) and
// keeps none: it is an HMAC of the task's id and lease id, good while the
// task has not ended and holds that lease.

// TaskTokenPrefix starts every task token, so that it is never taken for
// another principal's.
const TaskTokenPrefix = "tt_"

// PrincipalTask is a task's executor, holding its task token.
const PrincipalTask Principal = "task"

// The environment the agent gives an executor for subtasks: the task
// token, the control plane's address, and the agent binary (also on the
// executor's PATH) whose `agent subtask` commands use them.
const (
	EnvTaskToken    = "AGENT_TASK_TOKEN"
	EnvControlPlane = "AGENT_CONTROL_PLANE"
	EnvAgentBin     = "AGENT_BIN"
)

// LabelsText writes labels as KEY=VALUE pairs, sorted, comma-separated;
// "none" when there are none.
func LabelsText(labels map[string]string) string {
	if len(labels) == 0 {
		return "none"
	}
	pairs := make([]string, 0, len(labels))
	for k, v := range labels {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// ParseLabels reads KEY=VALUE pairs as labels, checked by CheckLabels.
func ParseLabels(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	labels := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want KEY=VALUE", p)
		}
		labels[k] = v
	}
	return labels, CheckLabels(labels)
}
