package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/edgeagent/agent/internal/pgtest"
	"github.com/edgeagent/agent/state"
)

// What a heartbeat reads and writes, at 10,000 agents (migration 00004):
// an agent's leased tasks by their holder column, and the agents table
// counted again as registrations double.

// migrateTo brings the database dsn names up to schema version, no
// further.
func migrateTo(t *testing.T, dsn string, version int64) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
}

// connect is a session of the test's own on dsn, closed when the test
// ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// leased is a task in phase whose lease agent holds.
func leased(id string, n int, phase state.Phase, agent string) *state.Task {
	tk := task(id, n)
	tk.Phase = phase
	tk.Lease = &state.Lease{ID: "l-" + id, AgentID: agent}
	return tk
}

// A database of version 3, with tasks leased before there was a holder
// column: the migration names the holders of the live ones, so that an
// agent's leased tasks are still found, and not those that ended.
func TestMigrationNamesTheHoldersOfLiveLeasedTasks(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	migrateTo(t, dsn, 3)
	ctx := context.Background()
	c := connect(t, dsn)
	lapsed := leased("lapsed", 2, state.PhaseClaimed, "a1")
	lapsed.Lease.Lapsed = true
	for _, tk := range []*state.Task{
		leased("live", 1, state.PhaseTurnStarted, "a1"), lapsed, leased("other", 3, state.PhaseClaimed, "a2"),
		leased("ended", 4, state.PhaseCompleted, "a1"), task("queued", 5),
	} {
		doc, err := json.Marshal(tk)
		if err != nil {
			t.Fatal(err)
		}
		var ended *time.Time
		if tk.Phase.Terminal() {
			e := state.EndedAt(tk)
			ended = &e
		}
		var agent *string
		if tk.Lease != nil {
			agent = &tk.Lease.AgentID
		}
		_, err = c.Exec(ctx, `INSERT INTO tasks (id, created_ns, phase, repo, lease_agent, ended_at, doc) VALUES ($1, $2, $3, '', $4, $5, $6)`,
			tk.ID, nanos(tk.CreatedAt), string(tk.Phase), agent, ended, doc)
		if err != nil {
			t.Fatal(err)
		}
	}

	s := open(t, dsn) // migrates to the newest version
	for agent, want := range map[string]string{"a1": "lapsed live", "a2": "other", "a3": ""} {
		got, err := s.Leased(ctx, agent)
		if err != nil {
			t.Fatal(err)
		}
		if ids(got) != want {
			t.Errorf("leased to %s after the migration: %q, want %q", agent, ids(got), want)
		}
	}
	var held []string
	if err := c.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM tasks WHERE holder IS NOT NULL`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(held, " "); got != "lapsed live other" {
		t.Errorf("tasks with a holder: %q, want the live leased ones (lapsed live other)", got)
	}
}

// Leased's statement, planned for any agent (the generic plan a prepared
// statement settles on) from statistics taken when every task had ended,
// reads the agent's tasks by tasks_holder: it does not walk tasks_live,
// every live task, which is what the plan of an agent's heartbeat did
// once thousands were queued.
func TestLeasedsGenericPlanReadsTheHoldersIndex(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	s := open(t, dsn)
	ctx := context.Background()
	// The statistics are the test's: no autovacuum counts the table anew.
	if _, err := s.pool.Exec(ctx, "ALTER TABLE tasks SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	var tasks []*state.Task
	for i := range 2000 {
		tasks = append(tasks, leased(fmt.Sprintf("done%05d", i), i, state.PhaseCompleted, fmt.Sprintf("a%02d", i%20)))
	}
	copyTasks(t, s, tasks)
	if _, err := s.pool.Exec(ctx, "ANALYZE tasks"); err != nil {
		t.Fatal(err)
	}
	tasks = tasks[:0]
	for i := range 4000 {
		tasks = append(tasks, task(fmt.Sprintf("q%05d", i), 10_000+i))
	}
	for i := range 5 {
		tasks = append(tasks, leased(fmt.Sprintf("run%d", i), 20_000+i, state.PhaseTurnStarted, fmt.Sprintf("a%02d", i)))
	}
	copyTasks(t, s, tasks)

	c := connect(t, dsn)
	for _, sql := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE leased AS " + leasedSQL} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := c.Query(ctx, "EXPLAIN EXECUTE leased('a01')")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "tasks_holder") || strings.Contains(plan, "tasks_live") {
		t.Errorf("Leased's generic plan does not read tasks_holder alone:\n%s", plan)
	}
}

// Registrations through a store have PostgreSQL count the agents table
// (ANALYZE) when they reach analyzeFrom, and not before: the lookups by
// token stop scanning the table planned for a page.
func TestRegistrationsAnalyzeTheAgentsTable(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	// Only the store counts the table here.
	if _, err := s.pool.Exec(ctx, "ALTER TABLE agents SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	// reltuples is the count ANALYZE took, set before it returns (-1, or
	// 0 before PostgreSQL 14, when none was).
	counted := func() float64 {
		var n float64
		if err := s.pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'agents'::regclass").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	register := func(i int) {
		if err := s.Register(ctx, fmt.Sprintf("a%03d", i), fmt.Sprintf("h%03d", i), false); err != nil {
			t.Fatal(err)
		}
	}
	for i := range analyzeFrom - 1 {
		register(i)
	}
	if n := counted(); n > 0 {
		t.Fatalf("the agents table counted %v agents before %d registrations", n, analyzeFrom)
	}
	register(analyzeFrom - 1)
	if n := counted(); n != analyzeFrom {
		t.Errorf("after %d registrations the agents table counted %v agents, want %d", analyzeFrom, n, analyzeFrom)
	}
}

// A replica of an older version writes tasks without holder; the trigger
// derives it all the same: a lease it grants is the agent's in Leased,
// and a task it ends leaves Leased.
func TestHolderFollowsWritesThatDoNotNameIt(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	create(t, s, task("t1", 1))
	// As version 3 wrote a grant: lease_agent, no holder.
	if _, err := s.pool.Exec(ctx, `UPDATE tasks SET phase = 'claimed', lease_agent = 'old-agent' WHERE id = 't1'`); err != nil {
		t.Fatal(err)
	}
	leased, err := s.Leased(ctx, "old-agent")
	if err != nil || len(leased) != 1 || leased[0].ID != "t1" {
		t.Fatalf("Leased(old-agent) after an older replica's grant: %v %v, want t1", ids(leased), err)
	}
	// And as it ended it: ended_at set, lease_agent kept.
	if _, err := s.pool.Exec(ctx, `UPDATE tasks SET phase = 'completed', ended_at = now() WHERE id = 't1'`); err != nil {
		t.Fatal(err)
	}
	if leased, err := s.Leased(ctx, "old-agent"); err != nil || len(leased) != 0 {
		t.Fatalf("Leased(old-agent) after an older replica ended t1: %v %v, want none", ids(leased), err)
	}
}
