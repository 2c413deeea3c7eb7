package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/internal/durable"
	"github.com/edgeagent/agent/state"
)

// What a task's output may take of the data directory's disk. A task that
// prints without end must not fill it: the agent could then write
// nothing, not even that task's completion, and would claim nothing until
// the disk emptied. Two bounds keep it from that:
//
//   - The output cap: an attempt's log lines go into the outbox up to the
//     smaller of Config.MaxAttemptOutput and the cap the control plane
//     keeps of them (its heartbeat answer says it): more would only be cut
//     there. Past it, lines are counted, not kept, and the counts
//     go to the control plane on the log record where the cap cut
//     (output_withheld), then before the task's next phase, progress,
//     attempt or completion record. The control plane counts them as cut:
//     its one mark and the task's output_cut_lines tell the whole story.
//     The local task log keeps its own head and tail (TaskLogMaxBytes).
//   - Progress records of an attempt take at most the same cap, apart:
//     past it they are refused (the task's state file keeps the progress).
//   - The disk floor: while the data directory's file system has less free
//     than diskFloor, log and progress records are refused (the lines
//     counted) and phase, attempt and completion records still append.
//     Once space returns, the task's next record is preceded by one line
//     saying how much of its output was dropped.
//
// Accepted records are never dropped: what is refused is refused before
// it is written, and said.

// DefaultMaxAttemptOutput is the cap on one attempt's output in the
// outbox, the control plane's own default.
const DefaultMaxAttemptOutput = int64(8 << 20)

// minMaxAttemptOutput is the smallest cap taken, from the settings or a
// control plane: the control plane's own least.
const minMaxAttemptOutput = int64(64 << 10)

// The disk floor is a sixteenth of the file system, within these bounds:
// room for completions (a record is at most 1 MiB), task states, the
// outbox's marks and its compaction.
const (
	minDiskFloor = int64(2 << 20)
	maxDiskFloor = int64(64 << 20)
)

// diskFloor is the free space kept for the agent's own records on a file
// system of size bytes.
func diskFloor(size int64) int64 { return min(max(size/16, minDiskFloor), maxDiskFloor) }

// outputBounds keeps the accounts of the attempts' output in the outbox.
type outputBounds struct {
	own  int64        // Config.MaxAttemptOutput
	told atomic.Int64 // the control plane's cap, as its last heartbeat answer said (0: not said)
	dir  string       // the data directory
	free func(string) int64
	size func(string) int64
	log  *slog.Logger

	mu       sync.Mutex
	attempts map[logKey]*attemptOutput
	dropped  map[string]*lineCount // per task: lines refused under the floor, not yet said
	low      bool                  // under the floor at the last look
}

// lineCount counts lines of output and their bytes.
type lineCount struct{ lines, bytes int64 }

func (c *lineCount) add(lines []string) {
	c.lines += int64(len(lines))
	for _, l := range lines {
		c.bytes += int64(len(l))
	}
}

// attemptOutput is what one attempt put in the outbox.
type attemptOutput struct {
	put      int64     // the payload bytes of its log records
	cutAt    int64     // the cap that cut it; 0 while it is not cut
	withheld lineCount // lines past the cap not yet said
	progress int64     // the payload bytes of its progress records
}

func newOutputBounds(own int64, dir string, log *slog.Logger) *outputBounds {
	if own <= 0 {
		own = DefaultMaxAttemptOutput
	}
	return &outputBounds{own: own, dir: dir, free: durable.FreeBytes, size: durable.SizeBytes, log: log,
		attempts: map[logKey]*attemptOutput{}, dropped: map[string]*lineCount{}}
}

// limit is the cap now: the smaller of the agent's own and the control
// plane's (what it keeps, once it has said: more would only be cut
// there; a person's smaller cap, for a small disk, holds all the same).
func (b *outputBounds) limit() int64 {
	if told := b.told.Load(); told > 0 {
		return min(b.own, max(told, minMaxAttemptOutput))
	}
	return b.own
}

// underFloor reports whether the data directory's file system has less
// free than its floor, and says so in the log when that changes. mu is
// held.
func (b *outputBounds) underFloor() bool {
	free := b.free(b.dir)
	if free < 0 {
		return false // it cannot be told: the disk's own errors will say
	}
	floor := diskFloor(b.size(b.dir))
	low := free < floor
	if low != b.low {
		if low {
			b.log.Warn("the data directory's disk is nearly full: tasks' output and progress are not kept until space returns; phases and completions are",
				"free", bytesize.Text(free), "floor", bytesize.Text(floor))
		} else {
			b.log.Info("the data directory's disk has room again: tasks' output and progress are kept", "free", bytesize.Text(free))
		}
		b.low = low
	}
	return low
}

