package proc

import (
	"errors"
	"github.com/edgeagent/agent/internal/testkit"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A spooled attempt read by one agent, left, and taken up by another from
// the offset the first had read to: every line is read once, in order,
// from the same executor, its mark the same; what the second sends to its
// stdin reaches it.
func TestASpooledAttemptIsTakenUpFromWhereItWasLeft(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	gate := filepath.Join(work, "go")
	script := `for i in 1 2 3; do echo "line $i"; done
		while [ ! -e ` + gate + ` ]; do sleep 0.02; done
		echo "line 4"; read -r x; echo "got $x"; echo oops >&2`
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"PATH=/usr/bin:/bin"},
		Mark: NewMark("owner", "att-1"), StdinPipe: true, Grace: time.Second, Spool: &Spool{Dir: dir, Reattach: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	lr := NewLineReader(p.Stdout, 1<<10)
	for _, want := range []string{"line 1", "line 2"} {
		if l, err := lr.Next(); err != nil || l != want {
			t.Fatalf("read %q, %v; want %q", l, err, want)
		}
	}
	read := lr.Offset()
	done := make(chan error)
	go func() {
		_, err := io.ReadAll(p.Stdout)
		done <- err
	}()
	p.Detach()
	if err := <-done; !errors.Is(err, ErrDetached) {
		t.Fatalf("a reader after Detach: %v", err)
	}
	p.Leave()
	select {
	case <-p.Exited():
		t.Fatal("a detached attempt is said to have exited")
	default:
	}

	q, err := Attach(dir)
	if err != nil {
		t.Fatal(err)
	}
	if q.Pid() != p.Pid() || q.Mark() != p.Mark() {
		t.Fatalf("attached to executor %d mark %q, want %d %q", q.Pid(), q.Mark(), p.Pid(), p.Mark())
	}
	q.ReadFrom(read, 0)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := q.Input("x", []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(q.Stdout)
	if err != nil || string(rest) != "line 3\nline 4\ngot hello\n" {
		t.Fatalf("read on %q, %v", rest, err)
	}
	errOut, _ := io.ReadAll(q.Stderr)
	<-q.Exited()
	if code, sig, err := q.Status(); code != 0 || sig != "" || err != nil || string(errOut) != "oops\n" {
		t.Errorf("status %d %q %v, stderr %q", code, sig, err, errOut)
	}
	if n := q.Sweep(); n != 0 {
		t.Errorf("swept %d", n)
	}
	q.Release()
	q.Stdout.Close()
	q.Stderr.Close()
	testkit.WaitFor(t, "the keeper to exit once released", func() bool { return OwnerProcesses("owner") == nil })
}

// SweepOwner spares the attempts it is told to: those the agent attached
// to again.
func TestSweepOwnerSparesTheAttemptsTakenUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "sleep 600"}, Env: []string{"PATH=/usr/bin:/bin"},
		Mark: NewMark("spare-owner", "att-1"), Grace: time.Second, Spool: &Spool{Dir: dir, Reattach: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if n := SweepOwner("spare-owner", p.Mark()); n != 0 || len(OwnerProcesses("spare-owner")) == 0 {
		t.Fatalf("the sweep killed %d of a spared attempt", n)
	}
	SweepOwner("spare-owner") // its keeper told to end it, and gone
	<-p.Exited()
	p.Release()
	p.Stdout.Close()
	p.Stderr.Close()
	testkit.WaitFor(t, "the keeper's exit, reaped", func() bool { return len(OwnerProcesses("spare-owner")) == 0 })
}

// committingReader reads a spooled attempt's stdout as an agent does:
// committing, every so often, what it has read, so that the keeper drops
// it and reads on.
type committingReader struct {
	p       *Process
	pos, at int64
	every   int64
}

func (r *committingReader) Read(b []byte) (int, error) {
	n, err := r.p.Stdout.Read(b)
	r.pos += int64(n)
	if r.pos-r.at >= r.every {
		r.at = r.pos
		if cerr := r.p.CommitRead([]byte(`{}`), r.pos, 0); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

// A spool holds a window of output past what the last commit read: a
// flood the agent has not read waits in the executor's pipe, not on the
// disk. What a commit has read is dropped from the spool files, which
// keep their sizes (offsets hold) and take on disk only what is after it.
func TestASpoolHoldsAWindowAndDropsWhatACommitRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20 // lines of 8 bytes: 8 MiB
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "yes 1234567 | head -n " + strconv.Itoa(n)}, Env: []string{"PATH=/usr/bin:/bin"},
		Mark: NewMark("drop-owner", "att-1"), Grace: time.Second, Spool: &Spool{Dir: dir, Reattach: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	onDisk := func() (size, used int64) {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, "stdout"), &st); err != nil {
			t.Fatal(err)
		}
		return st.Size, st.Blocks * 512
	}
	const window, chunk = 2 << 20, 64 << 10
	testkit.WaitFor(t, "the flood to fill a window", func() bool { return p.SpoolSize() >= window })
	if size, _ := onDisk(); size > window+chunk {
		t.Fatalf("the spool took %d bytes with nothing read, want a window (%d)", size, window)
	}

	r := &committingReader{p: p, every: 256 << 10}
	out, err := io.ReadAll(r)
	if err != nil || len(out) != 8*n {
		t.Fatalf("read %d bytes (%v), want %d", len(out), err, 8*n)
	}
	<-p.Exited()
	if err := p.CommitRead([]byte(`{}`), 8*n-100, 0); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the keeper to punch out what was committed", func() bool {
		size, used := onDisk()
		if size != 8*n {
			t.Fatalf("the spool's size is %d, want %d", size, 8*n)
		}
		return used <= chunk
	})
	p.Release()
	p.Stdout.Close()
	p.Stderr.Close()
	testkit.WaitFor(t, "the keeper to exit", func() bool { return OwnerProcesses("drop-owner") == nil })
}

// An executor that ended with its last output in its pipe, the spool's
// window full (nothing committed): that output is spooled all the same,
// for the agent to read, once the executor's processes are gone.
func TestTheLastOutputIsSpooledPastAFullWindow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const n = (2<<20 + 32<<10) / 8 // a window and half a pipe, in lines of 8 bytes
	p, err := Start(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", "yes 1234567 | head -n " + strconv.Itoa(n) + "; echo the-end"},
		Env: []string{"PATH=/usr/bin:/bin"}, Mark: NewMark("last-owner", "att-1"), Grace: time.Second, Spool: &Spool{Dir: dir, Reattach: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited() // nothing read, nothing committed meanwhile
	out, err := io.ReadAll(p.Stdout)
	if err != nil || len(out) != 8*n+len("the-end\n") || !strings.HasSuffix(string(out), "\nthe-end\n") {
		t.Fatalf("read %d bytes (%v), want %d ending the-end", len(out), err, 8*n+len("the-end\n"))
	}
	p.Release()
	p.Stdout.Close()
	p.Stderr.Close()
	testkit.WaitFor(t, "the keeper to exit", func() bool { return OwnerProcesses("last-owner") == nil })
}
