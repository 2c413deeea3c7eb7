package tasksource

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

// tasks show --json's shape: the task, its card and its timeline, under
// the names scripts read.
func TestShownOf(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	task := state.NewTask("t-1", "count the files", now)
	b, err := json.Marshal(ShownOf(task, now))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil || len(got) != 3 || got["task"] == nil || got["timeline"] == nil {
		t.Fatalf("%v: %s", err, b)
	}
	var card []state.Step
	if err := json.Unmarshal(got["progress_card"], &card); err != nil || len(card) == 0 || card[0].Name == "" {
		t.Errorf("progress_card: %v %s", err, got["progress_card"])
	}
}
