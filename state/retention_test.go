package state

import (
	"slices"
	"testing"
	"time"
)

func TestPlanPrune(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	task := func(id string, phase Phase, endedAgo time.Duration) *Task {
		return &Task{ID: id, Phase: phase, CreatedAt: now.Add(-endedAgo - time.Hour), UpdatedAt: now.Add(-endedAgo)}
	}
	type want struct {
		id     string
		reason PruneReason
	}
	cases := []struct {
		name  string
		r     Retention
		tasks []Stored
		want  []want
	}{
		{
			name: "finished and older than the retention",
			tasks: []Stored{
				{Task: task("old", PhaseCompleted, 8*day), Bytes: 10},
				{Task: task("new", PhaseFailed, 6*day), Bytes: 10},
				{Task: task("exactly", PhaseCancelled, 7*day), Bytes: 10},
			},
			want: []want{{"old", PruneAge}, {"exactly", PruneAge}},
		},
		{
			name: "every terminal phase ages out, none of the others",
			tasks: func() []Stored {
				var s []Stored
				for _, p := range Phases {
					s = append(s, Stored{Task: task(string(p), p, 30*day)})
				}
				return s
			}(),
			want: []want{
				{"completed", PruneAge}, {"failed", PruneAge}, {"recoverable_failed", PruneAge},
				{"timed_out", PruneAge}, {"cancelled", PruneAge}, {"expired", PruneAge},
			},
		},
		{
			name: "undelivered reports keep a task of any age",
			tasks: []Stored{
				{Task: task("pending", PhaseCompleted, 30*day), Undelivered: true},
			},
		},
		{
			name: "over the size cap: the ones that ended first go, until the rest fit",
			r:    Retention{MaxBytes: 100},
			tasks: []Stored{
				{Task: task("c", PhaseCompleted, 1*day), Bytes: 50},
				{Task: task("a", PhaseCompleted, 3*day), Bytes: 50},
				{Task: task("b", PhaseFailed, 2*day), Bytes: 50},
				{Task: task("running", PhaseTurnStarted, 5*day), Bytes: 1000},
			},
			want: []want{{"a", PruneSize}},
		},
		{
			name: "the size cap counts but never takes undelivered or recoverable_failed tasks",
			r:    Retention{MaxBytes: 100},
			tasks: []Stored{
				{Task: task("person", PhaseRecoverableFailed, 6*day), Bytes: 80},
				{Task: task("unsent", PhaseCompleted, 5*day), Bytes: 80, Undelivered: true},
				{Task: task("x", PhaseCompleted, 4*day), Bytes: 10},
				{Task: task("y", PhaseCompleted, 3*day), Bytes: 10},
			},
			want: []want{{"x", PruneSize}, {"y", PruneSize}},
		},
		{
			name: "what aged out no longer counts toward the cap",
			r:    Retention{MaxBytes: 100},
			tasks: []Stored{
				{Task: task("old", PhaseCompleted, 10*day), Bytes: 500},
				{Task: task("young", PhaseCompleted, 1*day), Bytes: 100},
			},
			want: []want{{"old", PruneAge}},
		},
		{
			name: "a file without an update time counts from its creation",
			tasks: []Stored{
				{Task: &Task{ID: "legacy", Phase: PhaseCompleted, CreatedAt: now.Add(-9 * day)}},
			},
			want: []want{{"legacy", PruneAge}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []want
			for _, p := range PlanPrune(tc.tasks, now, tc.r) {
				got = append(got, want{p.ID, p.Reason})
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("PlanPrune = %v, want %v", got, tc.want)
			}
		})
	}
}
