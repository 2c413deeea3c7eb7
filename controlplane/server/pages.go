package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// The lists come a page at a time, read from the store and encoded one
// item after another: no request reads or answers the whole history. A
// client that does not read holds, besides the connection's buffers, one
// page; the server's write timeout ends it.

// pageParams reads ?after (or its other name, ?cursor) and ?limit: limit
// is def when not given, and at most most.
func pageParams(r *http.Request, def, most int) (after string, limit int, err error) {
	q := r.URL.Query()
	limit = def
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", 0, invalidRequest("limit %q: want a whole number from 1 (at most %d)", state.Ellipsize(v, 40), most)
		}
		limit = min(n, most)
	}
	after = q.Get("after")
	if c := q.Get("cursor"); c != "" {
		if after != "" && after != c {
			return "", 0, invalidRequest("after and cursor name two pages: give one")
		}
		after = c
	}
	return after, limit, nil
}

// serveTasks answers GET /v1/tasks: a page of tasks, oldest first (or,
// with ?order=newest, newest first), those ?phase, ?agent (the lease
// holder), ?repo, ?live=true (not ended) and ?title (held in the title,
// in any case) select.
func (s *Server) serveTasks(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageParams(r, api.DefaultTasksPage, api.MaxTasksPage)
	if err != nil {
		reply(w, nil, err)
		return
	}
	q := store.Query{After: after, Limit: limit, Phase: state.Phase(r.URL.Query().Get("phase")),
		Agent: r.URL.Query().Get("agent"), Repo: r.URL.Query().Get("repo"), Title: r.URL.Query().Get("title"),
		Order: api.TaskOrder(r.URL.Query().Get("order"))}
	if err := api.CheckOrder(q.Order); err != nil {
		reply(w, nil, invalidRequest("%v", err))
		return
	}
	switch live := r.URL.Query().Get("live"); live {
	case "", "false":
	case "true":
		q.Live = true
	default:
		reply(w, nil, invalidRequest("live %q: want true or false", state.Ellipsize(live, 40)))
		return
	}
	if q.Phase != "" && !slices.Contains(state.Phases, q.Phase) {
		reply(w, nil, invalidRequest("phase %q: want one of %s", state.Ellipsize(string(q.Phase), 40), state.PhaseNames()))
		return
	}
	views, next, err := s.rules.tasksPage(r.Context(), q)
	if err != nil {
		reply(w, nil, err)
		return
	}
	writeList(w, next)
	for i := range views {
		b, err := json.Marshal(views[i])
		if err != nil {
			panic(http.ErrAbortHandler) // the answer is half written: cut the connection rather than end it as if whole
		}
		views[i] = api.TaskView{} // written: let it go
		if !writeItem(w, i, b) {
			return
		}
	}
	w.Write([]byte("]\n"))
}

// tasksPage reads up to limit tasks after the task named after, those
// the filters in q select. next names the page's last task when more
// follow.
func (rl *rules) tasksPage(ctx context.Context, q store.Query) ([]api.TaskView, string, error) {
	rl.watchdog.pass(ctx)
	list, next, err := rl.store.Tasks(ctx, q)
	if errors.Is(err, store.ErrCursor) {
		return nil, "", invalidRequest("after %q: no such task", state.Ellipsize(q.After, 140))
	}
	if err != nil {
		return nil, "", storeErr("list tasks", err)
	}
	views := make([]api.TaskView, len(list))
	for i, t := range list {
		views[i] = api.ViewOf(t)
	}
	return views, next, nil
}

// serveAgents answers GET /v1/agents: a page of agents, by id. An agent
// that is not (or no longer) known may name the page before: the page
// starts after where its id would be.
func (s *Server) serveAgents(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageParams(r, api.DefaultAgentsPage, api.MaxAgentsPage)
	if err != nil {
		reply(w, nil, err)
		return
	}
	views, next, err := s.rules.listAgents(r.Context(), after, limit)
	if err != nil {
		reply(w, nil, err)
		return
	}
	writeList(w, next)
	for i := range views {
		b, err := json.Marshal(views[i])
		if err != nil {
			panic(http.ErrAbortHandler) // half written: see serveTasks
		}
		if !writeItem(w, i, b) {
			return
		}
	}
	w.Write([]byte("]\n"))
}

// serveEvents answers GET /v1/tasks/{id}/events: a page of the task's
// events.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := pageParams(r, api.DefaultEventsPage, api.MaxEventsPage)
	if err != nil {
		reply(w, nil, err)
		return
	}
	after := 0
	if cursor != "" {
		if after, err = strconv.Atoi(cursor); err != nil || after < 0 {
			reply(w, nil, invalidRequest("after %q: want an event's seq, a whole number", state.Ellipsize(cursor, 40)))
			return
		}
	}
	id := r.PathValue("id")
	t, err := s.store.Task(r.Context(), id)
	if err != nil {
		reply(w, nil, storeErr("read task", err))
		return
	}
	if err := readable(r.Context(), id, t); err != nil {
		reply(w, nil, err)
		return
	}
	lines, more, err := s.store.Events(r.Context(), id, after, limit, api.MaxEventsPageBytes)
	if err != nil {
		reply(w, nil, storeErr("read events", err))
		return
	}
	next := ""
	if more {
		next = strconv.Itoa(after + limit)
		if len(lines) > 0 {
			next = strconv.Itoa(lines[len(lines)-1].Seq)
		}
	}
	writeList(w, next)
	for i, l := range lines {
		// The line with its seq in front: {"seq":N,"key":...}
		head := append(strconv.AppendInt([]byte(`{"seq":`), int64(l.Seq), 10), ',')
		if !writeItem(w, i, head, l.Line[1:]) {
			return
		}
		lines[i].Line = nil // written: let it go
	}
	w.Write([]byte("]\n"))
}

// writeList starts a list's answer; next, when not empty, is the cursor of
// the page after it.
func writeList(w http.ResponseWriter, next string) {
	w.Header().Set("Content-Type", "application/json")
	if next != "" {
		w.Header().Set(api.NextAfterHeader, next)
	}
	w.WriteHeader(http.StatusOK)
	w.Write([]byte("["))
}

// writeItem writes the list's item i, encoded, in parts; false when the
// client is gone.
func writeItem(w http.ResponseWriter, i int, parts ...[]byte) bool {
	if i > 0 {
		if _, err := w.Write([]byte(",")); err != nil {
			return false
		}
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return false
		}
	}
	return true
}
