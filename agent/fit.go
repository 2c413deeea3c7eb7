package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
)

// Records must fit the outbox's record limit (and a control plane's batch):
// a report that would not is made to fit where it is made, so that nothing
// is refused later, and never by losing a completion.
//
//   - a log report keeps whole lines while they fit, then says how much it
//     cut;
//   - a completion's result is stored in full in the task's work directory,
//     and the record says where;
//   - other reports have their text cut, with a marker.
const (
	recordRoom = 8 << 10  // for the envelope around a payload
	maxText    = 64 << 10 // the longest message, summary or reason kept whole
)

// fit returns r's payload, encoded, at most limit bytes.
func (a *Agent) fit(taskID string, r runner.Report, limit int) ([]byte, error) {
	payload, err := json.Marshal(r.Payload)
	if err != nil || len(payload) <= limit {
		return payload, err
	}
	if a.log != nil {
		a.log.Warn("report over the record limit; made to fit", "task", taskID, "kind", r.Kind(), "bytes", len(payload), "limit", limit)
	}
	switch p := r.Payload.(type) {
	case state.LogEvent:
		return json.Marshal(fitLog(p, limit))
	case state.CompleteEvent:
		path, err := a.storeResult(taskID, payload)
		if err != nil {
			return nil, fmt.Errorf("completion of %d bytes over the record limit, and it could not be stored: %w", len(payload), err)
		}
		p.Summary = cut(p.Summary, maxText)
		p.Result = map[string]any{"stored_in": path, "bytes": len(payload), "note": "the whole completion was over the record limit"}
		for i := range p.Attempts {
			p.Attempts[i] = fitAttempt(p.Attempts[i])
		}
		return json.Marshal(p)
	case state.Attempt:
		return json.Marshal(fitAttempt(p))
	case state.ProgressEvent:
		p.Message = cut(p.Message, maxText)
		return json.Marshal(p)
	case state.PhaseEvent:
		p.Reason = cut(p.Reason, maxText)
		return json.Marshal(p)
	case state.DiffEvent:
		return fitDiff(p, len(payload), limit)
	}
	return payload, nil
}

// fitDiff cuts a diff's patch (whose encoding, size bytes, is over
// limit: a patch of control characters, each written \u00XX) at a
// line's end until the diff fits.
func fitDiff(d state.DiffEvent, size, limit int) ([]byte, error) {
	for {
		keep := len(d.Patch) * (limit - 1024) / size
		d.Patch, _ = state.CutPatch(d.Patch, max(keep, 0))
		d.Cut = true
		b, err := json.Marshal(d)
		if err != nil || len(b) <= limit {
			return b, err
		}
		size = len(b)
	}
}

// fitLog keeps whole lines, each at most maxText, while they fit, and says
// what it cut.
func fitLog(l state.LogEvent, limit int) state.LogEvent {
	out := state.LogEvent{Stream: l.Stream}
	size, dropped, droppedBytes := 64, 0, 0
	for _, line := range l.Lines {
		line = cut(line, maxText)
		if size+len(line)+8 > limit-256 {
			dropped++
			droppedBytes += len(line)
			continue
		}
		out.Lines = append(out.Lines, line)
		size += len(line) + 8
	}
	if dropped > 0 {
		out.Lines = append(out.Lines, fmt.Sprintf("…[%d line(s), %d bytes cut: over the record limit]", dropped, droppedBytes))
	}
	return out
}

func fitAttempt(a state.Attempt) state.Attempt {
	if a.Error != nil {
		e := *a.Error
		e.Message = cut(e.Message, maxText)
		a.Error = &e
	}
	return a
}

// cut shortens s to n bytes with a marker.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…[%d bytes cut]", len(s)-n)
}

// storeResult writes a whole completion to the task's log directory:
// out of every task's reach, and not in its work directory, which is its
// clone when it works on a repository (the agent would commit it there,
// and cleanup count it as work).
func (a *Agent) storeResult(taskID string, payload []byte) (string, error) {
	dir := a.layout.Logs(taskID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("completion-%d.json", time.Now().UnixNano()))
	return path, datadir.WriteFile(path, payload)
}
