package server

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/state"
)

// DefaultMaxAttemptOutput is the cap on the log output stored for one
// attempt when Options.MaxAttemptOutput is zero.
const DefaultMaxAttemptOutput = 8 << 20

// decodeLog reads a log event's payload.
func decodeLog(payload json.RawMessage) (api.LogPayload, error) {
	var l api.LogPayload
	err := json.Unmarshal(payload, &l)
	return l, err
}

// markStreamRunes caps the stream named in a mark: the mark's size must
// not depend on what the agent sent.
const markStreamRunes = 64

// markLine is the line the mark adds after the lines kept.
func markLine(limit int64) string {
	return fmt.Sprintf("[control plane] output cut here: this attempt's stored output reached its cap of %s; the lines after this are counted on the task (output_cut_lines, output_cut_bytes), not stored", bytesize.Text(limit))
}

// outputOf is the account a log event for attempt counts against, added
// when new. An attempt number the task cannot have (below 1, or past the
// one it may open next) counts against its current attempt, so that an
// agent cannot open budgets by naming attempts.
func outputOf(t *state.Task, attempt int) *state.AttemptOutput {
	if attempt < 1 || attempt > len(t.Attempts)+1 {
		attempt = max(len(t.Attempts), 1)
	}
	for i := range t.Output {
		if t.Output[i].Attempt == attempt {
			return &t.Output[i]
		}
	}
	t.Output = append(t.Output, state.AttemptOutput{Attempt: attempt})
	return &t.Output[len(t.Output)-1]
}

// admitLog decides what of an accepted log event is stored, and counts
// it. line is the event as stored whole (encodeStored), seq the number it
// is stored under. While the attempt's stored log events stay within the
// cap, the event is stored whole; the one that would pass it is stored
// with as many of its lines as fit and the mark; after the mark, nothing
// of the attempt's is stored (nil) and its lines are counted.
//
// What the agent withheld (l.Withheld: its own cap cut the attempt's
// output before its outbox) is counted as cut the same way: an event that
// carries it is where the cut is marked, if it is not yet, with the
// agent's cap; after the mark it is counted. One story either way: one
// mark, and every line not stored counted on the task.
func (rl *rules) admitLog(t *state.Task, se api.StoredEvent, l api.LogPayload, line []byte, seq int) ([]byte, error) {
	acct := outputOf(t, se.Attempt)
	limit := rl.opts.MaxAttemptOutput
	var withheld api.OutputCut
	if w := l.Withheld; w != nil && (w.Lines > 0 || w.Bytes > 0) {
		withheld = *w
	}
	agentCut := withheld != api.OutputCut{}
	switch {
	case acct.CutAt != 0:
		acct.CutLines = addCount(acct.CutLines, int64(len(l.Lines)), withheld.Lines)
		acct.CutBytes = addCount(acct.CutBytes, textBytes(l.Lines), withheld.Bytes)
		return nil, nil
	case !agentCut && acct.StoredBytes+int64(len(line)) <= limit:
		acct.StoredBytes += int64(len(line))
		return line, nil
	}
	capBytes := limit
	if agentCut && withheld.CapBytes > 0 {
		capBytes = min(limit, withheld.CapBytes)
	}
	marked, cut, err := markCut(se, l.LogEvent, limit-acct.StoredBytes, capBytes, withheld)
	if err != nil {
		return nil, err
	}
	acct.StoredBytes += int64(len(marked))
	acct.CutAt, acct.CutLines, acct.CutBytes = seq, addCount(acct.CutLines, cut.Lines), addCount(acct.CutBytes, cut.Bytes)
	return marked, nil
}

// addCount adds counts, an agent's among them: at most MaxInt64, never
// wrapping below 0 whatever an agent says it withheld.
func addCount(a int64, more ...int64) int64 {
	for _, b := range more {
		if b > math.MaxInt64-a {
			return math.MaxInt64
		}
		a += b
	}
	return a
}

// markCut is se stored with as many of l's lines as fit in room bytes,
// the mark line after them, and the mark, which counts the lines left out
// and what the agent withheld before them. The mark itself may pass room:
// it is at most a couple of KiB (keys, ids and the stream it names are
// capped).
func markCut(se api.StoredEvent, l state.LogEvent, room, limit int64, withheld api.OutputCut) ([]byte, api.OutputCut, error) {
	mark := markLine(limit)
	p := api.LogPayload{LogEvent: state.LogEvent{Stream: state.LogStream(state.Ellipsize(string(l.Stream), markStreamRunes)), Lines: []string{mark}},
		Cut: &api.OutputCut{CapBytes: limit, Lines: math.MaxInt64, Bytes: math.MaxInt64}} // the widest counts: an upper bound
	base, err := withPayload(se, p)
	if err != nil {
		return nil, api.OutputCut{}, err
	}
	size, keep := int64(len(base)), 0
	for ; keep < len(l.Lines); keep++ {
		q, err := json.Marshal(l.Lines[keep])
		if err != nil {
			return nil, api.OutputCut{}, err
		}
		if size+int64(len(q))+1 > room { // the line and its comma
			break
		}
		size += int64(len(q)) + 1
	}
	cut := api.OutputCut{CapBytes: limit, Lines: addCount(int64(len(l.Lines)-keep), withheld.Lines), Bytes: addCount(textBytes(l.Lines[keep:]), withheld.Bytes)}
	p.Lines, p.Cut = append(slices.Clip(l.Lines[:keep]), mark), &cut
	line, err := withPayload(se, p)
	return line, cut, err
}

// withPayload is se stored with payload p instead of its own.
func withPayload(se api.StoredEvent, p api.LogPayload) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	se.Payload = b
	return encodeStored(se)
}

// replayLog counts a stored log event that a start applies again (see
// recover): it was stored, so it counts as stored, and its mark as the
// cut.
func replayLog(t *state.Task, size int64, l api.LogPayload, attempt, seq int) {
	acct := outputOf(t, attempt)
	acct.StoredBytes += size
	if l.Cut != nil {
		acct.CutAt, acct.CutLines, acct.CutBytes = seq, addCount(acct.CutLines, l.Cut.Lines), addCount(acct.CutBytes, l.Cut.Bytes)
	}
}

// textBytes is the size of lines' text.
func textBytes(lines []string) int64 {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return int64(n)
}

// encodeStored is e as a line of the task's events, its newline included
// (the stores keep it without: the size counted against the cap is the
// line's in an events file).
func encodeStored(e api.StoredEvent) ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
