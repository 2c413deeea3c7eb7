// Package storetest is the conformance suite of the control plane's
// stores: Run checks every promise of store.Store and store.Tx against a
// store, and RunReopen that what a store committed is there again after
// it is closed and opened anew. Each store's tests call them:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openEmpty(t) })
//	}
//
// The suite uses tasks as the server makes them: it creates queued tasks
// (state.NewTask) and moves them on through Update, with times in UTC on
// whole seconds. It compares a task a store gives back with the one it
// was given by their JSON encodings: a store gives back what it was
// given, times in the location they came in.
//
// Where store.go is silent the suite reads it so (the store's authors
// may want the contract to say it):
//   - Query.Limit 0 is no limit ("empty fields select all"), and a page
//     that ends the list, full or not, has no cursor.
//   - Events of a task with none, or of no task, is empty, not an error;
//     a cut event (a nil line) is appended with seq 0.
//   - Prune's "ended before" is strict: a task that ended at the cut
//     stays. Its end is state.EndedAt (UpdatedAt).
//   - Serves reads the agents' latest records: a repository an agent no
//     longer announces is not served by it.
//   - What Create, Save, Task, Tasks, Leased and Live pass or return is
//     the caller's: changing it afterwards changes nothing stored.
//   - Live returns fn's error; Claim returns an error when fn does, and
//     then stores nothing fn saved or appended.
//   - A notification record is named by its ID and Target: a Notify of
//     one stored already, in a transaction or alone, leaves it as it is
//     (Attempts, Due and LastError too). DueNotifications orders records
//     of the same Due by ID, then Target. NotificationRetry of a record
//     that is gone is not an error, and stores nothing.
package storetest

import (
	"testing"

	"github.com/edgeagent/agent/controlplane/store"
)

// suite holds what Run was given.
type suite struct {
	open func(t *testing.T) store.Store
}

// Run runs the conformance suite: a subtest per promise, each on a store
// of its own, empty, from open. Run closes each store when its subtest
// ends (open must not), and reports Close's error.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	s := suite{open: open}
	t.Run("Task", s.task)
	t.Run("Tasks", s.tasks)
	t.Run("Count", s.count)
	t.Run("Update", s.update)
	t.Run("Events", s.events)
	t.Run("Claim", s.claim)
	t.Run("Leased", s.leased)
	t.Run("Live", s.live)
	t.Run("Prune", s.prune)
	t.Run("Tokens", s.tokens)
	t.Run("Agents", s.agents)
	t.Run("Labels", s.labels)
	t.Run("Lead", s.lead)
	t.Run("Notifications", s.notifications)
	t.Run("NotifyGates", s.notifyGates)
	t.Run("Secret", s.secret)
	t.Run("Sessions", s.sessions)
}

// run runs f as subtest name on a fresh store, closed when the subtest
// ends. Each store is its own, so the subtests run in parallel.
func (s suite) run(t *testing.T, name string, f func(t *testing.T, st store.Store)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		st := s.open(t)
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		f(t, st)
	})
}
