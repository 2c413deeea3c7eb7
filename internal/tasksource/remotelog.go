package tasksource

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/bytesize"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/state"
)

// RemoteLog reads a task's output from the control plane's events, page
// after page, printing each log event's lines as the agent's log files
// hold them (time, stream, text), with a header before each attempt's
// lines when several are shown, and the control plane's mark where it cut
// an attempt's output.
type RemoteLog struct {
	c     *controlplane.Client
	id    string
	only  int    // one attempt, or 0 for all
	after string // the cursor: the last event read
	shown int    // the attempt whose lines were printed last
	print func(string)
}

// NewRemoteLog reads task id's output (attempt only, 0 for all) from c,
// each line to print.
func NewRemoteLog(c *controlplane.Client, id string, only int, print func(string)) *RemoteLog {
	return &RemoteLog{c: c, id: id, only: only, print: print}
}

// Next prints the log lines stored since the last call.
func (r *RemoteLog) Next(ctx context.Context) error {
	for {
		events, next, err := r.c.TaskEventsPage(ctx, r.id, r.after, api.MaxEventsPage)
		if err != nil {
			return err
		}
		for _, e := range events {
			if e.Seq > 0 {
				r.after = strconv.Itoa(e.Seq)
			}
			if e.Kind != state.EventLog || r.only > 0 && e.Attempt != r.only {
				continue
			}
			var p api.LogPayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				return fmt.Errorf("task %s: a log event the control plane stored does not read: %v", r.id, err)
			}
			if r.only == 0 && r.shown != e.Attempt {
				r.print(fmt.Sprintf("== attempt %d ==", e.Attempt))
				r.shown = e.Attempt
			}
			ts := datadir.LogTime(e.CreatedAt)
			for _, l := range p.Lines {
				r.print(datadir.LogLine(ts, string(p.Stream), l))
			}
			if p.Cut != nil {
				r.print(datadir.LogLine(ts, "agent", fmt.Sprintf("… the control plane keeps %s of an attempt's output: it cut %d lines (%s) here and counts what follows …",
					bytesize.Text(p.Cut.CapBytes), p.Cut.Lines, bytesize.Text(p.Cut.Bytes))))
			}
		}
		if next == "" || len(events) == 0 {
			return nil
		}
		r.after = next
	}
}
