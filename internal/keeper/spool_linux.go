package keeper

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spool mode: an attempt that outlives its agent.
//
// Given a spool directory (attempt.Spool), the keeper owns the executor's
// standard streams instead of handing it the agent's. What the executor
// prints goes, in the order it prints it, to the files stdout and stderr
// of the spool directory, as it comes; the keeper tells the agent how far
// each has grown ({"spooled": …}), and the agent reads them from the
// offsets it has reached. What the agent writes to the executor's stdin
// goes through the keeper ({"stdin": {"id", "data"}}), which writes each
// id once. The agent leaves with the keeper, from time to time, a commit
// ({"commit": …}): what it needs to take the attempt up again from there
// (how far it has read, what it has reported). The keeper keeps the last.
//
// When the agent goes away without releasing the keeper (it stopped, was
// killed, is being upgraded), the attempt goes on, and the keeper listens
// on the socket keeper.sock of the spool directory for a new agent, for
// attempt.Reattach. One that connects (its user the keeper's) is told the
// executor's pid, the last commit, how far the spool is written and the
// executor's end if it has ended ({"hello": …}), and carries on. Past the
// grace, or when the spool directory is gone (the agent's data directory
// removed), the attempt ends as it does when the agent goes away without
// a spool: SIGTERM to the executor's group, SIGKILL after its grace.
//
// Once the executor has ended, the keeper has swept the attempt and the
// spool holds all its output, it says so ({"exit": …}) and waits for the
// agent's {"release": true} (or, with none attached, for one to come
// within the grace) before it exits: an agent killed before it recorded
// the end finds it again.
//
// Nothing is synced: the spool must outlive the agent, not the machine.
// A reboot ends the executor too, and the attempt is then taken up as
// any attempt a crash cut.

// dirCheckEvery is how often a spooling keeper looks whether its spool
// directory is still there; drainAfterExit bounds its wait for the end of
// the executor's output once every process of the attempt is gone.
const (
	dirCheckEvery  = 2 * time.Second
	drainAfterExit = 2 * time.Second
)

// agentConn is an agent attached to the keeper.
type agentConn struct {
	rw    io.ReadWriteCloser
	in    *bufio.Reader
	spoke bool // it sent a message
}

// connMsg is a message from an attached agent, or its going away.
type connMsg struct {
	c    *agentConn
	m    message
	gone bool
}

