package agent

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/state"
)

// taskLogs writes the attempt logs of the running tasks, each capped at
// max bytes: the head and the tail of the output are kept, the middle is
// counted.
//
// A log file is append-only while its attempt runs, so that `tasks logs -f`
// can follow it by offset. The first half of the cap is written as it
// comes. Past it, one line says the output is held, and the lines that
// follow are kept in memory, in a ring holding the last half of the cap;
// when the attempt ends (its task ends, or the task's next attempt begins)
// one line "… N bytes (M lines) omitted …" and the ring are appended. The
// file never passes the cap, even while a task floods its output. A crash
// loses the ring: the head and the notice stay.
type taskLogs struct {
	max int64

	mu   sync.Mutex
	open map[logKey]*cappedLog
}

// logKey names one attempt's log.
type logKey struct {
	task    string
	attempt int
}

// Bounds of the log cap.
const (
	// DefaultTaskLogMaxBytes is the cap of one attempt's log.
	DefaultTaskLogMaxBytes = int64(1 << 20)
	// minTaskLogBytes is the smallest cap taken: room for a head, a
	// tail and the two lines between them.
	minTaskLogBytes = int64(4 << 10)
	// logMarkRoom is kept out of each half of the cap for the notice and
	// the omitted line, so that the file stays within the cap.
	logMarkRoom = 256
)

func newTaskLogs(limit int64) *taskLogs {
	if limit <= 0 {
		limit = DefaultTaskLogMaxBytes
	}
	return &taskLogs{max: max(limit, minTaskLogBytes), open: map[logKey]*cappedLog{}}
}

// half is the budget of the head, and of the tail.
func (t *taskLogs) half() int64 { return t.max/2 - logMarkRoom }

// cappedLog is one attempt's log while it is written.
type cappedLog struct {
	mu     sync.Mutex
	layout datadir.Layout
	key    logKey
	size   int64 // bytes in the file, as far as this process knows
	cut    bool  // the head is full: lines go to the ring
	lastAt time.Time

	ring      [][]byte // the last lines, oldest at ring[first]
	first     int
	ringBytes int64
	omitted   struct{ bytes, lines int64 }
}

// append writes lines of an attempt's output: to the file while the head
// has room, to the ring after.
func (t *taskLogs) append(l datadir.Layout, taskID string, attempt int, at time.Time, stream state.LogStream, lines []string) error {
	c, ended := t.get(l, logKey{taskID, attempt})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastAt = at
	ts := logTime(at)
	var out []byte
	for _, line := range lines {
		b := logLine(ts, string(stream), line)
		if !c.cut && c.size+int64(len(out)+len(b)) <= t.half() {
			out = append(out, b...)
			continue
		}
		if !c.cut {
			c.cut = true
			out = append(out, logMark(at, fmt.Sprintf("… output past %s is held: its last %s follow when the attempt ends …",
				bytesize.Text(t.half()), bytesize.Text(t.half())))...)
		}
		c.keep(b, t.half())
	}
	if len(out) == 0 {
		return ended
	}
	if err := l.AppendLog(taskID, attempt, out); err != nil {
		return errors.Join(ended, err)
	}
	c.size += int64(len(out))
	return ended
}

// get returns the attempt's log, opening it. A new attempt of a task ends
// the task's earlier ones: their tails are written, and the error of that
// is returned.
func (t *taskLogs) get(l datadir.Layout, k logKey) (*cappedLog, error) {
	t.mu.Lock()
	c := t.open[k]
	var ended []*cappedLog
	if c == nil {
		for other, o := range t.open {
			if other.task == k.task {
				ended = append(ended, o)
				delete(t.open, other)
			}
		}
		c = &cappedLog{layout: l, key: k}
		// A task resumed after a restart goes on with the file it has.
		if info, err := os.Lstat(l.Log(k.task, k.attempt)); err == nil {
			c.size = info.Size()
			c.cut = c.size >= t.half()
		}
		t.open[k] = c
	}
	t.mu.Unlock()
	var errs []error
	for _, o := range ended {
		errs = append(errs, o.close())
	}
	return c, errors.Join(errs...)
}

// finish writes the tails of a task's logs; the task has ended.
func (t *taskLogs) finish(taskID string) error {
	t.mu.Lock()
	var ended []*cappedLog
	for k, c := range t.open {
		if k.task == taskID {
			ended = append(ended, c)
			delete(t.open, k)
		}
	}
	t.mu.Unlock()
	var errs []error
	for _, c := range ended {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// keep puts b in the ring, dropping the oldest lines past max bytes. A line
// longer than the ring is cut to its start.
func (c *cappedLog) keep(b []byte, limit int64) {
	if int64(len(b)) > limit {
		c.omitted.bytes += int64(len(b)) - limit
		b = append(b[:limit-int64(len("…\n"))], "…\n"...)
	}
	c.ring = append(c.ring, b)
	c.ringBytes += int64(len(b))
	for c.ringBytes > limit {
		old := c.ring[c.first]
		c.ring[c.first] = nil
		c.first++
		c.ringBytes -= int64(len(old))
		c.omitted.bytes += int64(len(old))
		c.omitted.lines++
	}
	if c.first > len(c.ring)/2 { // keep the ring's memory to what it holds
		c.ring = append(c.ring[:0:0], c.ring[c.first:]...)
		c.first = 0
	}
}

// close appends the omitted line and the tail, if the log was cut.
func (c *cappedLog) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cut {
		return nil
	}
	out := logMark(c.lastAt, fmt.Sprintf("… %d bytes (%d lines) omitted …", c.omitted.bytes, c.omitted.lines))
	for _, b := range c.ring[c.first:] {
		out = append(out, b...)
	}
	c.ring, c.first, c.ringBytes, c.cut = nil, 0, 0, false
	if err := c.layout.AppendLog(c.key.task, c.key.attempt, out); err != nil {
		return err
	}
	c.size += int64(len(out))
	return nil
}

// logLine is one line of a log: the time, the stream and the text.
func logLine(ts, stream, text string) []byte {
	return []byte(datadir.LogLine(ts, stream, text) + "\n")
}

// logTime is a log line's time: UTC, to the millisecond.
func logTime(at time.Time) string { return datadir.LogTime(at) }

// logMark is a line the agent itself writes into a log.
func logMark(at time.Time, msg string) []byte { return logLine(logTime(at), "agent", msg) }
