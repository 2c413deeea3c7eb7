package keeper

import (
	"encoding/json"
	"github.com/edgeagent/agent/internal/testkit"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spoolDir makes a spool directory whose socket's path is too long for a
// socket's address: the keeper and Attach reach it through /proc/self/fd.
func spoolDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("s", 40))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startSpooled starts sh -c script under a spooling keeper.
func startSpooled(t *testing.T, script, dir string, sp Spool) *Process {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	sp.Dir = dir
	if sp.Reattach == 0 {
		sp.Reattach = time.Minute
	}
	p, err := StartSpooled(cmd, Sandbox{}, 200*time.Millisecond, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// untilSpooled waits until the spool's stdout holds want.
func untilSpooled(t *testing.T, p *Process, dir, want string) {
	t.Helper()
	for {
		s, changed := p.Spooled()
		b, _ := os.ReadFile(filepath.Join(dir, StdoutName))
		if strings.Contains(string(b[:min(int64(len(b)), s.Stdout)]), want) {
			return
		}
		if s.StdoutEOF {
			t.Fatalf("the spool ended without %q: %q", want, b)
		}
		<-changed
	}
}

// An attempt with a spool outlives its agent: the keeper keeps running
// it, spooling what it prints, and an agent that attaches later finds the
// same executor, the last commit, and carries on; what it sends to stdin
// again under an id already written is dropped; the keeper exits once
// released, after the executor's end.
func TestASpooledAttemptOutlivesItsAgent(t *testing.T) {
	dir := spoolDir(t)
	p := startSpooled(t, `while read -r line; do echo "got $line"; echo "err $line" >&2; done; echo bye`, dir,
		Spool{Stdin: []byte("hello\n"), KeepStdin: true})
	untilSpooled(t, p, dir, "got hello")
	if err := p.Commit(json.RawMessage(`{"read":10}`)); err != nil {
		t.Fatal(err)
	}
	if err := p.Input("a", []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	untilSpooled(t, p, dir, "got one")
	pid := p.Pid
	p.Close() // the agent goes away

	q, err := Attach(dir)
	if err != nil {
		t.Fatal(err)
	}
	if q.Pid != pid || !alive(pid) {
		t.Fatalf("attached to executor %d (alive %v), want %d", q.Pid, alive(q.Pid), pid)
	}
	if string(q.LastCommit()) != `{"read":10}` {
		t.Errorf("last commit %s", q.LastCommit())
	}
	if err := q.Input("a", []byte("one\n")); err != nil { // sent before: dropped
		t.Fatal(err)
	}
	if err := q.Input("b", []byte("two\n")); err != nil {
		t.Fatal(err)
	}
	if err := q.CloseInput(); err != nil {
		t.Fatal(err)
	}
	<-q.Exited()
	if st := q.Status(); st.ExitCode != 0 || st.Signal != "" {
		t.Errorf("status %+v", st)
	}
	s, _ := q.Spooled()
	if !s.StdoutEOF || !s.StderrEOF {
		t.Errorf("the spool is not said to have ended at the exit: %+v", s)
	}
	out, _ := os.ReadFile(filepath.Join(dir, StdoutName))
	errOut, _ := os.ReadFile(filepath.Join(dir, StderrName))
	if string(out) != "got hello\ngot one\ngot two\nbye\n" || string(errOut) != "err hello\nerr one\nerr two\n" {
		t.Errorf("spooled stdout %q, stderr %q", out, errOut)
	}
	if int64(len(out)) != s.Stdout || int64(len(errOut)) != s.Stderr {
		t.Errorf("sizes %+v, files %d and %d bytes", s, len(out), len(errOut))
	}
	q.Release()
	_ = p.Keeper.Wait()
	if _, err := os.Stat(filepath.Join(dir, SocketName)); !os.IsNotExist(err) {
		t.Errorf("the keeper's socket outlived it: %v", err)
	}
}

// A keeper whose agent does not come back within the grace ends the
// attempt as one without a spool does: SIGTERM, then SIGKILL.
func TestAKeeperWhoseAgentDoesNotComeBackEndsTheAttempt(t *testing.T) {
	dir := spoolDir(t)
	work := t.TempDir()
	p := startSpooled(t, `trap '' TERM; echo $$ > `+filepath.Join(work, "pid")+`; while :; do sleep 0.05; done`, dir, Spool{Reattach: 300 * time.Millisecond})
	waitFile(t, filepath.Join(work, "pid"))
	p.Close()
	_ = p.Keeper.Wait()
	if pid := readPid(t, filepath.Join(work, "pid")); alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the executor %d outlived its keeper's grace", pid)
	}
}

// A keeper whose spool directory is gone (the agent's data directory
// removed) does not wait for an agent that cannot come back.
func TestAKeeperWhoseSpoolIsGoneEndsTheAttempt(t *testing.T) {
	dir := spoolDir(t)
	work := t.TempDir()
	p := startSpooled(t, `echo $$ > `+filepath.Join(work, "pid")+`; while :; do sleep 0.05; done`, dir, Spool{Reattach: time.Hour})
	waitFile(t, filepath.Join(work, "pid"))
	p.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_ = p.Keeper.Wait()
	if pid := readPid(t, filepath.Join(work, "pid")); alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the executor %d outlived its spool", pid)
	}
}

// An executor that ends while no agent is attached: the keeper keeps its
// end, and tells it to the agent that attaches.
func TestAnEndWhileNoAgentIsAttachedIsTold(t *testing.T) {
	dir := spoolDir(t)
	work := t.TempDir()
	gate := filepath.Join(work, "go")
	p := startSpooled(t, `while [ ! -e `+gate+` ]; do sleep 0.02; done; echo done; exit 3`, dir, Spool{})
	p.Close()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the executor's output spooled", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, StdoutName))
		return string(b) == "done\n"
	})
	var q *Process
	testkit.WaitFor(t, "the keeper to know the executor's exit", func() bool {
		var err error
		if q, err = Attach(dir); err != nil {
			t.Fatal(err)
		}
		if q.spool.exit != nil {
			return true
		}
		q.Close() // the exit is on its way: look again
		return false
	})
	<-q.Exited()
	if st := q.Status(); st.ExitCode != 3 {
		t.Errorf("status %+v, want exit 3", st)
	}
	if s, _ := q.Spooled(); s.Stdout != 5 || !s.StdoutEOF {
		t.Errorf("spooled %+v", s)
	}
	q.Release()
	_ = p.Keeper.Wait()
}