// admitLog decides what of an attempt's log lines go into the outbox: the
// lines of l that do (write false: none) and, on the record where the cap
// cuts the attempt's output, what it withheld of l.
func (b *outputBounds) admitLog(taskID string, attempt int, l state.LogEvent) (out state.LogEvent, withheld *api.OutputCut, write bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	acct := b.account(taskID, attempt)
	if acct.cutAt != 0 {
		acct.withheld.add(l.Lines)
		return state.LogEvent{}, nil, false
	}
	if b.underFloor() {
		b.droppedOf(taskID).add(l.Lines)
		return state.LogEvent{}, nil, false
	}
	limit := b.limit()
	base, sizes := logSizes(l)
	size := base
	for _, n := range sizes {
		size += n
	}
	if acct.put+size <= limit {
		acct.put += size
		return l, nil, true
	}
	keep, used := 0, base
	for ; keep < len(sizes) && acct.put+used+sizes[keep] <= limit; keep++ {
		used += sizes[keep]
	}
	var rest lineCount
	rest.add(l.Lines[keep:])
	acct.put += used
	acct.cutAt = limit
	return state.LogEvent{Stream: l.Stream, Lines: l.Lines[:keep:keep]}, &api.OutputCut{CapBytes: limit, Lines: rest.lines, Bytes: rest.bytes}, true
}

// logSizes are the bytes of l's payload without lines, and what each
// line adds to it.
func logSizes(l state.LogEvent) (base int64, lines []int64) {
	b, _ := json.Marshal(state.LogEvent{Stream: l.Stream, Lines: []string{}})
	lines = make([]int64, len(l.Lines))
	for i, line := range l.Lines {
		q, _ := json.Marshal(line)
		lines[i] = int64(len(q)) + 1 // and its comma
	}
	return int64(len(b)), lines
}

// admitProgress reports whether an attempt's progress record of size
// bytes goes into the outbox: within the cap, and not under the floor
// (the task's state file keeps the progress all the same).
func (b *outputBounds) admitProgress(taskID string, attempt int, size int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	acct := b.account(taskID, attempt)
	if acct.progress+size > b.limit() || b.underFloor() {
		return false
	}
	acct.progress += size
	return true
}

// note is a record the agent writes of its own before one of a task's.
type note struct {
	attempt int
	payload any
}

// notes are the records to write before one of taskID's that is
// written: how many of its lines were dropped under the floor and, before
// a record other than a log (final), what each of its attempts withheld
// past the cap since it last said so.
func (b *outputBounds) notes(taskID string, attempt int, final bool) []note {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []note
	if d := b.dropped[taskID]; d != nil {
		delete(b.dropped, taskID)
		out = append(out, note{attempt, state.LogEvent{Stream: state.LogAgent, Lines: []string{fmt.Sprintf(
			"[agent] %d line(s) of output (%s) dropped: the data directory's disk was nearly full, and the agent keeps its last space for its own records",
			d.lines, bytesize.Text(d.bytes))}}})
	}
	if final {
		var withheld []note
		for k, acct := range b.attempts {
			if k.task != taskID || acct.withheld.lines == 0 && acct.withheld.bytes == 0 {
				continue
			}
			withheld = append(withheld, note{k.attempt, api.LogPayload{LogEvent: state.LogEvent{Stream: state.LogAgent, Lines: []string{}},
				Withheld: &api.OutputCut{CapBytes: acct.cutAt, Lines: acct.withheld.lines, Bytes: acct.withheld.bytes}}})
			acct.withheld = lineCount{}
		}
		slices.SortFunc(withheld, func(x, y note) int { return x.attempt - y.attempt })
		out = append(out, withheld...)
	}
	return out
}

// attemptEnded forgets an attempt's account; taskEnded all of a task's.
// Their notes are written first (notes, final).
func (b *outputBounds) attemptEnded(taskID string, attempt int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.attempts, logKey{taskID, attempt})
}

func (b *outputBounds) taskEnded(taskID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.attempts {
		if k.task == taskID {
			delete(b.attempts, k)
		}
	}
	delete(b.dropped, taskID)
}

// account is an attempt's, made when new. mu is held.
func (b *outputBounds) account(taskID string, attempt int) *attemptOutput {
	k := logKey{taskID, attempt}
	acct := b.attempts[k]
	if acct == nil {
		acct = &attemptOutput{}
		b.attempts[k] = acct
	}
	return acct
}

// droppedOf is a task's count of lines refused under the floor, made
// when new. mu is held.
func (b *outputBounds) droppedOf(taskID string) *lineCount {
	d := b.dropped[taskID]
	if d == nil {
		d = &lineCount{}
		b.dropped[taskID] = d
	}
	return d
}
