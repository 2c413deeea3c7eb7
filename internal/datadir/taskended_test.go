package datadir

import (
	"os"
	"strings"
	"testing"

	"github.com/edgeagent/agent/state"
)

// A task that has not ended is in use; an ended one, one the data
// directory does not hold, or a data directory with no task state is not.
func TestCheckTaskEnded(t *testing.T) {
	dir := t.TempDir()
	if err := CheckTaskEnded(dir, "t-1"); err != nil {
		t.Fatalf("no task state: %v", err)
	}
	must(t, os.MkdirAll(Layout{dir}.Tasks(), 0o700))
	st, err := state.OpenStore(Layout{dir}.Tasks())
	must(t, err)
	must(t, st.Save(&state.Task{ID: "running", Phase: state.PhaseTurnStarted}))
	must(t, st.Save(&state.Task{ID: "done", Phase: state.PhaseCompleted}))
	if err := CheckTaskEnded(dir, "running"); err == nil || err.Error() != "task running is turn_started, not finished: its workspace is in use" {
		t.Errorf("a running task: %v", err)
	}
	for _, id := range []string{"done", "gone"} {
		if err := CheckTaskEnded(dir, id); err != nil {
			t.Errorf("task %s: %v", id, err)
		}
	}
	if err := CheckTaskEnded(dir, "../x"); err == nil || strings.Contains(err.Error(), "not finished") {
		t.Errorf("a bad id: %v", err)
	}
}
