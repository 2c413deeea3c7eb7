package api

// Limits of one events request: at most MaxEventsPerBatch events, and a
// body of about MaxBatchBytes (a server takes up to twice that).
const (
	MaxEventsPerBatch = 500
	MaxBatchBytes     = 1 << 20
)

// Caps on what clients name things with: an idempotency key and an id are
// kept in memory and on disk for good, so none may be huge.
const (
	MaxKeyBytes = 512
	MaxIDBytes  = 128
)

// Caps on what a person's request puts in a task, which every list of
// tasks carries: a longer title is cut to MaxTitleRunes characters, its
// last one an ellipsis; a longer prompt is refused (400).
const (
	MaxTitleRunes  = 200
	MaxPromptBytes = 256 << 10
)

// The lists GET /v1/tasks, GET /v1/tasks/{id}/events and GET /v1/agents
// come in pages: ?limit=N (at most the maximum; more is taken as the
// maximum) items after ?after=CURSOR, a task's id for tasks (oldest
// first), an event's seq for events, an agent's id for agents (by id). An answer is a JSON array; when more follow, its NextAfterHeader
// holds the cursor to ask for the next page with. A page of events also
// stops before the event that would take it past MaxEventsPageBytes (it
// holds one event at least). A request without ?limit or ?after gets the
// first page.
const (
	DefaultTasksPage   = 100
	MaxTasksPage       = 500
	DefaultEventsPage  = 500
	MaxEventsPage      = 1000
	MaxEventsPageBytes = 1 << 20
	DefaultAgentsPage  = 500
	MaxAgentsPage      = 1000
	NextAfterHeader    = "Next-After"
)

// EndsTaskQuery is the query parameter (=1) of POST /v1/events by which
// an agent says its batch holds a task's completion: past the events'
// in-flight bound, such a batch is admitted on a reserve of its own (see
// docs/operating.md). The control plane checks it against the batch.
const EndsTaskQuery = "ends_task"
