// Package store is the contract between the control plane's rules
// (package server) and where it keeps its records: tasks, their accepted
// events and idempotency keys, agents and their token hashes. Two stores
// keep it: filestore, a directory of one process (the embedded default),
// and pgstore, PostgreSQL shared by any number of replicas.
//
// The rules stay in package server: it reads a task, decides, changes it
// and saves it through a Tx. A store promises what the rules need of it:
//
//   - Update runs its function with every named task locked against every
//     other Update, Claim and Live change of them, in every replica, and
//     stores what the function saved, events first, atomically: after a
//     crash either all of a transaction's changes are there or none (a
//     file store may need its next start to finish one: filestore says
//     how).
//   - An event's key is accepted once per task: Seen answers true for every
//     key a committed transaction appended, stored line or not.
//   - Claim hands each queued task to one claimant: two concurrent claims,
//     in one replica or two, never both save the same task.
//   - Nothing a call answered as done is lost by a crash of the process
//     (or of the database's client): it is on disk, synced, before the
//     call returns. PutAgent alone may keep the last seconds of
//     heartbeats in memory (the file store does): agents say it again in
//     their next heartbeat.
//   - Notifications (Notifier) go with the change that causes them: those
//     a transaction writes (Tx.Notify) are stored when it commits, with
//     its changes, or not at all, and synced before Update or Claim
//     returns; Notifier.Notify syncs before it returns. They are kept
//     until NotificationDone: at least once, not exactly once. A crash
//     may make the rules redo a change (a file store's recovery applies
//     stored events again, the watchdog finds a lapse again), and so
//     write its notification again, under the same ID: a record whose ID
//     and Target are stored already is left as it is, and a receiver
//     drops an ID it has seen.
//
// Every method may be called concurrently, except from within the
// functions Update and Claim run: they must not call the store (it may
// wait for the tasks the transaction holds). The conformance suite
// (storetest) checks these promises against each store, and package
// server's own tests run against each store too.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// ErrRegistered is Register's answer for an agent id that already has a
// token, when replace is not set.
var ErrRegistered = errors.New("agent id is registered")

// ErrCursor is Tasks' answer when Query.After names no task.
var ErrCursor = errors.New("bad cursor")

// ErrNotRegistered is GrantLabels' answer for an agent id that has no
// token: labels are granted to an agent whose token is held, never to
// an id a host could register afterwards.
var ErrNotRegistered = errors.New("agent id is not registered")

