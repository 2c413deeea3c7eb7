package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/private"
	"github.com/edgeagent/agent/internal/utc"
	"github.com/edgeagent/agent/state"
)

// Defaults of Options, used by the command line's settings table too.
const (
	DefaultLease             = 60 * time.Second
	DefaultHeartbeatInterval = 10 * time.Second
)

// Options configure the reference control plane. Zero fields take
// the defaults their comments give.
type Options struct {
	// Dir holds the server's files: tasks/ (one JSON file per task) and
	// events/ (accepted events, one JSONL file per task). Required.
	Dir string
	// Token is the registration secret: it enrols agents (POST
	// /v1/agents/register) and does nothing else. Required, at least
	// MinTokenLen characters.
	Token string
	// OperatorTokens are the people's tokens (one per person): they
	// submit, read, cancel, retry, answer approvals and manage agents.
	// At least one is required, each at least MinTokenLen characters and
	// none the registration secret.
	OperatorTokens []string
	// Lease is how long a claim lasts without renewal. Default 60 s.
	Lease time.Duration
	// HeartbeatInterval is what agents are told to use. An agent silent for
	// three intervals is offline and its leases lapse. Default 10 s.
	HeartbeatInterval time.Duration
	// Limits are the watchdog's queued and stall limits.
	Limits state.Limits
	// MaxAttemptOutput caps the log output stored for one attempt: its
	// log events' bytes in the events file. Past it, log events are
	// accepted and counted, their lines not stored; one stored event marks
	// the cut. Default DefaultMaxAttemptOutput (8 MiB).
	MaxAttemptOutput int64
	// MaxClaimWait caps how long a claim is held waiting for work (its
	// wait_ms). Default, and at most, api.MaxClaimWait (20 s).
	MaxClaimWait time.Duration
	Logger       *slog.Logger
	Now          func() time.Time
}

// Server is the reference control plane. It keeps every task in memory and
// on disk, and serializes all changes under one lock: it is a reference,
// not a fleet server. Events are on disk only, read a page at a time
// outside the lock; a task's output is capped per attempt; the keys of
// ended tasks leave memory (keys.go).
type Server struct {
	opts Options
	log  *slog.Logger

	started time.Time // leases do not lapse until agents had time to report

	mu     sync.Mutex
	store  *state.Store
	events events
	tasks  map[string]*state.Task
	order  []taskRef // the tasks, oldest first: the lists' order
	// keys holds, by task, the idempotency keys of the tasks that have
	// not ended, or ended lately (see keys.go).
	keys   map[string]map[string]struct{}
	agents map[string]*agentState
	// batches counts events batches, for the fault suite's crash points.
	batches  int
	lock     *flock.Flock
	registry *registry

	// operators are the SHA-256 of the operator tokens; throttle counts
	// failed authentications per address.
	operators map[[sha256.Size]byte]bool
	throttle  throttle

	// eventResults counts the events answered, by status, for metrics.
	eventResults map[api.EventStatus]uint64

	// claimable is closed, and replaced, when a task may have become
	// claimable: the claims waiting for work select again (claim.go).
	// waiting counts those claims, waitEnds how their waits ended,
	// waitRounds the selections they ran again when woken.
	claimable  chan struct{}
	waiting    int
	waitEnds   map[ClaimWaitEnd]uint64
	waitRounds uint64
	// stopWaits, closed, ends every wait (StopWaits).
	stopWaits chan struct{}
	stopOnce  sync.Once
}

// Close releases the server's directory.
func (s *Server) Close() error { return s.lock.Unlock() }

