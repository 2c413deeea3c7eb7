package main

import (
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// committer is a minimal group commit: writers hand their record to one
// goroutine, which takes every record waiting, flushes them with one call
// (one write and one sync) and answers them all. It is the yardstick the
// outbox's concurrent appends are compared with, and the batched
// tidwall/wal contender reuses it with a different flush.
type committer struct {
	reqs  chan *commitReq
	flush func(batch []*commitReq) error
	syncs atomic.Int64
	// committed counts the records of flushes that succeeded.
	committed atomic.Int64
	done      chan struct{}
}

type commitReq struct {
	payload []byte
	err     chan error
}

// maxGroup bounds one flush, so one batch's write stays a few MiB at most.
const maxGroup = 1024

func newCommitter(flush func([]*commitReq) error) *committer {
	c := &committer{reqs: make(chan *commitReq, maxGroup), flush: flush, done: make(chan struct{})}
	go c.loop()
	return c
}

func (c *committer) loop() {
	defer close(c.done)
	batch := make([]*commitReq, 0, maxGroup)
	for r := range c.reqs {
		batch = append(batch[:0], r)
	more:
		for len(batch) < maxGroup {
			select {
			case r, ok := <-c.reqs:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		err := c.flush(batch)
		c.syncs.Add(1)
		if err == nil {
			c.committed.Add(int64(len(batch)))
		}
		for _, r := range batch {
			r.err <- err
		}
	}
}

func (c *committer) append(p []byte) error {
	r := &commitReq{payload: p, err: make(chan error, 1)}
	c.reqs <- r
	return <-r.err
}

func (c *committer) close() { close(c.reqs); <-c.done }

// groupFile is the hand-written group commit on a plain file: each record
// is one line, {"seq":N,"payload":...}, written and fdatasynced in groups.
type groupFile struct {
	*committer
	f   *os.File
	seq uint64
	buf []byte
}

func openGroupFile(dir string) (appender, error) {
	f, err := os.OpenFile(dir+"/group.jsonl", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	g := &groupFile{f: f}
	g.committer = newCommitter(func(batch []*commitReq) error {
		g.buf = g.buf[:0]
		for _, r := range batch {
			g.seq++
			g.buf = strconv.AppendUint(append(g.buf, `{"seq":`...), g.seq, 10)
			g.buf = append(append(append(g.buf, `,"payload":`...), r.payload...), "}\n"...)
		}
		if _, err := g.f.Write(g.buf); err != nil {
			return err
		}
		return syscall.Fdatasync(int(g.f.Fd()))
	})
	return g, nil
}

func (g *groupFile) syncCount() int64 { return g.syncs.Load() }
func (g *groupFile) appended() int64  { return g.committed.Load() }

func (g *groupFile) close() error { g.committer.close(); return g.f.Close() }
