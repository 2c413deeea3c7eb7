package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
)

// A live stream (GET /events?view=tasks|task|inbox|agents) sends what
// changed on its page as Server-Sent Events:
//
//	event: replace  data: {"id": "<element id>", "html": "<fragment>", "into": "<container id>"}
//	event: remove   data: {"id": "<element id>"}
//	event: order    data: {"into": "<container id>", "ids": ["<element id>", ...]}
//	event: log      data: {"lines": "<lines, each ending in a newline>"}
//
// An order puts the container's elements in the order of ids (the tasks
// page: those that need a person on top, then the newest first).
// A replace takes the place of the element with that id, or, when the
// page has none, is appended to the container "into" names (or the
// page's [data-container]). A task's events and log lines carry the seq
// of the last event as the event's id: a stream that reconnects
// (Last-Event-ID) goes on from there; everything else is sent whole
// again.

// fragment is a part of a page the stream keeps up to date. Key is what
// it shows, less what the script advances by itself (elapsed times,
// countdowns): the stream sends it again only when Key changes.
type fragment struct {
	id, into, key string
	render        func() (string, error)
}

// streamQuery is what a stream watches.
type streamQuery struct {
	view   string
	id     string
	filter taskFilter
	after  int // a task's last event sent
	// order is the order of the tasks page's cards last sent.
	order string
}

func streamQueryOf(r *http.Request) (streamQuery, error) {
	q := streamQuery{view: r.URL.Query().Get("view"), id: r.URL.Query().Get("id")}
	switch q.view {
	case "tasks":
		f, err := filterOf(r)
		if err != nil {
			return q, err
		}
		q.filter = f
	case "task":
		if q.id == "" {
			return q, &Error{http.StatusBadRequest, "view task needs an id"}
		}
		after := r.Header.Get("Last-Event-ID")
		if after == "" {
			after = r.URL.Query().Get("after")
		}
		if after != "" {
			n, err := strconv.Atoi(after)
			if err != nil || n < 0 {
				return q, &Error{http.StatusBadRequest, fmt.Sprintf("after %q: want an event's seq", after)}
			}
			q.after = n
		}
	case "inbox", "agents":
	default:
		return q, &Error{http.StatusBadRequest, fmt.Sprintf("view %q: want tasks, task, inbox or agents", q.view)}
	}
	return q, nil
}