// Store keeps the control plane's records.
type Store interface {
	// Notifier keeps the notifications waiting for delivery.
	Notifier
	// Sessions keeps the console's revoked sessions.
	Sessions

	// Create stores a new task. Its id is new.
	Create(ctx context.Context, t *state.Task) error
	// Task returns a copy of a task, nil when there is none.
	Task(ctx context.Context, id string) (*state.Task, error)
	// Tasks returns a page of tasks, oldest first (by CreatedAt, then
	// id) or, with q.Order newest, newest first, and the cursor of the
	// next page ("" when none follows). A cursor that names no task is
	// ErrCursor (wrapped).
	Tasks(ctx context.Context, q Query) ([]*state.Task, string, error)
	// Count counts the tasks by phase.
	Count(ctx context.Context) (map[state.Phase]int, error)
	// Update runs fn with the tasks named by ids locked (those that
	// exist; Tx.Task gives them), then stores what fn saved and appended.
	// When fn returns an error, nothing it saved or appended is stored,
	// and Update returns that error.
	Update(ctx context.Context, ids []string, fn func(Tx) error) error
	// Claim offers queued tasks to fn, oldest first, each locked, until fn
	// says stop or none is left; fn saves those it takes. A task another
	// transaction holds is skipped, not waited for. What fn saved is
	// stored when Claim returns nil.
	Claim(ctx context.Context, fn func(tx Tx, t *state.Task) (stop bool, err error)) error
	// Leased returns the tasks that have not ended whose lease is held by
	// agentID (lapsed or not).
	Leased(ctx context.Context, agentID string) ([]*state.Task, error)
	// Live calls fn with a copy of each task that has not ended, in no
	// order, without locks: the watchdog's look, which then changes what
	// it must through Update.
	Live(ctx context.Context, fn func(t *state.Task) error) error
	// Events returns up to limit of a task's stored events after seq
	// after, oldest first, at most maxBytes of lines (but at least one),
	// each as its encoded line; more says whether more follow.
	Events(ctx context.Context, taskID string, after, limit int, maxBytes int64) (lines []EventLine, more bool, err error)
	// Prune removes up to limit tasks that ended before before, with
	// their events, and returns how many it removed.
	Prune(ctx context.Context, before time.Time, limit int) (int, error)

	// Register records agent id's token hash. An id that has one is
	// ErrRegistered unless replace is set.
	Register(ctx context.Context, id, tokenHash string, replace bool) error
	// Revoke forgets agent id's token hash; it reports whether there was
	// one.
	Revoke(ctx context.Context, id string) (bool, error)
	// AgentByToken returns the agent a token hash belongs to, "" when
	// none.
	AgentByToken(ctx context.Context, tokenHash string) (string, error)
	// PutAgent stores what an agent said in its latest heartbeat.
	PutAgent(ctx context.Context, a Agent) error
	// Agent returns an agent's record; ok is false when it has none.
	Agent(ctx context.Context, id string) (a Agent, ok bool, err error)
	// AgentAndLeased is Agent and Leased of one agent in one call (one
	// round trip to a database): what every heartbeat and claim read
	// first.
	AgentAndLeased(ctx context.Context, id string) (a Agent, ok bool, leased []*state.Task, err error)
	// Agents returns the agents' records by id.
	Agents(ctx context.Context) ([]Agent, error)
	// Serves reports whether an agent announced repository repo.
	Serves(ctx context.Context, repo string) (bool, error)

	// Labels a person grants (docs/routing.md), kept apart from the
	// agents' records, which heartbeats replace: Agent, AgentAndLeased
	// and Agents fill Agent.Granted and Agent.AdoptLabels from them, and
	// Revoke forgets them with the token.
	//
	// GrantLabels sets labels set and removes the labels named in
	// remove on registered agent id, and returns the labels it holds
	// then; it ends AdoptLabels for it. An id with no token is
	// ErrNotRegistered (wrapped).
	GrantLabels(ctx context.Context, id string, set map[string]string, remove []string) (map[string]string, error)
	// AdoptLabels grants agent id the labels it advertises, once: only
	// while it is to adopt them (Agent.AdoptLabels: registered before
	// the store kept granted labels), and ends that. It reports whether
	// it granted them.
	AdoptLabels(ctx context.Context, id string, labels map[string]string) (bool, error)

	// Lead reports whether this process runs the watchdog: always true
	// for a store one process owns; for a shared one, true in one
	// replica at a time, taken over when it goes.
	Lead(ctx context.Context) (bool, error)
	// Shared reports whether other processes may change the store: a
	// claim waiting for work then looks again now and then, not only
	// when this process queues a task.
	Shared() bool
	// Secret returns the store's secret named name, size random bytes
	// made the first time any process asks and kept from then on: the
	// same to every process that shares the store, and known to no one
	// else (an agent host holds none of the store's records). Each name
	// has one size: asking again with another is an error.
	Secret(ctx context.Context, name string, size int) ([]byte, error)
	// Close releases the store.
	Close() error
}

// Tx is a transaction's view of its locked tasks. Its methods are not for
// concurrent use.
type Tx interface {
	// Task returns the locked task id (the transaction's own copy, with
	// its changes), nil when it does not exist or is not locked.
	Task(id string) *state.Task
	// Save stores t, a task the transaction holds (by id), as it is when
	// the transaction commits; Task returns it from then on.
	Save(t *state.Task)
	// Seen reports whether a key of a task's events was accepted before,
	// in this transaction or a committed one.
	Seen(taskID, key string) (bool, error)
	// LastSeq is the number of the task's last stored event (0: none),
	// with those this transaction appended: the next is LastSeq+1. It is
	// the store's bookkeeping, kept beside the task, never in it.
	LastSeq(taskID string) int
	// Append records an accepted event's key and, unless line is nil
	// (its output was cut), stores line as the task's event number seq,
	// which is LastSeq(taskID)+1. kind is the event's kind: a store reads
	// no field of line for it. line is the event encoded as
	// api.StoredEvent (encoding/json), so its first field is key: it
	// starts {"key": and key JSON-quoted. It has no newline. A store may
	// read keys back from their lines.
	Append(taskID, key string, kind state.EventKind, seq int, line []byte)
	// Notify writes notifications with the transaction's changes: stored
	// when it commits, with them, or not at all. A record whose ID and
	// Target are stored already is left as it is.
	Notify(ns ...Notification)
}

// Beater is a store that takes an agent's heartbeat in one transaction:
// a heartbeat then holds one connection of a database's pool, once, and
// the store may let it ahead of other work (pgstore keeps connections for
// it), so that a control plane short of connections still hears its
// agents. A store without it takes a heartbeat as AgentAndLeased, Update
// and PutAgent.
type Beater interface {
	// Beat runs fn with agent id's record (a; known is false when it has
	// none) and, locked as Update locks them, the tasks named by running
	// and those whose lease id holds and that have not ended (leased, by
	// id; Tx.Task gives each). When fn returns nil, what it saved and the
	// record it left in a are stored together (the record as PutAgent
	// stores it); when it returns an error, nothing is, and Beat returns
	// that error. fn may run more than once, as Update's.
	Beat(ctx context.Context, id string, running []string, fn func(tx Tx, a *Agent, known bool, leased []*state.Task) error) error
}

