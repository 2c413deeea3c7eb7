package taskview

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestShowSaysWhatAPersonMayDo: a stop a person decides on says how to
// retry it, and the placeholders of the commands are explained; a
// completed task has nothing to do and no placeholders line.
func TestShowSaysWhatAPersonMayDo(t *testing.T) {
	t.Parallel()
	tasks := colourTasks(t)
	now := tasks[0].CreatedAt.Add(time.Minute)
	h := testHint{placeholders: "(with URL the control plane's address)"}
	var b bytes.Buffer
	Show(&b, Palette{}, h, tasks[2], now)
	for _, want := range []string{"t-blocked  task t-blocked\n", "phase:    recoverable_failed\n",
		"decide:   a person decides; run it again with: agent tasks retry t-blocked --control-plane http://cp\n",
		"          (with URL the control plane's address)\n", "  [!] Working\n", "  Attempt 1  failed"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	Show(&b, Palette{}, h, tasks[0], now)
	if strings.Contains(b.String(), "(with URL") || strings.Contains(b.String(), "agent tasks") {
		t.Errorf("a completed task suggests a command:\n%s", b.String())
	}
}
