package filestore

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// The file store's cost at 1,000, 10,000 and 100,000 ended tasks (and
// 100 live ones): the start's time and the heap it leaves, a page of the
// list, an empty claim, Leased, Live and Count. It prints figures (go
// test -v -run TestScaleFigures; without -v it runs at 1,000 only) and
// asserts no time. -short skips it;
// AGENT_FS_SCALE=1000,10000 picks the sizes; AGENT_FS_MIGRATE=1 times
// the first start of each in the layout from before the archive too.
func TestScaleFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("figures: not with -short")
	}
	counts := []int{1000, 10000, 100000}
	if !testing.Verbose() {
		counts = []int{1000} // nobody reads the figures: the code runs, briefly
	}
	if v := os.Getenv("AGENT_FS_SCALE"); v != "" {
		counts = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(f)
			must(t, err)
			counts = append(counts, n)
		}
	}
	var rows []scaleRow
	for _, n := range counts {
		rows = append(rows, measureScale(t, n))
	}
	t.Logf("%-9s %10s %10s %12s %12s %12s %12s %12s %12s", "ended", "open", "heap MiB", "page p50", "page p99", "claim", "leased", "live", "count")
	for _, r := range rows {
		t.Logf("%-9d %10s %10.1f %12s %12s %12s %12s %12s %12s", r.n, r.open.Round(time.Millisecond), float64(r.heap)/(1<<20),
			r.pageP50, r.pageP99, r.claim, r.leased, r.live, r.count)
	}
	for _, r := range rows {
		if r.migrate > 0 {
			t.Logf("the first start of %d ended tasks in the layout from before the archive (moved to ended/): %s", r.n, r.migrate.Round(time.Millisecond))
		}
	}
	if len(rows) > 1 {
		a, b := rows[0], rows[len(rows)-1]
		ratio := func(x, y time.Duration) string { return fmt.Sprintf("%.2f", float64(y)/float64(max(x, 1))) }
		t.Logf("ratio %d/%d: open %s, heap %.1f, page p99 %s, claim %s, leased %s, live %s, count %s", b.n, a.n,
			ratio(a.open, b.open), float64(b.heap)/float64(max(a.heap, 1)), ratio(a.pageP99, b.pageP99),
			ratio(a.claim, b.claim), ratio(a.leased, b.leased), ratio(a.live, b.live), ratio(a.count, b.count))
	}
}

type scaleRow struct {
	n                          int
	open                       time.Duration
	heap                       uint64
	pageP50, pageP99           time.Duration
	claim, leased, live, count time.Duration
	migrate                    time.Duration // the first start of the layout from before the archive
}

// measureScale makes a store of n ended tasks (written as a store writes
// them: files in ended/, a line each in the index) and 100 live ones
// (through the store: claimed by 10 agents), and measures it.
func measureScale(t *testing.T, n int) scaleRow {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	for i := range 100 {
		task := state.NewTask(fmt.Sprintf("live-%03d", i), "a prompt", t0.Add(time.Duration(n+i)*time.Second))
		must(t, s.Create(ctx, task))
		c := task.Clone()
		must(t, c.Transition(state.PhaseClaimed, "", c.CreatedAt))
		c.Lease = &state.Lease{ID: "l-" + c.ID, AgentID: fmt.Sprint("agent-", i%10), ExpiresAt: c.CreatedAt.Add(time.Hour)}
		saveTask(t, s, c)
	}
	must(t, s.Close())
	writeEnded(t, dir, n)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	s, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	must(t, s.Recover(func(*state.Task, []Missed) error { return nil }))
	row := scaleRow{n: n, open: time.Since(start)}
	runtime.GC()
	runtime.ReadMemStats(&after)
	row.heap = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
	defer s.Close()
	if reads := s.ArchiveReads(); reads != 0 {
		t.Errorf("the start read %d ended tasks' files", reads)
	}

	// Pages of 100 at random places in the list (the cache cold for
	// most), and the first.
	var took []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		q := store.Query{Limit: 100}
		if i > 0 {
			q.After = endedID(rng.IntN(n))
		}
		start := time.Now()
		page, _, err := s.Tasks(ctx, q)
		took = append(took, time.Since(start))
		must(t, err)
		if len(page) == 0 {
			t.Fatalf("an empty page after %q", q.After)
		}
	}
	slices.Sort(took)
	row.pageP50, row.pageP99 = took[len(took)/2], took[len(took)*99/100]

	each := func(times int, f func()) time.Duration {
		start := time.Now()
		for range times {
			f()
		}
		return time.Since(start) / time.Duration(times)
	}
	row.claim = each(2000, func() {
		must(t, s.Claim(ctx, func(store.Tx, *state.Task) (bool, error) { return false, nil }))
	})
	row.leased = each(2000, func() {
		l, err := s.Leased(ctx, "agent-3")
		must(t, err)
		if len(l) != 10 {
			t.Fatalf("Leased: %d", len(l))
		}
	})
	row.live = each(500, func() {
		must(t, s.Live(ctx, func(*state.Task) error { return nil }))
	})
	row.count = each(2000, func() {
		c, err := s.Count(ctx)
		must(t, err)
		if c[state.PhaseCompleted] != n {
			t.Fatalf("Count: %v", c)
		}
	})
	if os.Getenv("AGENT_FS_MIGRATE") != "" {
		row.migrate = measureMigration(t, s, dir)
	}
	return row
}

