package storetest_test

import (
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/storetest"
)

// brokenEnv names the promise TestBrokenStore's store breaks.
const brokenEnv = "STORETEST_BROKEN"

// breaks maps each way memStore can be broken to the subtest that must
// catch it.
var breaks = map[string]string{
	"stores a failed update":          "Update/an error from fn stores nothing and is returned",
	"no locks":                        "Update/concurrent updates of one task lose no change",
	"forgets cut keys":                "Update/Seen answers for committed keys, cut ones too",
	"no copies":                       "Task/returns a copy",
	"by id":                           "Tasks/oldest first, by CreatedAt then id",
	"cursor on a full last page":      "Tasks/pages give every task once and the last has no cursor",
	"newest ignored":                  "Tasks/newest first, pages and filters alike",
	"no line over maxBytes":           "Events/maxBytes bounds a page, which still has one line",
	"claims any phase":                "Claim/offers the queued tasks, oldest first",
	"claims held tasks":               "Claim/concurrent claims take each task once",
	"leased ended":                    "Leased/the tasks not ended whose lease an agent holds",
	"prunes past limit":               "Prune/removes up to limit",
	"prune keeps events":              "Prune/removes the tasks that ended before the cut, with their events",
	"register replaces":               "Tokens/a registered id is ErrRegistered unless replace",
	"serves forever":                  "Agents/Serves answers from the agents' latest records",
	"forgets keys on reopen":          "committed records outlive a reopen",
	"notifies on a failed update":     "Notifications/Tx.Notify is not stored when fn errs",
	"notify replaces":                 "Notifications/a record of a stored ID and Target is left as it is",
	"ignores due":                     "Notifications/DueNotifications gives the earliest due first, up to limit, none not yet due",
	"retry counts no attempt":         "Notifications/NotificationRetry counts the attempt and sets Due and LastError",
	"forgets notifications on reopen": "committed records outlive a reopen",
	"forgets secrets":                 "Secret/asked again, the same bytes",
	"keeps expired sessions":          "Sessions/expired nonces are forgotten, live ones kept",
	"shortens sessions":               "Sessions/expired nonces are forgotten, live ones kept",
	"forgets sessions on reopen":      "committed records outlive a reopen",
	"no gate revs":                    "NotifyGates/a gate is written only at its Rev, all of a write or none",
	"fold keeps the folded":           "NotifyGates/FoldNotification folds into the held record, or makes n it",
	"prunes holding gates":            "NotifyGates/PruneNotifyGates removes ended gates that hold no stored record",
	"forgets gates on reopen":         "committed records outlive a reopen",
	"labels outlive revoke":           "Labels/Revoke forgets the granted labels",
	"forgets grants on reopen":        "committed records outlive a reopen",
}

// The suite can fail: each broken store fails the subtest of the promise
// it breaks. Each runs in a process of its own (this test binary, running
// TestBrokenStore), for a failing subtest fails its test.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	for _, broken := range slices.Sorted(maps.Keys(breaks)) {
		subtest := breaks[broken]
		t.Run(broken, func(t *testing.T) {
			t.Parallel()
			var pattern []string
			for _, name := range append([]string{"TestBrokenStore"}, strings.Split(subtest, "/")...) {
				pattern = append(pattern, "^"+regexp.QuoteMeta(strings.ReplaceAll(name, " ", "_"))+"$")
			}
			cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(pattern, "/"), "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), brokenEnv+"="+broken)
			out, err := cmd.CombinedOutput()
			want := "--- FAIL: TestBrokenStore/" + strings.ReplaceAll(subtest, " ", "_")
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("a store that %s: the suite did not fail %q (exit: %v)\n%s", broken, subtest, err, out)
			}
		})
	}
}

// TestBrokenStore runs the suite on a store broken as $STORETEST_BROKEN
// says; TestSuiteCatchesBrokenStores runs it, expecting failures.
func TestBrokenStore(t *testing.T) {
	broken := os.Getenv(brokenEnv)
	if broken == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	open := func(*testing.T) store.Store { return newMemStore(nil, broken) }
	storetest.Run(t, open)
	storetest.RunReopen(t, open, func(_ *testing.T, s store.Store) store.Store {
		d := *s.(*memStore).d
		switch broken {
		case "forgets keys on reopen":
			d.keys = map[string]map[string]bool{}
		case "forgets notifications on reopen":
			d.notes = map[noteKey]store.Notification{}
		case "forgets sessions on reopen":
			d.revoked = map[string]time.Time{}
		case "forgets gates on reopen":
			d.gates = map[noteKey]store.NotifyGate{}
		case "forgets grants on reopen":
			d.granted = map[string]map[string]string{}
		}
		return newMemStore(&d, broken)
	})
}
