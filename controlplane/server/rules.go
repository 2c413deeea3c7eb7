package server

import (
	"log/slog"
	"sync"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
)

// rules are how the control plane's requests change the tasks and agents:
// events, submissions, answers, retries, subtasks, budgets, claims'
// grants, heartbeats, routing, and the notifications a change writes.
// Each change is one store transaction on the tasks it touches; nothing
// here knows of HTTP: the Server's handlers and the console's backend
// call these methods and answer what they return (a *ruleError says
// the kind of refusal, errors.go; the HTTP layer its status).
type rules struct {
	opts  *Options
	log   *slog.Logger
	store store.Store

	// taskKey signs task tokens (tasktoken.go), linkKey approval links
	// (approvallink.go).
	taskKey, linkKey []byte

	// dispatch is woken when a change may let a waiting claim take a
	// task, or a task an agent runs is to stop; watchdog runs on
	// requests too, at most once a second (watchEvery).
	dispatch *dispatch
	watchdog *watchdog

	mu sync.Mutex
	// eventResults counts the events answered, by status, for metrics.
	eventResults map[api.EventStatus]uint64
}
