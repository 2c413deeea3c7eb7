// Package pgtest runs throwaway PostgreSQL clusters for tests, from the
// PostgreSQL binaries installed on the machine: initdb in a temporary
// directory, a server on a free loopback port, stopped and removed at the
// end. Nothing is left running: the server dies with the test binary
// (a parent-death signal), and every cluster is stopped in cleanup.
//
// A test binary shares one cluster (Start gives each test a database of
// its own in it) and starts private ones (New) for tests that stop,
// restart or kill PostgreSQL. Its TestMain calls Run, which stops the
// shared cluster after the tests.
//
// The binaries are the newest /usr/lib/postgresql/*/bin, or those in
// AGENT_PG_BIN. Where none is installed the tests that need one are
// skipped, saying so in one line; but when the environment variable CI is
// set they fail, for the CI machine has PostgreSQL.
//
// The server runs with PostgreSQL's defaults where durability is
// concerned (fsync on, synchronous_commit on): the tests see real commit
// costs. As root, initdb and the server run as the user postgres, for
// PostgreSQL refuses to run as root.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// EnvBin names the environment variable that overrides where the
// PostgreSQL binaries are: a directory holding initdb and postgres.
const EnvBin = "AGENT_PG_BIN"

// startTimeout bounds how long a server may take to accept connections
// after it was started (crash recovery included).
const startTimeout = 60 * time.Second

// stopTimeout bounds a fast shutdown; past it the server is killed.
const stopTimeout = 60 * time.Second

// Cluster is one PostgreSQL cluster: its data directory and the server
// that runs on it, when it runs. Its methods are safe for concurrent use.
type Cluster struct {
	bin  string // directory of initdb and postgres
	root string // temporary directory: data/, sock/, log
	port int
	cred *syscall.Credential // nil when not root

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	dbs  atomic.Int64  // databases made by NewDB, for their names
}

var (
	running atomic.Bool // Run was called

	sharedOnce sync.Once
	shared     *Cluster
	sharedErr  error
)