// priorityKey marks a context whose store calls go ahead of other work.
type priorityKey struct{}

// WithPriority marks ctx's store calls as a heartbeat's (on) or not: a
// store with a pool of connections (pgstore) takes one for them ahead of
// other work. Beat's calls are marked already.
func WithPriority(ctx context.Context, on bool) context.Context {
	return context.WithValue(ctx, priorityKey{}, on)
}

// Priority reports whether ctx's store calls go ahead of other work.
func Priority(ctx context.Context) bool {
	on, _ := ctx.Value(priorityKey{}).(bool)
	return on
}

// PoolReporter is a store with a pool of connections to a database: it
// says how busy the pool is, for metrics.
type PoolReporter interface {
	Pool() PoolFigures
}

// PoolFigures are a pool's connections and the waits for them.
type PoolFigures struct {
	// Max is the pool's size, InUse the connections held now, and
	// Reserved those kept for heartbeats.
	Max, InUse, Reserved int
	// Waiting are the waits for a connection, by kind of work.
	Waiting []PoolWait
}

// PoolWait counts the waits of a kind of work for a connection.
type PoolWait struct {
	Kind string // "heartbeat" or "other"
	// Now is how many wait at this moment; Count and Seconds, how many
	// waited since the start and for how long in all.
	Now     int
	Count   uint64
	Seconds float64
}

// Query selects a page of tasks. Empty fields select all.
type Query struct {
	Phase state.Phase
	Agent string // the agent holding the task's lease
	Repo  string
	// Live selects only the tasks that have not ended.
	Live bool
	// Title selects the tasks whose title holds it, in any case
	// (api.TitleHas).
	Title string
	// After is the cursor: the id of the last task of the page before.
	After string
	// Order is the order of the list: oldest first ("" or
	// api.OrderOldest) or newest first (api.OrderNewest).
	Order api.TaskOrder
	// Limit is the most tasks a page holds; 0 is no limit (for tools
	// and tests: the server always pages).
	Limit int
}

// Filter is q's filters, as the API names them.
func (q Query) Filter() api.TaskFilter {
	return api.TaskFilter{Phase: q.Phase, Agent: q.Agent, Repo: q.Repo, Live: q.Live, Title: q.Title}
}

// Match reports whether t is selected by q's filters.
func (q Query) Match(t *state.Task) bool { return q.Filter().Match(t) }

// EventLine is a stored event as its line.
type EventLine struct {
	Seq  int
	Line []byte
}

// Agent is what the control plane keeps of an agent between heartbeats.
type Agent struct {
	View api.AgentView `json:"view"`
	// Missing counts, per task leased to the agent in phase claimed, the
	// heartbeats in a row that did not list it.
	Missing map[string]int `json:"missing,omitempty"`
	// Granted are the labels a person granted the agent (GrantLabels),
	// and AdoptLabels whether it is still to adopt those it advertises
	// (an agent registered before the store kept granted labels: the
	// upgrade's path). The store fills both on every read from where it
	// keeps them; PutAgent stores neither.
	Granted     map[string]string `json:"-"`
	AdoptLabels bool              `json:"-"`
}

// Online reports whether the agent is online: it did not say it went
// offline, and its last heartbeat is less than three intervals old.
func (a Agent) Online(now time.Time, interval time.Duration) bool {
	return a.View.State != api.AgentOffline && now.Sub(a.View.LastHeartbeat) <= 3*interval
}

// QueueListener is a shared store that tells each process when another
// queued tasks: its claims waiting for work wake then, rather than only
// looking again now and then.
type QueueListener interface {
	// ListenQueued calls fn each time another process queued n tasks,
	// or with n 0 when it may have missed some; it returns when ctx
	// ends.
	ListenQueued(ctx context.Context, fn func(n int))
}

// Missed is an event a crash left unapplied: stored, but past what its
// task reflects.
type Missed struct {
	api.StoredEvent
	// Seq is its number among the task's stored events.
	Seq int
	// Size is its stored line's length, its newline included.
	Size int64
}

// Recoverer is a store that a crash may leave with tasks behind their
// stored events (the file store: its events and its task files are
// written apart). The rules bring them up to date before serving: Recover
// runs once, before any other call, and hands each such task with what it
// missed to apply, which applies the events again as they were (same
// agent, same time) and may store what the change causes (its
// notifications) before the store saves the task. An error from apply
// stops the recovery, the task left as it was, for the next start to
// apply again.
type Recoverer interface {
	Recover(apply func(t *state.Task, missed []Missed) error) error
}