// measureMigration closes s, puts dir in the layout from before the
// archive (every task in tasks/, no index), and times the first start.
func measureMigration(t *testing.T, s *Store, dir string) time.Duration {
	must(t, s.Close())
	names, err := filepath.Glob(filepath.Join(dir, "ended", "*.json"))
	must(t, err)
	for _, f := range names {
		must(t, os.Rename(f, filepath.Join(dir, "tasks", filepath.Base(f))))
	}
	must(t, os.Remove(filepath.Join(dir, "ended", indexName)))
	start := time.Now()
	s, err = Open(dir, Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	must(t, s.Recover(func(*state.Task, []Missed) error { return nil }))
	took := time.Since(start)
	names, err = filepath.Glob(filepath.Join(dir, "tasks", "*.json"))
	must(t, err)
	if len(names) != 100 {
		t.Errorf("%d files in tasks/ after the first start, want the 100 live", len(names))
	}
	return took
}

func endedID(i int) string { return fmt.Sprintf("done-%07d", i) }

// writeEnded writes n completed tasks into dir's archive as the store
// writes them, and their index lines.
func writeEnded(t *testing.T, dir string, n int) {
	t.Helper()
	idx, err := os.OpenFile(filepath.Join(dir, "ended", indexName), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	must(t, err)
	w := bufio.NewWriter(idx)
	enc := json.NewEncoder(w)
	for i := range n {
		created := t0.Add(time.Duration(i) * time.Second)
		task := state.NewTask(endedID(i), "fix the flaky test in the payments service and open a pull request", created)
		task.Repo = []string{"payments", "web", "infra"}[i%3]
		must(t, task.Transition(state.PhaseClaimed, "", created))
		task.Lease = &state.Lease{ID: "l-" + task.ID, AgentID: fmt.Sprint("agent-", i%10), ExpiresAt: created.Add(time.Hour), GrantedAt: created}
		a := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptCompleted, StartedAt: created, CompletedAt: created.Add(time.Minute)}
		must(t, task.PutAttempt(a))
		must(t, task.Transition(state.PhaseCompleted, "", created.Add(time.Minute)))
		task.Result = &state.Result{Summary: "fixed the race in the retry loop; the test passes 500 times in a row"}
		b, err := json.MarshalIndent(struct {
			SchemaVersion int `json:"schema_version"`
			*state.Task
			EventsApplied int   `json:"events_applied"`
			EventsBytes   int64 `json:"events_bytes"`
		}{state.SchemaVersion, task, 9, 4096}, "", "  ")
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, "ended", task.ID+".json"), b, 0o600))
		must(t, enc.Encode(lineRef(task, sizes{events: 4096})))
	}
	must(t, w.Flush())
	must(t, idx.Close())
}
