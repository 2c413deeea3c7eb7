package keeper

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// spooled is the agent's side of a spooling keeper: how far the spool is
// written, and how the executor ended.
type spooled struct {
	dir       string
	keeperPid int
	commit    json.RawMessage

	mu      sync.Mutex
	sizes   Spooled
	changed chan struct{} // closed at the next change of sizes
	exit    *Status
	exited  chan struct{}
	closing bool // the agent closed the connection itself
}

func newSpooled(dir string, keeperPid int, commit json.RawMessage, s Spooled, exit *Status) *spooled {
	sp := &spooled{dir: dir, keeperPid: keeperPid, commit: commit, sizes: s, changed: make(chan struct{}), exit: exit, exited: make(chan struct{})}
	if exit != nil {
		close(sp.exited)
	}
	return sp
}

// pump reads the keeper's messages until the connection ends.
func (p *Process) pump() {
	sp := p.spool
	for {
		var m message
		if err := readMessage(p.in, &m); err != nil {
			break
		}
		sp.mu.Lock()
		if m.Spooled != nil {
			sp.grow(*m.Spooled)
		}
		if m.Exit != nil && sp.exit == nil {
			st := *m.Exit
			sp.exit = &st
			close(sp.exited)
		}
		sp.mu.Unlock()
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closing {
		return
	}
	// The keeper is gone without a word: what it spooled is all there
	// will be, and the attempt's end is unknown.
	s := sp.sizes
	if fi, err := os.Stat(filepath.Join(sp.dir, StdoutName)); err == nil {
		s.Stdout = max(s.Stdout, fi.Size())
	}
	if fi, err := os.Stat(filepath.Join(sp.dir, StderrName)); err == nil {
		s.Stderr = max(s.Stderr, fi.Size())
	}
	s.StdoutEOF, s.StderrEOF = true, true
	sp.grow(s)
	if sp.exit == nil {
		sp.exit = &Status{ExitCode: -1, Swept: -1}
		close(sp.exited)
	}
}

// grow takes a newer report of the spool's sizes; mu is held.
func (sp *spooled) grow(s Spooled) {
	if s == sp.sizes {
		return
	}
	sp.sizes = s
	close(sp.changed)
	sp.changed = make(chan struct{})
}

func (sp *spooled) status() Status {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.exit == nil {
		return Status{ExitCode: -1, Swept: -1}
	}
	return *sp.exit
}

// ErrNoSpool is returned by the spool's methods on a Process started
// without one.
var ErrNoSpool = errors.New("keeper: the attempt has no spool")

// Spooled says how far the spool is written, with a channel closed at the
// next change. Nil without a spool.
func (p *Process) Spooled() (Spooled, <-chan struct{}) {
	if p.spool == nil {
		return Spooled{}, nil
	}
	p.spool.mu.Lock()
	defer p.spool.mu.Unlock()
	return p.spool.sizes, p.spool.changed
}

// Exited is closed once the keeper has said how the executor ended, or
// is gone: with a spool only.
func (p *Process) Exited() <-chan struct{} {
	if p.spool == nil {
		return nil
	}
	return p.spool.exited
}

// SpoolDir is the attempt's spool directory, "" without one.
func (p *Process) SpoolDir() string {
	if p.spool == nil {
		return ""
	}
	return p.spool.dir
}

// KeeperPid is the keeper's process id.
func (p *Process) KeeperPid() int {
	if p.spool != nil {
		return p.spool.keeperPid
	}
	return p.Keeper.Process.Pid
}

// LastCommit is the last commit the keeper held when this process
// attached to it; nil for none, and for a keeper this process started.
func (p *Process) LastCommit() json.RawMessage {
	if p.spool == nil {
		return nil
	}
	return p.spool.commit
}

// Input has the keeper write data to the executor's stdin. A non-empty id
// is written once, whoever sends it again: what an agent re-sends after
// it attached again is dropped.
func (p *Process) Input(id string, data []byte) error {
	if p.spool == nil {
		return ErrNoSpool
	}
	return p.send(message{Input: &input{ID: id, Data: data}})
}

// CloseInput has the keeper close the executor's stdin once what was sent
// before is written.
func (p *Process) CloseInput() error {
	if p.spool == nil {
		return ErrNoSpool
	}
	return p.send(message{CloseInput: true})
}

// Commit leaves raw with the keeper: an agent that attaches to it later
// is given the last one (LastCommit). Once Commit returns, the keeper
// gets it whatever becomes of this process.
func (p *Process) Commit(raw json.RawMessage) error {
	if p.spool == nil {
		return ErrNoSpool
	}
	if len(raw) == 0 || !json.Valid(raw) {
		return errorf("a commit is a JSON value")
	}
	return p.send(message{Commit: raw})
}

// CommitRead is Commit of a commit that has read the spool to read: the
// keeper no longer keeps what is before (it punches it out of the spool
// files, which keep their sizes and offsets), so that a spool takes the
// disk what its agent has not read and committed, not the attempt's whole
// output.
func (p *Process) CommitRead(raw json.RawMessage, read Spooled) error {
	if p.spool == nil {
		return ErrNoSpool
	}
	if len(raw) == 0 || !json.Valid(raw) {
		return errorf("a commit is a JSON value")
	}
	return p.send(message{Commit: raw, Read: &read})
}

// Release tells the keeper the agent has recorded the executor's end:
// the keeper exits. Call it once Exited is closed.
func (p *Process) Release() {
	if p.spool == nil {
		return
	}
	_ = p.send(message{Release: true})
	p.Close()
}

// Close leaves the keeper without releasing it: it keeps the attempt
// for another agent to attach to, within its grace.
func (p *Process) Close() {
	if p.spool == nil {
		return
	}
	p.spool.mu.Lock()
	p.spool.closing = true
	p.spool.mu.Unlock()
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	p.ctl.Close()
}

// Attach connects to the keeper of the attempt whose spool directory is
// dir, checked to be a keeper of this user's: the process at the other
// end of its socket, as the kernel names it, runs as this user and as a
// keeper. It returns once the keeper has said where the attempt is.
func Attach(dir string) (*Process, error) {
	if !canKeep {
		return nil, ErrNotKeeper
	}
	addr, d, err := socketAddr(dir)
	if err != nil {
		return nil, errorf("attach: %w", err)
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if d != nil {
		d.Close()
	}
	if err != nil {
		return nil, errorf("attach: %w", err)
	}
	cred, err := peerCred(c)
	if err != nil {
		c.Close()
		return nil, errorf("attach: who holds the socket: %w", err)
	}
	if int(cred.Uid) != os.Geteuid() {
		c.Close()
		return nil, errorf("attach: the socket in %s is held by uid %d, not this user's", dir, cred.Uid)
	}
	if !isKeeper(int(cred.Pid)) {
		c.Close()
		return nil, errorf("attach: process %d holding the socket in %s is not a keeper", cred.Pid, dir)
	}
	// A keeper answers at once; one that does not is not waited for.
	_ = c.SetReadDeadline(time.Now().Add(attachTimeout))
	in := bufio.NewReader(c)
	var m message
	if err := readMessage(in, &m); err != nil || m.Hello == nil {
		c.Close()
		if err == nil {
			err = errors.New("no hello")
		}
		return nil, errorf("attach: the keeper of %s did not answer: %v", dir, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	h := m.Hello
	if h.Keeper != int(cred.Pid) {
		c.Close()
		return nil, errorf("attach: the keeper says it is %d, the kernel %d", h.Keeper, cred.Pid)
	}
	p := &Process{Pid: h.Pid, ABI: h.ABI, ctl: c, in: in, spool: newSpooled(dir, h.Keeper, h.Commit, h.Spooled, h.Exit)}
	go p.pump()
	return p, nil
}

// attachTimeout bounds the wait for a keeper's hello.
const attachTimeout = 5 * time.Second

// isKeeper reports whether pid runs as a keeper (its argv[0]).
func isKeeper(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasPrefix(b, []byte(Arg0+"\x00"))
}

// Alive reports whether a keeper holds the socket of the spool directory
// dir, without attaching to it (it does not notice): for saying which
// attempts an agent will find again.
func Alive(dir string) bool {
	addr, d, err := socketAddr(dir)
	if err != nil {
		return false
	}
	if d != nil {
		defer d.Close()
	}
	// A bound socket nobody listens on refuses; a listener answers. The
	// keeper takes the connection for an agent's and, it closing having
	// said nothing, waits again within the grace it was in.
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return false
	}
	defer c.Close()
	cred, err := peerCred(c)
	return err == nil && int(cred.Uid) == os.Geteuid() && isKeeper(int(cred.Pid))
}

// String names the keeper, for logs.
func (p *Process) String() string {
	return fmt.Sprintf("keeper %d of executor %d", p.KeeperPid(), p.Pid)
}