// Attach takes only a keeper: a socket another process holds in the
// spool directory is refused, named.
func TestAttachTakesOnlyAKeeper(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte(`{"hello":{"pid":1,"keeper":1}}` + "\n"))
			c.Close()
		}
	}()
	if _, err := Attach(dir); err == nil || !strings.Contains(err.Error(), "not a keeper") {
		t.Errorf("attach to a socket of the test's: %v", err)
	}
	if Alive(dir) {
		t.Errorf("a socket of the test's is taken for a live keeper")
	}
	if Alive(t.TempDir()) {
		t.Errorf("no socket is taken for a live keeper")
	}
}

// A look whether a keeper is there does not give its attempt more time:
// the grace still ends when it would have.
func TestALookDoesNotExtendTheGrace(t *testing.T) {
	dir := spoolDir(t)
	work := t.TempDir()
	p := startSpooled(t, `echo $$ > `+filepath.Join(work, "pid")+`; while :; do sleep 0.05; done`, dir, Spool{Reattach: 500 * time.Millisecond})
	waitFile(t, filepath.Join(work, "pid"))
	p.Close()
	start := time.Now()
	for time.Since(start) < time.Second && Alive(dir) {
		time.Sleep(20 * time.Millisecond) // the scenario: a look every 20 ms for a second, past the grace
	}
	_ = p.Keeper.Wait()
	if pid := readPid(t, filepath.Join(work, "pid")); alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the executor %d outlived its keeper's grace", pid)
	}
}

// What the executor prints in a flood is spooled whole and in order.
func TestAFloodIsSpooledWholeAndInOrder(t *testing.T) {
	dir := spoolDir(t)
	p := startSpooled(t, `i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done`, dir, Spool{})
	<-p.Exited()
	s, _ := p.Spooled()
	b, _ := os.ReadFile(filepath.Join(dir, StdoutName))
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 20000 || int64(len(b)) != s.Stdout {
		t.Fatalf("%d lines, %d bytes, spooled %+v", len(lines), len(b), s)
	}
	for i, l := range lines {
		if l != "line "+itoa(i) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
	p.Release()
	_ = p.Keeper.Wait()
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
