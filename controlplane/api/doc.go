// Package api is the control plane API (v1, JSON over HTTP) as it goes on
// the wire: the requests and answers of every endpoint, the events an agent
// sends, the task and agent views people read, the error body, and the
// limits both sides keep. It holds types and constants, no behaviour
// beyond checking a value against its set; the client (package
// controlplane) and the reference server (package controlplane/server)
// both speak it, and neither is needed to read it.
//
// Every request carries Authorization: Bearer <token> (CheckToken says
// what a token may be). Events are idempotent by key: the second arrival
// of a key is a duplicate and changes nothing, so an agent can replay its
// outbox freely. A terminal task is final: a late completion is rejected
// with reason terminal, and the agent marks that record dead.
//
// Each closed set of values has a type and one list (AgentStates,
// EventStatuses, ...); the JSON values are the strings the constants
// hold. A decoded value is not checked: a server checks what it takes.
package api