// keepSpooled is a spooling keeper's life, from the attempt read; it
// returns the keeper's exit code.
func (k *keeperProc) keepSpooled(in *bufio.Reader, spec *attempt, sigs <-chan os.Signal, abi int) int {
	fail := func(err error) int {
		k.send(message{Error: "keeper: " + err.Error()})
		return 1
	}
	sp, err := openSpool(spec.Spool)
	if err != nil {
		return fail(err)
	}
	defer sp.close()
	ln, err := listenSpool(spec.Spool)
	if err != nil {
		return fail(err)
	}
	defer ln.Close()
	var pipes [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < 6; i += 2 {
		if pipes[i], pipes[i+1], err = os.Pipe(); err != nil {
			return fail(err)
		}
	}
	if err := k.start(spec, []*os.File{pipes[0], pipes[3], pipes[5]}); err != nil {
		return 1
	}
	// The executor has its own copies; the keeper keeps the other ends.
	pipes[0].Close()
	pipes[3].Close()
	pipes[5].Close()
	stdin := newStdinWriter(pipes[1])
	go stdin.run()
	if len(spec.Stdin) > 0 {
		stdin.write("", spec.Stdin)
	}
	if !spec.KeepStdin {
		stdin.close()
	}
	outDone, errDone := make(chan struct{}), make(chan struct{})
	go sp.pump(pipes[2], sp.out, true, outDone)
	go sp.pump(pipes[4], sp.err, false, errDone)

	done := make(chan struct{})
	defer close(done)
	go k.notify(sp, done)
	first := &agentConn{rw: k.ctl.(io.ReadWriteCloser), in: in}
	k.send(message{Started: k.pid, ABI: abi})
	msgs := make(chan connMsg)
	go readConn(first, msgs, done)
	newConns := make(chan *agentConn)
	go acceptAgents(ln.UnixListener, newConns, done)

	exited := make(chan Status, 1)
	allGone := make(chan struct{})
	go k.reap(exited, allGone)
	dirCheck := time.NewTicker(dirCheckEvery)
	defer dirCheck.Stop()

	var (
		current          = first
		exit             *Status
		commit           json.RawMessage
		orphaned         <-chan time.Time // the grace for an agent to come back
		comeBackBy       time.Time        // its end
		killTimer        <-chan time.Time
		ending, finished bool // the attempt is being ended; no agent is waited for once it has
	)
	var waiting *agentConn // an agent come while another was attached
	attach := func(c *agentConn) {
		current, orphaned = c, nil
		k.setConn(c.rw, &message{Hello: &Hello{Pid: k.pid, Keeper: os.Getpid(), ABI: abi, Commit: commit, Spooled: sp.sizes(), Exit: exit}})
		go readConn(c, msgs, done)
	}
	// end ends the attempt as a keeper without a spool does when its
	// agent goes away; no agent is taken any more.
	end := func() {
		if ending {
			return
		}
		ending = true
		ln.Close()
		if waiting != nil {
			waiting.rw.Close()
			waiting = nil
		}
		if exit == nil {
			k.signalGroup(syscall.SIGTERM)
			killTimer = time.After(spec.Grace)
		}
	}
	for {
		select {
		case st := <-exited:
			st.Swept = k.sweep(allGone)
			// What is left in the pipes is all there will be (a pipe's
			// worth): it is spooled whatever the window, while this loop
			// takes no commit.
			sp.unbound()
			sp.drain(drainAfterExit, pipes[2], pipes[4], outDone, errDone)
			stdin.abort()
			if k.proxy != nil {
				k.proxy.Close()
				d := k.proxy.Denied()
				st.Egress = &d
			}
			exit = &st
			s := sp.sizes()
			k.send(message{Spooled: &s})
			k.send(message{Exit: exit})
			if finished || ending {
				return 0
			}
		case cm := <-msgs:
			if cm.c != current {
				continue // an agent that left
			}
			if cm.gone {
				current = nil
				k.setConn(nil, nil)
				if waiting != nil {
					attach(waiting)
					waiting = nil
					continue
				}
				if !ending {
					// One that said nothing (a look whether the keeper
					// is there) does not give the attempt more time.
					if cm.c.spoke || comeBackBy.IsZero() {
						comeBackBy = time.Now().Add(spec.Reattach)
					}
					orphaned = time.After(time.Until(comeBackBy))
				}
				continue
			}
			cm.c.spoke = true
			switch m := cm.m; {
			case m.Signal > 0:
				if m.Group {
					k.signalGroup(syscall.Signal(m.Signal))
				} else {
					_ = syscall.Kill(k.pid, syscall.Signal(m.Signal))
				}
			case m.Input != nil:
				stdin.write(m.Input.ID, m.Input.Data)
			case m.CloseInput:
				stdin.close()
			case m.Commit != nil:
				commit = m.Commit
				if m.Read != nil {
					sp.drop(*m.Read)
				}
			case m.Release && exit != nil:
				return 0
			}
		case c := <-newConns:
			switch {
			case ending:
				c.rw.Close()
			case current != nil:
				// The agent attached may be on its way out (a new one
				// comes as soon as the old one has died): this one waits
				// for its turn, and the one waiting before gives way.
				if waiting != nil {
					waiting.rw.Close()
				}
				waiting = c
			default:
				attach(c)
			}
		case <-orphaned:
			orphaned = nil
			if exit != nil {
				return 0
			}
			end()
		case <-killTimer:
			k.signalGroup(syscall.SIGKILL)
		case s := <-sigs:
			if s == syscall.SIGTERM {
				// At once, and no agent is waited for after.
				finished = true
				ending = true
				ln.Close()
				if exit != nil {
					return 0
				}
				k.signalGroup(syscall.SIGKILL)
			}
		case <-dirCheck.C:
			if _, err := os.Stat(spec.Spool); errors.Is(err, fs.ErrNotExist) {
				finished = true
				if exit != nil {
					return 0
				}
				end()
			}
		}
	}
}

// setConn makes c the agent the keeper talks to, and first tells it
// first, before anything else is sent to it.
func (k *keeperProc) setConn(c io.Writer, first *message) {
	k.sendM.Lock()
	defer k.sendM.Unlock()
	k.ctl = c
	if c != nil && first != nil {
		b, _ := json.Marshal(first)
		_, _ = c.Write(append(b, '\n'))
	}
}

// notify tells the attached agent how far the spool is written, each
// time it has grown.
func (k *keeperProc) notify(sp *spool, done <-chan struct{}) {
	for {
		select {
		case <-sp.kick:
			s := sp.sizes()
			k.send(message{Spooled: &s})
		case <-done:
			return
		}
	}
}

// readConn passes an agent's messages on, then its going away.
func readConn(c *agentConn, msgs chan<- connMsg, done <-chan struct{}) {
	for {
		var m message
		err := readMessage(c.in, &m)
		cm := connMsg{c: c, m: m, gone: err != nil}
		if err != nil {
			c.rw.Close()
		}
		select {
		case msgs <- cm:
		case <-done:
			c.rw.Close()
			return
		}
		if err != nil {
			return
		}
	}
}

// acceptAgents takes the agents that connect to the keeper's socket, of
// the keeper's own user only.
func acceptAgents(ln *net.UnixListener, conns chan<- *agentConn, done <-chan struct{}) {
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		if cred, err := peerCred(c); err != nil || int(cred.Uid) != os.Geteuid() {
			c.Close()
			continue
		}
		select {
		case conns <- &agentConn{rw: c, in: bufio.NewReader(c)}:
		case <-done:
			c.Close()
			return
		}
	}
}

