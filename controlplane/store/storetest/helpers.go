package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// errFn is the error the suite's functions fail with.
var errFn = errors.New("storetest: fn fails")

// t0 is the suite's clock: minute m is at(m).
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

// queued is a new task as the server makes it, created at minute m.
func queued(id string, m int) *state.Task {
	return state.NewTask(id, "the prompt of "+id, at(m))
}

// create stores new tasks (copies: the caller's stay its own).
func create(t *testing.T, st store.Store, tasks ...*state.Task) {
	t.Helper()
	for _, task := range tasks {
		if err := st.Create(t.Context(), task.Clone()); err != nil {
			t.Fatalf("Create %s: %v", task.ID, err)
		}
	}
}

// save stores task as it is, through Update.
func save(t *testing.T, st store.Store, task *state.Task) {
	t.Helper()
	err := st.Update(t.Context(), []string{task.ID}, func(tx store.Tx) error {
		if tx.Task(task.ID) == nil {
			return fmt.Errorf("Tx.Task(%s) is nil", task.ID)
		}
		tx.Save(task.Clone())
		return nil
	})
	if err != nil {
		t.Fatalf("Update %s: %v", task.ID, err)
	}
}

// claimed is task claimed by agent at minute m, with a lease.
func claimed(t *testing.T, task *state.Task, agent string, m int) *state.Task {
	t.Helper()
	c := task.Clone()
	if err := c.Transition(state.PhaseClaimed, "", at(m)); err != nil {
		t.Fatal(err)
	}
	c.Lease = &state.Lease{ID: "lease-" + c.ID, AgentID: agent, ClaimID: "claim-" + c.ID, GrantedAt: at(m), ExpiresAt: at(m + 5)}
	return c
}

// ended is task ended in phase p at minute m (its UpdatedAt: state.EndedAt).
func ended(t *testing.T, task *state.Task, p state.Phase, m int) *state.Task {
	t.Helper()
	c := task.Clone()
	if err := c.Transition(p, "ended by the suite", at(m)); err != nil {
		t.Fatal(err)
	}
	return c
}

// get is the stored task id, nil when there is none.
func get(t *testing.T, st store.Store, id string) *state.Task {
	t.Helper()
	task, err := st.Task(t.Context(), id)
	if err != nil {
		t.Fatalf("Task %s: %v", id, err)
	}
	return task
}

