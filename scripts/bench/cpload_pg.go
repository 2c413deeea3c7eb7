package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// A throwaway PostgreSQL cluster for cpload -cp-pg, as the product's
// tests make theirs (internal/pgtest, which this module cannot import):
// initdb in a temporary directory, the server on a free loopback port
// with PostgreSQL's durable defaults (fsync on, synchronous_commit on),
// run as the user postgres when this process is root (PostgreSQL refuses
// root), stopped and removed at the end.

type pgCluster struct {
	bin, root string
	port      int
	cred      *syscall.Credential
	cmd       *exec.Cmd
	done      chan struct{}
}

// pgBinDir finds initdb and postgres: AGENT_PG_BIN, the newest
// /usr/lib/postgresql/*/bin, or the PATH.
func pgBinDir() (string, error) {
	var dirs []string
	if d := os.Getenv("AGENT_PG_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(found) - 1; i >= 0; i-- { // Glob sorts: 9 after 15, but 9.x is long gone
		dirs = append(dirs, found[i])
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
	}
	for _, d := range dirs {
		_, e1 := os.Stat(filepath.Join(d, "initdb"))
		_, e2 := os.Stat(filepath.Join(d, "postgres"))
		if e1 == nil && e2 == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("-cp-pg: no PostgreSQL binaries (looked in AGENT_PG_BIN, /usr/lib/postgresql/*/bin, the PATH)")
}

// startPG makes a cluster in the temp directory (which the user postgres
// can reach) and starts its server, pinned to cpu when cpu >= 0 (its
// processes inherit the mask), with settings added to the defaults.
func startPG(cpu int, settings []string) (*pgCluster, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	c := &pgCluster{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("-cp-pg as root needs the user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	if c.root, err = os.MkdirTemp("", "cpload-pg-"); err != nil {
		return nil, err
	}
	fail := func(err error) (*pgCluster, error) { c.remove(); return nil, err }
	if err := os.Mkdir(filepath.Join(c.root, "sock"), 0o700); err != nil {
		return fail(err)
	}
	if c.cred != nil {
		for _, d := range []string{c.root, filepath.Join(c.root, "sock")} {
			if err := os.Chown(d, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return fail(err)
			}
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(c.root, "data"), "-U", "postgres",
		"--auth=trust", "--no-locale", "--encoding=UTF8", "--no-sync", "--no-instructions")
	initdb.Env, initdb.Dir = pgEnv(), c.root
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v: %s", err, out))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"-D", filepath.Join(c.root, "data"), "-k", filepath.Join(c.root, "sock"), "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "max_connections=200"}
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	c.cmd.Env, c.cmd.Dir = pgEnv(), c.root
	logf, err := os.Create(filepath.Join(c.root, "log"))
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// Its own process group; it dies with this process.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startPinned(c.cmd, cpu); err != nil {
		return fail(fmt.Errorf("start postgres: %w", err))
	}
	c.done = make(chan struct{})
	go func() { c.cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.dsn("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return c, nil
		}
		select {
		case <-c.done:
			b, _ := os.ReadFile(filepath.Join(c.root, "log"))
			return fail(fmt.Errorf("postgres exited at start: %s", b))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("postgres did not accept connections in 60 s: %v", err))
		}
	}
}

// startPinned starts cmd from a thread pinned to cpu (cpu < 0: as is):
// the child inherits the thread's mask, and so do the processes it forks.
func startPinned(cmd *exec.Cmd, cpu int) error {
	if cpu < 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return cmd.Start()
	}
	set.Set(cpu)
	unix.SchedSetaffinity(0, &set)
	defer unix.SchedSetaffinity(0, &old)
	return cmd.Start()
}

func pgEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			out = append(out, kv)
		}
	}
	return out
}

func (c *pgCluster) dsn(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// exec runs sql on database db.
func (c *pgCluster) exec(db, sql string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dsn(db))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// remove stops the server (a fast shutdown, killed after 30 s) and
// removes the cluster's directory.
func (c *pgCluster) remove() {
	if c.cmd != nil && c.cmd.Process != nil && c.done != nil {
		c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	}
	if c.root != "" {
		os.RemoveAll(c.root)
	}
}

// cpu is the CPU time of the cluster's processes so far: the postmaster
// and its children alive now, and the children that exited (the
// postmaster's cutime and cstime, once it reaped them).
func (c *pgCluster) cpu() time.Duration {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	pm := c.cmd.Process.Pid
	var total int64
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := statFields(pid)
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if pid != pm && ppid != pm {
			continue
		}
		for _, i := range []int{11, 12} { // utime, stime
			v, _ := strconv.ParseInt(f[i], 10, 64)
			total += v
		}
		if pid == pm {
			for _, i := range []int{13, 14} { // cutime, cstime
				v, _ := strconv.ParseInt(f[i], 10, 64)
				total += v
			}
		}
	}
	return time.Duration(total) * 10 * time.Millisecond
}

// statFields are the fields of /proc/PID/stat after the command: state
// is [0], ppid [1], utime [11], stime [12], cutime [13], cstime [14].
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// printStatements logs the n statements of database db that PostgreSQL
// spent the most time executing since pg_stat_statements was reset:
// calls, total and mean milliseconds, rows, and the statement's text cut
// to one line.
func (c *pgCluster) printStatements(db string, n int, log *log.Logger) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dsn(db))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT calls, total_exec_time, mean_exec_time, rows, query FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT $1`, n)
	if err != nil {
		return err
	}
	defer rows.Close()
	log.Printf("cpload: the statements PostgreSQL spent most time in (calls, total ms, mean ms, rows):")
	for rows.Next() {
		var calls, nrows int64
		var total, mean float64
		var q string
		if err := rows.Scan(&calls, &total, &mean, &nrows, &q); err != nil {
			return err
		}
		q = strings.Join(strings.Fields(q), " ")
		if len(q) > 160 {
			q = q[:160] + "…"
		}
		log.Printf("  %8d %9.0f %7.3f %8d  %s", calls, total, mean, nrows, q)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	tables, err := conn.Query(ctx, `SELECT relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, pg_total_relation_size(relid), autovacuum_count,
		seq_scan, seq_tup_read, coalesce(idx_scan, 0) FROM pg_stat_user_tables ORDER BY relname`)
	if err != nil {
		return err
	}
	defer tables.Close()
	log.Printf("cpload: tables (live rows, dead rows, updates, HOT updates, bytes, autovacuums, sequential scans, rows they read, index scans):")
	for tables.Next() {
		var name string
		var live, dead, upd, hot, size, vac, seq, seqRead, idx int64
		if err := tables.Scan(&name, &live, &dead, &upd, &hot, &size, &vac, &seq, &seqRead, &idx); err != nil {
			return err
		}
		log.Printf("  %-14s %9d %9d %9d %9d %12d %3d %9d %12d %9d", name, live, dead, upd, hot, size, vac, seq, seqRead, idx)
	}
	return tables.Err()
}
