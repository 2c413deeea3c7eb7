package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// The lists are written a piece at a time: a page of tasks is copied
// under the lock and encoded one task after another; a page of events is
// read from its file a line at a time, outside the lock. A client that
// does not read holds, besides the connection's buffers, one page of task
// copies (which share their strings with the tasks) and one encoded task,
// or one line of events and a 64 KiB buffer; the server's write timeout
// ends it.

// pageParams reads ?after and ?limit: limit is def when not given, and at
// most most.
func pageParams(r *http.Request, def, most int) (after string, limit int, err error) {
	q := r.URL.Query()
	limit = def
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", 0, badRequest("limit %q: want a whole number from 1 (at most %d)", state.Ellipsize(v, 40), most)
		}
		limit = min(n, most)
	}
	return q.Get("after"), limit, nil
}

// taskRef places a task in the order of the lists: oldest first, then by
// id. A task's place never changes.
type taskRef struct {
	created time.Time
	id      string
}

func compareRefs(a, b taskRef) int {
	if c := a.created.Compare(b.created); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// place puts a new task in the order. mu is held.
func (s *Server) place(t *state.Task) {
	ref := taskRef{t.CreatedAt, t.ID}
	i, _ := slices.BinarySearchFunc(s.order, ref, compareRefs)
	s.order = slices.Insert(s.order, i, ref)
}

// orderTasks sets the order of the tasks loaded at start.
func (s *Server) orderTasks() {
	s.order = make([]taskRef, 0, len(s.tasks))
	for _, t := range s.tasks {
		s.order = append(s.order, taskRef{t.CreatedAt, t.ID})
	}
	slices.SortFunc(s.order, compareRefs)
}

// serveTasks answers GET /v1/tasks: a page of tasks, oldest first.
func (s *Server) serveTasks(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageParams(r, api.DefaultTasksPage, api.MaxTasksPage)
	if err != nil {
		reply(w, nil, err)
		return
	}
	views, next, err := s.tasksPage(after, limit)
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

// tasksPage copies up to limit tasks after the task named after. next
// names the page's last task when more follow.
func (s *Server) tasksPage(after string, limit int) ([]api.TaskView, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchdog(s.opts.Now())
	start := 0
	if after != "" {
		t := s.tasks[after]
		if t == nil {
			return nil, "", badRequest("after %q: no such task", state.Ellipsize(after, 140))
		}
		i, _ := slices.BinarySearchFunc(s.order, taskRef{t.CreatedAt, t.ID}, compareRefs)
		start = i + 1
	}
	end := min(start+limit, len(s.order))
	views := make([]api.TaskView, 0, max(end-start, 0))
	for _, ref := range s.order[min(start, end):end] {
		views = append(views, view(s.tasks[ref.id]))
	}
	next := ""
	if end < len(s.order) && end > start {
		next = s.order[end-1].id
	}
	return views, next, nil
}

// serveEvents answers GET /v1/tasks/{id}/events: a page of the task's
// events, read from its file.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := pageParams(r, api.DefaultEventsPage, api.MaxEventsPage)
	if err != nil {
		reply(w, nil, err)
		return
	}
	after := 0
	if cursor != "" {
		if after, err = strconv.Atoi(cursor); err != nil || after < 0 {
			reply(w, nil, badRequest("after %q: want an event's seq, a whole number", state.Ellipsize(cursor, 40)))
			return
		}
	}
	id := r.PathValue("id")
	s.mu.Lock()
	t, err := s.readable(r.Context(), id)
	var end int64 // what is stored for good: an append in progress lies past it
	if t != nil {
		end = t.EventsBytes
	}
	s.mu.Unlock()
	if err != nil {
		reply(w, nil, err)
		return
	}
	f, err := s.events.open(id)
	if err != nil {
		reply(w, nil, err)
		return
	}
	if f == nil {
		writeList(w, "")
		w.Write([]byte("]\n"))
		return
	}
	defer f.Close()
	// First the page's bounds, by line lengths alone; then its lines.
	sc := newLineScan(f, 0, end)
	var from, size int64
	for seq := 0; seq < after; seq++ {
		_, n, err := sc.next(-1)
		if err != nil {
			reply(w, nil, err)
			return
		}
		if n == 0 {
			break
		}
		from += n
	}
	count := 0
	for count < limit {
		_, n, err := sc.next(-1)
		if err != nil {
			reply(w, nil, err)
			return
		}
		if n == 0 || count > 0 && size+n > api.MaxEventsPageBytes {
			break
		}
		count, size = count+1, size+n
	}
	next := ""
	if from+size < end {
		next = strconv.Itoa(after + count)
	}
	writeList(w, next)
	sc = newLineScan(f, from, from+size)
	written := 0
	for seq := after + 1; ; seq++ {
		line, n, err := sc.next(maxStoredLine)
		if err != nil {
			panic(http.ErrAbortHandler) // half written: see serveTasks
		}
		if n == 0 {
			break
		}
		if !storedWell(line) {
			continue // unreadable (a line written before keys were capped): every reader skips it
		}
		// The line with its seq in front: {"seq":N,"key":...}
		head := append(strconv.AppendInt([]byte(`{"seq":`), int64(seq), 10), ',')
		if !writeItem(w, written, head, line[1:]) {
			return
		}
		written++
	}
	w.Write([]byte("]\n"))
}

// storedWell reports whether an events file's line is an event every
// reader can take: JSON, with a key.
func storedWell(line []byte) bool {
	if _, ok := lineKey(line); !ok {
		return false
	}
	return json.Valid(line)
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