// stream serves a page's live stream until the client goes, the session
// ends or the server shuts down.
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	s, ok, err := c.session(r)
	if err != nil {
		http.Error(w, errStoreDown, http.StatusServiceUnavailable)
		return
	}
	if !ok {
		http.Error(w, "not signed in: sign in at /signin", http.StatusUnauthorized)
		return
	}
	q, err := streamQueryOf(r)
	if err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	if n := c.streams.Add(1); n > int64(c.opts.MaxStreams) {
		c.streams.Add(-1)
		http.Error(w, fmt.Sprintf("too many live streams open (%d); try again later", c.opts.MaxStreams), http.StatusServiceUnavailable)
		return
	}
	defer c.streams.Add(-1)
	// The first look decides the answer: a task there is none of, or a
	// cursor that names none, is an error status, which the browser's
	// EventSource does not retry.
	sent := map[string]string{} // element id → the key sent
	ctx := r.Context()
	var first bytes.Buffer
	if err := c.look(ctx, s, &q, sent, &events{to: &first}); err != nil {
		http.Error(w, err.Error(), statusOf(err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &events{to: w, rc: http.NewResponseController(w)}
	out.write(first.String())
	tick := time.NewTicker(c.opts.Poll)
	defer tick.Stop()
	lastWrite, lastErr := time.Now(), ""
	for {
		if out.err != nil || out.flush() != nil {
			return // the client is gone
		}
		out.n = 0
		select {
		case <-ctx.Done():
			return
		case <-c.backend.Stopping():
			return
		case <-tick.C:
		}
		if _, ok, err := c.session(r); err != nil {
			continue // the store is down: the look would fail too; it may come back
		} else if !ok {
			return // signed out (here or on another replica), or its token removed
		}
		if err := c.look(ctx, s, &q, sent, out); err != nil {
			if ctx.Err() != nil {
				return
			}
			if err.Error() != lastErr { // once, not every second
				c.log.Warn("console: live stream: reading the control plane", "view", q.view, "err", err)
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
		if out.n > 0 {
			lastWrite = time.Now()
		} else if time.Since(lastWrite) >= keepAlive {
			out.comment("keep-alive")
			lastWrite = time.Now()
		}
	}
}

// look sends what changed of the stream's view since sent.
func (c *Console) look(ctx context.Context, s session, q *streamQuery, sent map[string]string, out *events) error {
	n, err := c.inboxCount(ctx)
	if err != nil {
		return err
	}
	frags := []fragment{{id: "inbox-count", key: strconv.Itoa(n), render: func() (string, error) { return c.fragment("inbox-count", n) }}}
	csrf := s.csrf()
	var order []string // the tasks page's cards, in order
	switch q.view {
	case "tasks":
		cards, _, err := c.taskCards(ctx, q.filter)
		if err != nil {
			return err
		}
		for _, cd := range cards {
			frags = append(frags, c.cardFragment(cd))
			order = append(order, "task-"+cd.ID)
		}
	case "task":
		tv, err := c.backend.TaskView(ctx, q.id)
		if err != nil {
			return err
		}
		d := c.taskParts(&tv, csrf)
		frags = append(frags, c.cardFragment(d.Card),
			fragment{id: "actions", key: fmt.Sprintf("%+v", d.Actions), render: func() (string, error) { return c.fragment("actions", d.Actions) }},
			fragment{id: "question-slot", key: fmt.Sprintf("%+v", d.Question), render: func() (string, error) { return c.fragment("question-slot", d.Question) }},
			fragment{id: "timeline", key: timelineKey(d.Timeline), render: func() (string, error) { return c.fragment("timeline", d.Timeline) }},
			fragment{id: "result-slot", key: fmt.Sprintf("%+v", d.Result), render: func() (string, error) { return c.fragment("result-slot", d.Result) }})
	case "inbox":
		list, err := c.approvals(ctx, csrf)
		if err != nil {
			return err
		}
		for _, a := range list {
			frags = append(frags, fragment{id: "approval-" + a.TaskID, into: "inbox", key: fmt.Sprintf("%+v", a),
				render: func() (string, error) { return c.fragment("approval", a) }})
		}
		if len(list) == 0 {
			frags = append(frags, fragment{id: "inbox-empty", into: "inbox-status", key: "empty",
				render: func() (string, error) { return c.fragment("inbox-empty", nil) }})
		}
	case "agents":
		list, err := c.agentCards(ctx)
		if err != nil {
			return err
		}
		for _, a := range list {
			key := a
			key.Ago = ""
			frags = append(frags, fragment{id: "agent-" + a.ID, into: "agents", key: fmt.Sprintf("%+v", key),
				render: func() (string, error) { return c.fragment("agent", a) }})
		}
	}
	seen := map[string]bool{}
	for _, f := range frags {
		seen[f.id] = true
		if k, ok := sent[f.id]; ok && k == f.key {
			continue
		}
		html, err := f.render()
		if err != nil {
			return err
		}
		out.send("replace", "", map[string]string{"id": f.id, "html": html, "into": f.into})
		sent[f.id] = f.key
	}
	for id := range sent {
		if !seen[id] {
			out.send("remove", "", map[string]string{"id": id})
			delete(sent, id)
		}
	}
	// A new card is appended, and a card may move (a task that comes to
	// need a person goes on top): the page's order, when it changed.
	if key := strings.Join(order, " "); q.view == "tasks" && key != q.order {
		out.send("order", "", map[string]any{"into": "tasks", "ids": order})
		q.order = key
	}
	if q.view == "task" {
		return c.tailTo(ctx, q, out)
	}
	return nil
}

// tailTo sends a task's events after the last sent, and their log lines.
func (c *Console) tailTo(ctx context.Context, q *streamQuery, out *events) error {
	rows, lines, last, err := c.tail(ctx, q.id, q.after, api.MaxEventsPage)
	if err != nil || last == q.after {
		return err
	}
	if len(rows) > eventsShown {
		rows = rows[len(rows)-eventsShown:]
	}
	id := strconv.Itoa(last)
	for _, e := range rows {
		html, err := c.fragment("event", e)
		if err != nil {
			return err
		}
		out.send("replace", id, map[string]string{"id": fmt.Sprintf("event-%d", e.Seq), "html": html, "into": "events"})
	}
	if len(lines) > 0 {
		out.send("log", id, map[string]string{"lines": strings.Join(lines, "\n") + "\n"})
	}
	q.after = last
	return nil
}

// cardFragment is a task's card as the stream keeps it.
func (c *Console) cardFragment(cd card) fragment {
	key := cd
	key.Elapsed, key.Countdown = "", ""
	return fragment{id: "task-" + cd.ID, into: "tasks", key: fmt.Sprintf("%+v", key), render: func() (string, error) { return c.fragment("card", cd) }}
}

// timelineKey is the timeline less its running durations.
func timelineKey(rows []attemptRow) string {
	var b strings.Builder
	for _, r := range rows {
		if r.Status == "running" || r.Status == "pending" {
			r.Duration = ""
		}
		fmt.Fprintf(&b, "%+v\n", r)
	}
	return b.String()
}

// events writes Server-Sent Events, each with a fresh write deadline (the
// server's WriteTimeout would end the stream otherwise). The first error
// sticks.
type events struct {
	to  io.Writer
	rc  *http.ResponseController // nil: no deadlines, no flushes
	n   int
	err error
}

// writeWindow is how long one write may take.
const writeWindow = 30 * time.Second

func (e *events) write(s string) {
	if e.err != nil {
		return
	}
	if e.rc != nil {
		e.rc.SetWriteDeadline(time.Now().Add(writeWindow)) // not every writer supports it: then the server's own timeout stands
	}
	_, e.err = io.WriteString(e.to, s)
	e.n++
}

func (e *events) send(event, id string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		e.err = err
		return
	}
	msg := "event: " + event + "\n"
	if id != "" {
		msg += "id: " + id + "\n"
	}
	e.write(msg + "data: " + string(b) + "\n\n")
}

func (e *events) comment(s string) { e.write(": " + s + "\n\n") }

func (e *events) flush() error {
	if e.err != nil {
		return e.err
	}
	e.rc.SetWriteDeadline(time.Now().Add(writeWindow))
	return e.rc.Flush()
}