// same reports (as what) unless got and want encode alike.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// sameIDs reports (as what) unless the tasks' ids are want, in order.
func sameIDs(t *testing.T, what string, tasks []*state.Task, want []string) {
	t.Helper()
	if got := ids(tasks); !slices.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

func ids(tasks []*state.Task) []string {
	out := make([]string, 0, len(tasks))
	for _, task := range tasks {
		if task == nil {
			out = append(out, "<nil>")
			continue
		}
		out = append(out, task.ID)
	}
	return out
}

// oldestFirst sorts tasks as Tasks and Claim order them.
func oldestFirst(tasks []*state.Task) []*state.Task {
	out := slices.Clone(tasks)
	slices.SortFunc(out, func(a, b *state.Task) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// seen is Tx.Seen(taskID, key) in a transaction of its own.
func seen(t *testing.T, st store.Store, taskID, key string) bool {
	t.Helper()
	var ok bool
	err := st.Update(t.Context(), []string{taskID}, func(tx store.Tx) error {
		var err error
		ok, err = tx.Seen(taskID, key)
		return err
	})
	if err != nil {
		t.Fatalf("Seen(%s, %s): %v", taskID, key, err)
	}
	return ok
}

// line is an event's line as store.Tx.Append takes it: the event
// encoded as api.StoredEvent, whose first field is its key, so it starts
// {"key": and key JSON-quoted; rest follows, the event's other members
// as written (any spacing, any order, escapes kept: a store gives the
// line back byte for byte). A rest of "" is an event of its key alone.
func line(key, rest string) []byte {
	quoted, err := json.Marshal(key)
	if err != nil {
		panic(err)
	}
	b := append([]byte(`{"key":`), quoted...)
	if rest != "" {
		b = append(append(b, ','), rest...)
	}
	return append(b, '}')
}

// sameLastSeq fails t unless a transaction on task id finds want as the
// seq of its last stored event.
func sameLastSeq(t *testing.T, st store.Store, id string, want int) {
	t.Helper()
	err := st.Update(t.Context(), []string{id}, func(tx store.Tx) error {
		if got := tx.LastSeq(id); got != want {
			t.Errorf("Tx.LastSeq(%s) = %d, want %d", id, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update(%s): %v", id, err)
	}
}

// seqKey is the key appendLines gives event seq.
func seqKey(seq int) string { return fmt.Sprintf("key-%d", seq) }

// keyed is the line appendLines appends as event seq: its key seqKey(seq),
// then rest.
func keyed(seq int, rest string) []byte { return line(seqKey(seq), rest) }

// appendLines appends events to a task from seq first on, in one
// transaction: event seq has key seqKey(seq) and line keyed(seq, rest),
// each rest in turn.
func appendLines(t *testing.T, st store.Store, taskID string, first int, rests ...string) {
	t.Helper()
	err := st.Update(t.Context(), []string{taskID}, func(tx store.Tx) error {
		for i, rest := range rests {
			seq := first + i
			tx.Append(taskID, seqKey(seq), state.EventProgress, seq, keyed(seq, rest))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update appending to %s: %v", taskID, err)
	}
}

// events is every stored event of a task, in one page.
func events(t *testing.T, st store.Store, taskID string) []store.EventLine {
	t.Helper()
	lines, more, err := st.Events(t.Context(), taskID, 0, 1<<20, 1<<40)
	if err != nil {
		t.Fatalf("Events %s: %v", taskID, err)
	}
	if more {
		t.Errorf("Events %s: more after every event", taskID)
	}
	return lines
}

// sameEvents reports (as what) unless got are want: the same seqs, the
// same bytes.
func sameEvents(t *testing.T, what string, got, want []store.EventLine) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Seq == want[i].Seq && bytes.Equal(got[i].Line, want[i].Line)
	}
	if !ok {
		t.Errorf("%s:\n got %s\nwant %s", what, showEvents(got), showEvents(want))
	}
}

func showEvents(lines []store.EventLine) string {
	var b bytes.Buffer
	for _, l := range lines {
		fmt.Fprintf(&b, "\n  %d %q", l.Seq, l.Line)
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// count is the stored count of tasks in phase p.
func count(t *testing.T, st store.Store) map[state.Phase]int {
	t.Helper()
	n, err := st.Count(t.Context())
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	return n
}

// sameCount reports unless got counts want's phases, and no others (a
// phase absent and one counted 0 are alike).
func sameCount(t *testing.T, got, want map[state.Phase]int) {
	t.Helper()
	for _, p := range state.Phases {
		if got[p] != want[p] {
			t.Errorf("Count: %s is %d, want %d (got %v)", p, got[p], want[p], got)
		}
	}
	for p, n := range got {
		if !p.Valid() && n != 0 {
			t.Errorf("Count: unknown phase %q counted %d", p, n)
		}
	}
}

// tasksPage is one page of Tasks.
func tasksPage(t *testing.T, st store.Store, q store.Query) ([]*state.Task, string) {
	t.Helper()
	page, next, err := st.Tasks(t.Context(), q)
	if err != nil {
		t.Fatalf("Tasks(%+v): %v", q, err)
	}
	return page, next
}

// allTasks pages through Tasks with q's filters and limit, checking each
// page's size and cursor, and returns every task and the pages' count.
func allTasks(t *testing.T, st store.Store, q store.Query) ([]*state.Task, int) {
	t.Helper()
	var all []*state.Task
	for pages := 1; ; pages++ {
		page, next := tasksPage(t, st, q)
		if q.Limit > 0 && len(page) > q.Limit {
			t.Fatalf("Tasks(%+v): %d tasks, more than the limit", q, len(page))
		}
		all = append(all, page...)
		if next == "" {
			return all, pages
		}
		if len(page) == 0 {
			t.Fatalf("Tasks(%+v): an empty page with cursor %q", q, next)
		}
		if last := page[len(page)-1].ID; next != last {
			t.Errorf("Tasks(%+v): cursor %q, not the page's last task %q", q, next, last)
		}
		if pages > 1000 {
			t.Fatalf("Tasks(%+v): more than 1000 pages", q)
		}
		q.After = next
	}
}
