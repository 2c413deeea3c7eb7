package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeagent/agent/outbox"
)

func TestOutboxStats(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	r := runAgent(t, "outbox", "stats", "--json", "--data-dir", dataDir)
	var st outbox.Stats
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
		t.Fatalf("stats --json: %v %+v", err, r)
	}
	if st.Pending != 2 || st.Dead != 1 || st.Sent != 2 || st.NextSeq != 6 || st.FileBytes == 0 || st.OldestPendingAge < 0 {
		t.Errorf("stats %+v", st)
	}
	r = runAgent(t, "outbox", "stats", "--data-dir", dataDir)
	for _, want := range []string{"pending:", "dead:", "oldest pending:", "last compaction:", "never"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stats lacks %q:\n%s", want, r.stdout)
		}
	}
}
