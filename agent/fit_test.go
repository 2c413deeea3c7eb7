package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// Reports too large for a record are made to fit where they are made: a
// log keeps whole lines and says what it cut; a completion is stored whole
// in the task's log directory (not its work directory, which may be its
// clone) and the record points to it; a diff's patch is cut at a line's
// end. The outbox takes them all.
func TestOversizedReportsAreMadeToFit(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	a := &Agent{cfg: Config{DataDir: dataDir}, layout: datadir.Layout{Dir: dataDir}}
	limit := a.recordLimit()
	o, err := outbox.Open(t.TempDir(), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	line := strings.Repeat("x", 10<<10)
	var lines []string
	for range 300 { // 3 MB
		lines = append(lines, line)
	}
	huge := strings.Repeat("r", 3<<20)
	// Each control character of a patch is six bytes of JSON.
	inert := strings.Repeat(strings.Repeat("\x01", 99)+"\n", state.MaxDiffBytes/100)
	for _, c := range []struct {
		name string
		r    runner.Report
		kind outbox.Kind
		want string
	}{
		{"log", runner.Report{Payload: state.LogEvent{Stream: "stdout", Lines: lines}}, outbox.KindLog, "bytes cut: over the record limit"},
		{"completion", runner.Report{Payload: state.CompleteEvent{Status: state.PhaseCompleted, Summary: "done", Result: map[string]string{"data": huge}}}, outbox.KindComplete, "stored_in"},
		{"progress", runner.Report{Payload: state.ProgressEvent{Message: huge}}, outbox.KindProgress, "bytes cut"},
		{"diff", runner.Report{Payload: state.DiffEvent{Repo: "app", Branch: "agent/t-1", Patch: inert, Bytes: int64(len(inert))}}, "diff", `"cut":true`},
	} {
		t.Run(c.name, func(t *testing.T) {
			payload, err := a.fit("t-1", c.r, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(payload) > limit || !strings.Contains(string(payload), c.want) {
				t.Fatalf("payload of %d bytes (limit %d), want it to say %q", len(payload), limit, c.want)
			}
			if _, err := o.Append(outbox.Record{Kind: c.kind, TaskID: "t-1", CreatedAt: time.Now(), Payload: payload}); err != nil {
				t.Fatalf("the outbox refused the fitted record: %v", err)
			}
			if c.kind == outbox.KindComplete {
				var ce struct {
					Result struct {
						StoredIn string `json:"stored_in"`
					} `json:"result"`
				}
				if err := json.Unmarshal(payload, &ce); err != nil {
					t.Fatal(err)
				}
				whole, err := os.ReadFile(ce.Result.StoredIn)
				if err != nil || !strings.Contains(string(whole), huge) {
					t.Fatalf("the whole completion is not where the record points: %v", err)
				}
				if filepath.Dir(ce.Result.StoredIn) != a.layout.Logs("t-1") {
					t.Errorf("the completion is stored in %s, want the task's log directory %s", ce.Result.StoredIn, a.layout.Logs("t-1"))
				}
			}
			if c.kind == "diff" {
				var d state.DiffEvent
				if err := json.Unmarshal(payload, &d); err != nil || d.Patch == "" || !strings.HasSuffix(d.Patch, "\n") || !strings.HasPrefix(inert, d.Patch) || d.Bytes != int64(len(inert)) {
					t.Errorf("the fitted diff: %d bytes of patch, of %d (%v)", len(d.Patch), d.Bytes, err)
				}
			}
		})
	}
}
