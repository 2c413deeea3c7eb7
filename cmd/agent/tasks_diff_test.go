package main

import (
	"strings"
	"testing"
)

// A task with no workspace here: a clear error, and where else to look.
func TestTasksDiffOfATaskWithNoWorkspace(t *testing.T) {
	t.Parallel()
	r := runAgent(t, "tasks", "diff", "t-nope", "--data-dir", t.TempDir())
	wantOneLineError(t, r, 1, "task t-nope has no workspace in ")
	if !strings.Contains(r.stderr, "--remote prints the diff the control plane keeps") {
		t.Errorf("the error does not say where else to look: %s", r.stderr)
	}
}
