// Package server is the reference control plane (`agent controlplane
// serve`): the API of package api over HTTP, with its tasks, agents and
// events kept in a directory of its own. It is a reference, not a fleet
// server: one process, one lock, every task in memory. The rules it keeps
// are the ones production control planes are expected to follow.
//
// What it promises:
//
//   - Idempotent by key: an event whose key was accepted before is a
//     duplicate and changes nothing (keys.go says how long keys are kept).
//   - Terminal is final: a late completion or phase for an ended task is
//     rejected (terminal), except the completion that follows the agent's
//     own terminal phase, from that agent under its lease.
//   - Nothing it answered as accepted is lost by a crash: events are
//     stored and synced before the answer, and a start repairs a torn last
//     line and applies again what a crash left unapplied (store.go).
//   - Leases: a claim grants one (Options.Lease); a heartbeat that lists
//     the task, or an accepted event, renews it; an agent silent for three
//     heartbeat intervals is offline and its leases lapse (watchdog.go).
//   - Health-aware claims: a task that prefers the GUI goes to an
//     available agent when one is online (claim.go).
//   - Each credential does its own job only: people's operator tokens,
//     agents' own tokens, and the registration secret, which only enrols
//     (auth.go, registry.go); failed authentication is throttled per
//     address.
//   - Bounded against one task or client: titles and prompts are capped
//     (api.MaxTitleRunes, api.MaxPromptBytes), and so is the log output
//     stored per attempt (Options.MaxAttemptOutput; past it, lines are
//     counted and one event marks the cut, output.go); the lists come in
//     pages written a piece at a time (pages.go); events stay on disk, and
//     the keys of ended tasks leave memory.
//
// Its files: routes.go (the endpoints and who may use each), auth.go,
// registry.go (agents' tokens), tasks.go (people's requests), heartbeat.go,
// claim.go, accept.go (POST /v1/events: applying events), watchdog.go,
// store.go (the events files), keys.go, pages.go, output.go (output caps),
// figures.go (figures for metrics), crash.go (the fault suite's crash
// points).
package server
