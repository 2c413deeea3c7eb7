package pgtest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

func query(t *testing.T, dsn, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res := conn.ExecParams(ctx, sql, nil, nil, nil, nil).Read()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(res.Rows) != 1 {
		t.Fatalf("%s: %d rows", sql, len(res.Rows))
	}
	return string(res.Rows[0][0])
}

func TestStartGivesEachTestItsOwnDatabase(t *testing.T) {
	a, b := Start(t), Start(t)
	if a == b {
		t.Fatalf("the same database twice: %s", a)
	}
	if got := query(t, a, "SELECT current_database()"); !strings.HasSuffix(a, "/"+got+"?sslmode=disable") {
		t.Fatalf("connected to %s through %s", got, a)
	}
	// Durability is PostgreSQL's own, not turned off for speed.
	for _, setting := range []string{"fsync", "synchronous_commit"} {
		if got := query(t, a, "SHOW "+setting); got != "on" {
			t.Errorf("%s is %s", setting, got)
		}
	}
}

func TestClusterKillRestart(t *testing.T) {
	c := New(t)
	dsn := c.NewDB(t)
	if err := c.Exec(context.Background(), dbName(dsn), "CREATE TABLE x (n int); INSERT INTO x VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	c.Kill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if conn, err := pgconn.Connect(ctx, dsn); err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a killed server")
	}
	c.Start(t) // crash recovery
	if got := query(t, dsn, "SELECT count(*) FROM x"); got != "1" {
		t.Fatalf("a committed row after a crash: count %s", got)
	}
	c.Restart(t)
	if got := query(t, dsn, "SELECT count(*) FROM x"); got != "1" {
		t.Fatalf("a committed row after a restart: count %s", got)
	}
}

func dbName(dsn string) string {
	s := dsn[strings.LastIndex(dsn, "/")+1:]
	return s[:strings.Index(s, "?")]
}

func TestFindBinHonoursTheOverride(t *testing.T) {
	t.Setenv(EnvBin, t.TempDir())
	dir, looked := findBin()
	if dir != "" || len(looked) != 1 || !strings.HasPrefix(looked[0], EnvBin+"=") {
		t.Fatalf("findBin with an empty %s: %q, looked in %q", EnvBin, dir, looked)
	}
}

// recordTB records a skip or a failure and ends the goroutine, as
// testing's own do.
type recordTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recordTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestNoPostgreSQLSkipsButFailsUnderCI(t *testing.T) {
	t.Setenv(EnvBin, t.TempDir())
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recordTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			binDir(r)
		}()
		<-done
		const want = "no PostgreSQL here (looked in " + EnvBin + "="
		switch {
		case ci == "" && (!strings.HasPrefix(r.skipped, want) || r.failed != ""):
			t.Errorf("without CI: skipped %q, failed %q", r.skipped, r.failed)
		case ci != "" && (!strings.HasPrefix(r.failed, want) || r.skipped != ""):
			t.Errorf("with CI: skipped %q, failed %q", r.skipped, r.failed)
		}
		if !strings.Contains(r.skipped+r.failed, "the PostgreSQL store's tests are skipped") {
			t.Errorf("the line says nothing of the store's tests: %q", r.skipped+r.failed)
		}
	}
}