// Run runs the tests of m and then stops and removes the shared cluster,
// if one was started; it returns m.Run's code. A TestMain that uses Start
// calls it (and may check for leaked goroutines after it):
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
func Run(m *testing.M) int {
	running.Store(true)
	code := m.Run()
	if shared != nil {
		if err := shared.remove(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Start returns the DSN of a new, empty database in the test binary's
// shared cluster, which it starts on first use. It skips the test where no
// PostgreSQL is installed (fails it when CI is set). The database is not
// dropped: it goes with the cluster.
func Start(tb testing.TB) string {
	tb.Helper()
	if !running.Load() {
		tb.Fatal("pgtest: Start needs pgtest.Run in the package's TestMain (it stops the shared cluster)")
	}
	bin := binDir(tb)
	sharedOnce.Do(func() {
		shared, sharedErr = newCluster(bin)
		if sharedErr == nil {
			if sharedErr = shared.start(); sharedErr != nil {
				_ = shared.remove()
				shared = nil
			}
		}
	})
	if sharedErr != nil {
		tb.Fatalf("pgtest: shared cluster: %v", sharedErr)
	}
	return shared.NewDB(tb)
}

// New starts a cluster of the test's own, for a test that stops, restarts
// or kills it; it is stopped and removed when the test ends. It skips the
// test where no PostgreSQL is installed (fails it when CI is set).
func New(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := newCluster(binDir(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.remove(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	if err := c.start(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return c
}

// binDir returns the directory of the PostgreSQL binaries, or skips the
// test (fails it under CI) when there are none.
func binDir(tb testing.TB) string {
	tb.Helper()
	dir, looked := findBin()
	if dir != "" {
		return dir
	}
	msg := fmt.Sprintf("no PostgreSQL here (looked in %s): the PostgreSQL store's tests are skipped", strings.Join(looked, ", "))
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s; but CI is set, and the CI machine has it: failing", msg)
	}
	tb.Skip(msg)
	return ""
}

// findBin returns the directory of initdb and postgres: AGENT_PG_BIN when
// set, else the newest /usr/lib/postgresql/VERSION/bin; "" when none
// holds both. looked says where it looked.
func findBin() (dir string, looked []string) {
	if d := os.Getenv(EnvBin); d != "" {
		looked = append(looked, EnvBin+"="+d)
		if hasBinaries(d) {
			return d, looked
		}
		return "", looked
	}
	const pattern = "/usr/lib/postgresql/*/bin"
	looked = append(looked, pattern)
	dirs, _ := filepath.Glob(pattern)
	// Newest first: by the version's number, 9.6 before 10.
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int {
		va, vb := version(a), version(b)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	})
	for _, d := range dirs {
		if hasBinaries(d) {
			return d, looked
		}
	}
	return "", looked
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// newCluster runs initdb in a new temporary directory and picks a free
// loopback port for the server. It does not start it.
func newCluster(bin string) (_ *Cluster, err error) {
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	sweep()
	if c.root, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(c.root, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(c.root)
		}
	}()
	if err := os.Mkdir(c.sockDir(), 0o700); err != nil {
		return nil, err
	}
	if c.cred != nil {
		for _, d := range []string{c.root, c.sockDir()} {
			if err := os.Chown(d, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", c.dataDir(), "-U", "postgres",
		"--auth=trust", "--no-locale", "--encoding=UTF8", "--no-sync", "--no-instructions")
	initdb.Env = env()
	initdb.Dir = c.root
	initdb.SysProcAttr = sysProcAttr(c.cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, lastLines(string(out), 10))
	}
	if c.port, err = freePort(); err != nil {
		return nil, err
	}
	return c, nil
}

// sweep removes the clusters that test binaries killed before their
// cleanup left behind (their servers died with them): the directories
// whose owner process is gone.
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner"))
		if err != nil {
			continue // being made, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// postgresUser is the credential of the user postgres, whom initdb and
// the server run as when the tests run as root.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses root: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// env is the test's environment without PG variables, which would point
// initdb, the server or libpq elsewhere.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			out = append(out, kv)
		}
	}
	return out
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.root, "data") }
func (c *Cluster) sockDir() string { return filepath.Join(c.root, "sock") }
func (c *Cluster) logPath() string { return filepath.Join(c.root, "log") }

// Port is the server's loopback port; it stays the same across restarts.
func (c *Cluster) Port() int { return c.port }

// DSN is the URL of database db on the cluster, as the superuser postgres
// (no password: the cluster trusts loopback connections).
func (c *Cluster) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// NewDB creates a new, empty database on the running cluster and returns
// its DSN.
func (c *Cluster) NewDB(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.dbs.Add(1))
	if err := c.Exec(context.Background(), "postgres", "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	return c.DSN(name)
}

// Exec runs sql on database db of the running cluster, on a connection of
// its own.
func (c *Cluster) Exec(ctx context.Context, db, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	conn, err := pgconn.Connect(ctx, c.DSN(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// Start starts the stopped (or killed) server on the same directory and
// port, and waits until it accepts connections (after crash recovery, if
// it was killed).
func (c *Cluster) Start(tb testing.TB) {
	tb.Helper()
	if err := c.start(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
}

// Stop shuts the server down cleanly (a fast shutdown: open sessions are
// ended), killing it if it takes longer than stopTimeout.
func (c *Cluster) Stop(tb testing.TB) {
	tb.Helper()
	if err := c.stop(); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
}

// Restart stops the server and starts it again on the same directory and
// port.
func (c *Cluster) Restart(tb testing.TB) {
	tb.Helper()
	c.Stop(tb)
	c.Start(tb)
}

// Kill kills the server with SIGKILL, as a crash would: no shutdown, no
// checkpoint; its sessions end as they notice. Start recovers it.
func (c *Cluster) Kill(tb testing.TB) {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.done
	c.cmd, c.done = nil, nil
}

// start runs postgres on the cluster's directory and waits until it
// accepts connections. A start right after a kill may find the killed
// server's sessions still attached to its shared memory: it tries again
// until they are gone.
func (c *Cluster) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return errors.New("start: the server runs")
	}
	deadline := time.Now().Add(startTimeout)
	for {
		err := c.startOnce(deadline)
		if err == nil || time.Now().After(deadline) || !strings.Contains(err.Error(), "still in use") && !strings.Contains(err.Error(), "already exists") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) startOnce(deadline time.Time) error {
	logf, err := os.OpenFile(c.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	before, _ := logf.Seek(0, 2)
	cmd := exec.Command(filepath.Join(c.bin, "postgres"),
		"-D", c.dataDir(),
		"-k", c.sockDir(),
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		// Each test has a pool of its own, and tests run in parallel.
		"-c", "max_connections=300",
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
	)
	cmd.Env = env()
	cmd.Dir = c.root
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = serverProcAttr(c.cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		conn, err := pgconn.Connect(attempt, c.DSN("postgres"))
		cancelAttempt()
		if err == nil {
			conn.Close(ctx)
			c.cmd, c.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited at start: %s", c.logSince(before))
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return fmt.Errorf("postgres did not accept connections within %v: %v: %s", startTimeout, err, c.logSince(before))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logSince returns the last lines the server logged after offset.
func (c *Cluster) logSince(offset int64) string {
	b, err := os.ReadFile(c.logPath())
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return lastLines(string(b[offset:]), 10)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop asks for a fast shutdown (SIGINT: PostgreSQL's SIGTERM is a smart
// shutdown, which waits for every client to leave), then kills the
// server if it has not exited within stopTimeout.
func (c *Cluster) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	pid := c.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGINT)
	var err error
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-c.done
		err = fmt.Errorf("postgres took more than %v to shut down: killed", stopTimeout)
	}
	c.cmd, c.done = nil, nil
	return err
}

// remove ends the server and removes the cluster's directory. Nothing in
// it is kept, so the shutdown is immediate (SIGQUIT: no checkpoint, which
// on a loaded machine with fsync on could take longer than stopTimeout).
func (c *Cluster) remove() error {
	c.mu.Lock()
	if c.cmd != nil {
		_ = syscall.Kill(c.cmd.Process.Pid, syscall.SIGQUIT)
	}
	c.mu.Unlock()
	err := c.stop()
	return errors.Join(err, os.RemoveAll(c.root))
}
