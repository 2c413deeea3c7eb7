package state

import (
	"cmp"
	"slices"
	"time"
)

// Retention says how long an agent keeps the tasks it finished, and how much
// room they may take. The zero value uses the defaults.
//
// The rules, which PlanPrune applies:
//
//   - Only a finished task (a terminal phase) is ever pruned. A task that
//     runs, awaits a reply or waits for a retry is someone's work in
//     progress.
//   - A task whose reports the outbox has yet to deliver is kept, whatever
//     its age: the sender needs its state (the lease its records go with).
//   - A finished task is pruned MaxAge after it ended (its last update).
//   - Past MaxBytes (the state, logs and work directories of finished
//     tasks together), the finished tasks that ended first are pruned
//     until the rest fit, the youngest last. A recoverable_failed task is
//     not taken for room: it waits for a person to decide (agent tasks
//     retry), and the logs are what the person reads. Its age still ends it:
//     undecided for MaxAge, it is pruned like the others (the control plane
//     keeps the task, and a retry claims it again with its attempts).
type Retention struct {
	// MaxAge is how long a finished task is kept after it ended. Default
	// DefaultRetention.
	MaxAge time.Duration
	// MaxBytes caps what finished tasks take on disk. Default
	// DefaultRetentionMaxBytes.
	MaxBytes int64
}

// Defaults of Retention.
const (
	DefaultRetention         = 7 * 24 * time.Hour
	DefaultRetentionMaxBytes = int64(10 << 30)
)

// WithDefaults returns r with its zero fields set to the defaults.
func (r Retention) WithDefaults() Retention {
	if r.MaxAge <= 0 {
		r.MaxAge = DefaultRetention
	}
	if r.MaxBytes <= 0 {
		r.MaxBytes = DefaultRetentionMaxBytes
	}
	return r
}

// Stored is a task as retention sees it: the task, what it takes on disk,
// and whether the outbox still has reports of it to send.
type Stored struct {
	Task *Task
	// Bytes is the task's state file, logs and work directory.
	Bytes int64
	// Undelivered: the outbox holds pending records of the task.
	Undelivered bool
}

// PruneReason says why a task is pruned.
type PruneReason string

// The reasons a task is pruned.
const (
	// PruneAge: the task ended longer than MaxAge ago.
	PruneAge PruneReason = "age"
	// PruneSize: finished tasks took more than MaxBytes, and this one
	// ended before the others.
	PruneSize PruneReason = "size"
)

// Prune is one task to remove.
type Prune struct {
	ID      string
	Reason  PruneReason
	Bytes   int64
	EndedAt time.Time
}

// EndedAt is when a finished task ended: its last update, or its creation
// in a file that has none.
func EndedAt(t *Task) time.Time {
	if t.UpdatedAt.IsZero() {
		return t.CreatedAt
	}
	return t.UpdatedAt
}

// PlanPrune returns the tasks to prune at now, under r's rules, the ones
// that ended first first. It only decides; the caller removes.
func PlanPrune(tasks []Stored, now time.Time, r Retention) []Prune {
	r = r.WithDefaults()
	var (
		out   []Prune
		room  []Stored // finished tasks the size cap may take
		total int64    // bytes of the finished tasks that stay
	)
	for _, s := range tasks {
		if !s.Task.Phase.Terminal() {
			continue
		}
		ended := EndedAt(s.Task)
		switch {
		case s.Undelivered:
			total += s.Bytes
		case now.Sub(ended) >= r.MaxAge:
			out = append(out, Prune{ID: s.Task.ID, Reason: PruneAge, Bytes: s.Bytes, EndedAt: ended})
		default:
			total += s.Bytes
			if s.Task.Phase != PhaseRecoverableFailed {
				room = append(room, s)
			}
		}
	}
	slices.SortFunc(room, func(a, b Stored) int {
		return cmp.Or(EndedAt(a.Task).Compare(EndedAt(b.Task)), cmp.Compare(a.Task.ID, b.Task.ID))
	})
	for _, s := range room {
		if total <= r.MaxBytes {
			break
		}
		out = append(out, Prune{ID: s.Task.ID, Reason: PruneSize, Bytes: s.Bytes, EndedAt: EndedAt(s.Task)})
		total -= s.Bytes
	}
	slices.SortStableFunc(out, func(a, b Prune) int { return a.EndedAt.Compare(b.EndedAt) })
	return out
}