// New opens (creating) the server's directory and loads its tasks,
// brings each up to date with the events a crash left unapplied, and
// reads the keys of those that have not ended. Task files that cannot be
// read are logged and left alone; the others load.
func New(opts Options) (*Server, error) {
	if opts.Dir == "" || opts.Token == "" {
		return nil, errors.New("controlplane: a directory and a registration secret are required")
	}
	operators, err := checkTokens(opts.Token, opts.OperatorTokens)
	if err != nil {
		return nil, err
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.MaxAttemptOutput <= 0 {
		opts.MaxAttemptOutput = DefaultMaxAttemptOutput
	}
	if opts.MaxClaimWait <= 0 || opts.MaxClaimWait > api.MaxClaimWait {
		opts.MaxClaimWait = api.MaxClaimWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = utc.Now
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	// What is in the directory decides what agents are handed: nobody
	// else may write there.
	if err := private.Dir("state directory", opts.Dir); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	// One control plane per directory: two would each believe their own
	// copy of the tasks.
	lock := flock.New(filepath.Join(opts.Dir, "lock"), flock.SetPermissions(0o600))
	if ok, err := lock.TryLock(); err != nil {
		return nil, fmt.Errorf("controlplane: lock %s: %w", lock.Path(), err)
	} else if !ok {
		return nil, fmt.Errorf("controlplane: %s is held: another control plane uses %s", lock.Path(), opts.Dir)
	}
	started := false
	defer func() {
		if !started {
			lock.Unlock()
		}
	}()
	st, err := state.OpenStore(filepath.Join(opts.Dir, "tasks"))
	if err != nil {
		return nil, err
	}
	ev := events{dir: filepath.Join(opts.Dir, "events")}
	if err := os.MkdirAll(ev.dir, 0o700); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	for _, sub := range []string{"tasks", "events"} {
		if err := private.Dir("state directory", filepath.Join(opts.Dir, sub)); err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
	}
	tasks, err := loadTasks(st)
	if err != nil {
		opts.Logger.Error("some task files could not be read; they are left alone", "err", err)
	}
	reg, err := openRegistry(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	s := &Server{opts: opts, log: opts.Logger, started: opts.Now(), store: st, events: ev, tasks: tasks, keys: map[string]map[string]struct{}{}, agents: map[string]*agentState{}, lock: lock, registry: reg, operators: operators,
		claimable: make(chan struct{}), stopWaits: make(chan struct{})}
	s.orderTasks()
	for _, ref := range s.order {
		t := s.tasks[ref.id]
		if err := s.recover(t); err != nil {
			return nil, err
		}
		if !t.Phase.Terminal() {
			if s.keys[t.ID], err = ev.keys(t.ID, t.EventsBytes); err != nil {
				return nil, fmt.Errorf("controlplane: keys of task %s: %w", t.ID, err)
			}
		}
	}
	started = true
	return s, nil
}

// recover brings a task file up to date with its stored events: a crash
// between storing a batch's events and saving the task leaves the file
// behind, and the events past the size it records (EventsBytes) say what
// it missed. They are applied again as they were then (same agent, same
// time). Only those are read. A torn last line is cut first.
func (s *Server) recover(t *state.Task) error {
	size, err := s.events.repair(t.ID)
	if err != nil {
		return fmt.Errorf("controlplane: repair the events of task %s: %w", t.ID, err)
	}
	if t.EventsApplied == nil {
		// A file from before events were counted: all are taken as
		// applied, as they were then.
		_, n, err := s.events.skipLines(t.ID, math.MaxInt, size)
		if err != nil {
			return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
		t.EventsApplied, t.EventsBytes = &n, size
		return nil
	}
	from := t.EventsBytes
	if from == 0 && *t.EventsApplied > 0 {
		// A file from before the size was kept: count the lines.
		if from, _, err = s.events.skipLines(t.ID, *t.EventsApplied, size); err != nil {
			return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
		}
	}
	switch {
	case size == from:
		t.EventsBytes = size
		return nil
	case size < from:
		s.log.Error("a task's events file is shorter than its task file says; events were lost", "task", t.ID, "file_bytes", size, "task_says", from)
		t.EventsBytes = size
		return nil
	}
	missed, err := s.events.read(t.ID, from, size)
	if err != nil {
		return fmt.Errorf("controlplane: events of task %s: %w", t.ID, err)
	}
	applied := *t.EventsApplied
	for i, e := range missed {
		if reason := s.apply(e.AgentID, e.Event, e.ReceivedAt); reason != "" {
			s.log.Warn("replaying a stored event after a crash: not applied", "task", t.ID, "key", e.Key, "reason", reason)
		} else if e.Kind == state.EventLog {
			if l, err := decodeLog(e.Payload); err == nil {
				replayLog(t, e, l, applied+i+1)
			}
		}
	}
	n := applied + len(missed)
	t.EventsApplied, t.EventsBytes = &n, size
	if err := s.save(t); err != nil {
		return fmt.Errorf("controlplane: bring task %s up to date: %w", t.ID, err)
	}
	s.log.Info("task brought up to date with its stored events after a crash", "task", t.ID, "events", len(missed))
	return nil
}

// save writes a task, logging a failure: the in-memory state stays right
// and the next change tries again. A task saved queued may be claimable:
// the claims waiting for work look again. mu is held.
func (s *Server) save(t *state.Task) error {
	if t.Phase == state.PhaseQueued {
		s.wakeClaims()
	}
	if err := s.store.Save(t); err != nil {
		s.log.Error("save task", "task", t.ID, "err", err)
		return err
	}
	return nil
}

// newID returns prefix and random hex.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// loadTasks reads every task, skipping (and reporting) bad files.
func loadTasks(st *state.Store) (map[string]*state.Task, error) {
	list, err := st.LoadAll()
	tasks := make(map[string]*state.Task, len(list))
	for _, t := range list {
		tasks[t.ID] = t
	}
	return tasks, err
}