// peerCred is who is at the other end of a Unix socket, as the kernel
// tells.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	return cred, cerr
}

// spool is the attempt's output on disk.
type spool struct {
	out, err *os.File
	mu       sync.Mutex
	s        Spooled
	dropped  Spooled    // how much of each file is punched out (drop)
	read     Spooled    // how far the last commit read each stream
	room     *sync.Cond // on mu: a commit read more (read), or the spool stops
	ended    bool       // the executor's processes are gone: no window holds
	kick     chan struct{}
	stopping chan struct{} // closed when a write that fails is to be given up
	stopOnce sync.Once
}

func openSpool(dir string) (*spool, error) {
	sp := &spool{kick: make(chan struct{}, 1), stopping: make(chan struct{})}
	sp.room = sync.NewCond(&sp.mu)
	var err error
	if sp.out, err = os.OpenFile(filepath.Join(dir, StdoutName), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600); err != nil {
		return nil, err
	}
	if sp.err, err = os.OpenFile(filepath.Join(dir, StderrName), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600); err != nil {
		sp.out.Close()
		return nil, err
	}
	return sp, nil
}

func (sp *spool) close() {
	sp.out.Close()
	sp.err.Close()
}

// dropBlock is what drop punches out in: the file system's block.
const dropBlock = 4096

// spoolWindow is how much of a stream the spool holds past what the last
// commit read: past it, the keeper reads no more from the executor, which
// waits on its pipe as it would for a slow reader. A flood of output thus
// takes the disk a window's worth, not its size; and an attempt whose
// agent is away (a restart) holds at most a window per stream.
const spoolWindow = 2 << 20

