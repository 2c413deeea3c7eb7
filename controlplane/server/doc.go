// Package server is the reference control plane (`agent controlplane
// serve`): the API of package api over HTTP, its rules over a store that
// keeps the tasks, events and agents (package store), which its opener
// hands in: a directory of its own (filestore, one process), or
// PostgreSQL (pgstore), which any number of replicas share. It imports
// neither: a store that a crash may leave behind its events
// (store.Recoverer) is brought up to date by New, through the rules.
// Every change is one store transaction on the tasks it touches (the
// store numbers a task's events: Tx.LastSeq, its own bookkeeping, never
// the task's); a task goes on the wire as api.TaskView, made at the edge
// (api.ViewOf); each room's own lock guards only what one process keeps
// for itself (the claims waiting for work, counters).
//
// What it promises:
//
//   - Idempotent by key: an event whose key was accepted before is a
//     duplicate and changes nothing (the store keeps the keys: Tx.Seen).
//   - Terminal is final: a late completion or phase for an ended task is
//     rejected (terminal), except the completion that follows the agent's
//     own terminal phase, from that agent under its lease.
//   - Nothing it answered as accepted is lost by a crash: events are
//     stored and synced before the answer (a file store's start applies
//     again what a crash left unapplied: rules.replay).
//   - One watchdog across replicas: it runs where the store says it leads
//     (store.Lead), and decides again in each task's transaction, so a
//     pass done twice changes nothing twice (watchdog.go). It also
//     removes the tasks ended longer ago than Options.Retention.
//   - Leases: a claim grants one (Options.Lease); a heartbeat that lists
//     the task, or an accepted event, renews it; an agent silent for three
//     heartbeat intervals is offline and its leases lapse (watchdog.go).
//   - Health-aware claims: a task that prefers the GUI goes to an
//     available agent when one is online (grant.go).
//   - Each credential does its own job only: people's operator tokens,
//     agents' own tokens, and the registration secret, which only enrols
//     (auth.go, registry.go); failed authentication is throttled per
//     address.
//   - People hear of what needs them (Options.Notify): a notification is
//     written in the transaction of the change that causes it (a task
//     awaiting a person, completed, failed or blocked) or, for an
//     agent's (offline, unavailable), alone before the change is stored;
//     its ID comes from its cause, so a change made again after a crash
//     writes the same one (notify.go). Package notify delivers them.
//   - Bounded against one task or client: titles and prompts are capped
//     (api.MaxTitleRunes, api.MaxPromptBytes), and so is the log output
//     stored per attempt (Options.MaxAttemptOutput; past it, lines are
//     counted and one event marks the cut, output.go); the lists come in
//     pages, narrowed by the store (pages.go).
//
// Its rooms, each a type of its own, the Server the thin HTTP layer on
// top (under 40 methods; keep it so):
//
//   - rules (rules.go): how requests change the tasks and agents, each
//     change one store transaction, no HTTP: events (accept.go, output.go
//     for the output caps), people's requests (tasks.go), subtasks and
//     their delegation and budgets (subtasks.go, delegate.go,
//     treebudget.go), retries (retrying.go), claims' grants and releases
//     (grant.go), heartbeats (heartbeat.go), routing by capability
//     (routing.go), labels (labels.go), agents' enrolment (registry.go),
//     diffs (diff.go), task tokens and approval links (tasktoken.go,
//     approvallink.go), and the notifications a change writes (notify.go,
//     notify_completed.go). Its methods answer a *ruleError for a
//     request refused, of a kind (errors.go: invalid, forbidden, not
//     found, conflict, ...), which the HTTP layer says with its status
//     (statusFor, in routes.go: the one place) and the console the same.
//   - dispatch (dispatch.go): the claims' long poll, the line of claims
//     waiting for work and the claims held open for orders (claim.go,
//     orders.go); it asks the rules what a claim may take.
//   - watchdog (watchdog.go): the loop that applies the rules of time,
//     in one replica at a time, and the strain that holds leases from
//     lapsing (admission.go).
//   - consoleBackend (console.go): the console's seam (console.Backend),
//     over the rules (signing in alone is the HTTP layer's): the console
//     reaches the control plane only through it.
//   - Server, the HTTP layer: routes.go (the endpoints and who may use
//     each), auth.go, admission.go (requests in flight), pages.go (the
//     paged lists), figures.go (figures for metrics), server.go (New:
//     the rooms put together).
package server