// drop punches out of the spool files what an agent's commit has read
// (FALLOC_FL_PUNCH_HOLE, the files keeping their sizes, so that offsets
// hold): no agent reads there again. A file system that cannot punch
// keeps it all, as before.
func (sp *spool) drop(read Spooled) {
	sp.mu.Lock()
	sp.read.Stdout, sp.read.Stderr = max(sp.read.Stdout, read.Stdout), max(sp.read.Stderr, read.Stderr)
	sp.room.Broadcast()
	sp.mu.Unlock()
	for _, f := range []struct {
		file          *os.File
		read, dropped *int64
	}{{sp.out, &read.Stdout, &sp.dropped.Stdout}, {sp.err, &read.Stderr, &sp.dropped.Stderr}} {
		end := *f.read / dropBlock * dropBlock
		if end <= *f.dropped {
			continue
		}
		if err := unix.Fallocate(int(f.file.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, *f.dropped, end-*f.dropped); err == nil {
			*f.dropped = end
		}
	}
}

func (sp *spool) sizes() Spooled {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.s
}

// pump copies one of the executor's streams to its spool file, a read at
// a time, saying how far it is after each; a write that fails (a full
// disk) is tried again: the executor waits on its pipe meanwhile.
func (sp *spool) pump(r, f *os.File, stdout bool, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 64<<10)
	for {
		var n int
		err := io.ErrClosedPipe // given up: the stream ends here
		if sp.waitRoom(stdout) {
			n, err = r.Read(buf)
		}
		if n > 0 && !sp.write(f, buf[:n]) {
			err = io.ErrClosedPipe
		}
		sp.mu.Lock()
		if stdout {
			sp.s.Stdout += int64(n)
			sp.s.StdoutEOF = err != nil
		} else {
			sp.s.Stderr += int64(n)
			sp.s.StderrEOF = err != nil
		}
		sp.mu.Unlock()
		select {
		case sp.kick <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// waitRoom waits until the stream's spool holds less than a window past
// what the last commit read; false when the spool stops meanwhile.
func (sp *spool) waitRoom(stdout bool) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for {
		held := sp.s.Stderr - sp.read.Stderr
		if stdout {
			held = sp.s.Stdout - sp.read.Stdout
		}
		if held < spoolWindow || sp.ended {
			return true
		}
		select {
		case <-sp.stopping:
			return false
		default:
		}
		sp.room.Wait()
	}
}

// unbound lifts the window: the attempt's processes are gone, and what is
// left in its pipes is spooled whole.
func (sp *spool) unbound() {
	sp.mu.Lock()
	sp.ended = true
	sp.room.Broadcast()
	sp.mu.Unlock()
}

// stop gives up the spool's writes and waits: the pumps end.
func (sp *spool) stop() {
	sp.stopOnce.Do(func() {
		close(sp.stopping)
		sp.mu.Lock()
		sp.room.Broadcast()
		sp.mu.Unlock()
	})
}

// write writes b whole, trying again while it fails, until the spool
// stops; false when it gave up.
func (sp *spool) write(f *os.File, b []byte) bool {
	for {
		n, err := f.Write(b)
		if err == nil {
			return true
		}
		b = b[n:]
		select {
		case <-sp.stopping:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// drain waits for the end of the executor's output, which comes once every
// process of the attempt is gone, for at most timeout; then it closes the
// pipes under the pumps (something out of the attempt's reach holds them)
// and waits for the pumps to end.
func (sp *spool) drain(timeout time.Duration, out, err *os.File, outDone, errDone <-chan struct{}) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, d := range []<-chan struct{}{outDone, errDone} {
		select {
		case <-d:
		case <-t.C:
			sp.stop()
			out.Close()
			err.Close()
			<-d
		}
	}
	out.Close()
	err.Close()
}

// stdinWriter writes what the agent sends to the executor's stdin, in
// order, without holding up the keeper: an executor that does not read
// its stdin blocks this writer only. Each id is written once.
type stdinWriter struct {
	w       *os.File
	mu      sync.Mutex
	cond    *sync.Cond
	queue   [][]byte
	closing bool
	seen    map[string]bool
}

func newStdinWriter(w *os.File) *stdinWriter {
	s := &stdinWriter{w: w, seen: map[string]bool{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *stdinWriter) write(id string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || id != "" && s.seen[id] {
		return
	}
	if id != "" {
		s.seen[id] = true
	}
	s.queue = append(s.queue, data)
	s.cond.Signal()
}

// close closes stdin once what was sent before is written.
func (s *stdinWriter) close() {
	s.mu.Lock()
	s.closing = true
	s.cond.Signal()
	s.mu.Unlock()
}

// abort closes stdin now: the executor has ended.
func (s *stdinWriter) abort() {
	s.close()
	s.w.Close()
}

func (s *stdinWriter) run() {
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closing {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			s.w.Close()
			return
		}
		b := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		if _, err := s.w.Write(b); err != nil {
			// The executor closed its stdin or ended: nothing more
			// reaches it.
			s.mu.Lock()
			s.queue, s.closing = nil, true
			s.mu.Unlock()
		}
	}
}

// maxSocketPath is the longest path a Unix socket's address holds.
const maxSocketPath = 107

// socketAddr is the address of the keeper's socket in dir, and a file to
// keep open while it is used: a path too long for a socket's address is
// reached through /proc/self/fd.
func socketAddr(dir string) (string, *os.File, error) {
	path := filepath.Join(dir, SocketName)
	if len(path) <= maxSocketPath {
		return path, nil, nil
	}
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", nil, err
	}
	return "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + SocketName, d, nil
}

// spoolListener is the keeper's socket; closing it removes it.
type spoolListener struct {
	*net.UnixListener
	dir  *os.File
	once sync.Once
}

func (l *spoolListener) Close() error {
	var err error
	l.once.Do(func() {
		err = l.UnixListener.Close()
		if l.dir != nil {
			l.dir.Close()
		}
	})
	return err
}

func listenSpool(dir string) (*spoolListener, error) {
	addr, d, err := socketAddr(dir)
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		if d != nil {
			d.Close()
		}
		return nil, err
	}
	_ = os.Chmod(filepath.Join(dir, SocketName), 0o600)
	return &spoolListener{UnixListener: ln, dir: d}, nil
}
