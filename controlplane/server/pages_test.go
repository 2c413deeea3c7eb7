package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// get is a raw GET with the operator's token: the status, the cursor
// header and the body.
func (e *env) get(path string) (int, string, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.http.URL+path, nil)
	must(e.t, err)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := http.DefaultClient.Do(req)
	must(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(e.t, err)
	return resp.StatusCode, resp.Header.Get(api.NextAfterHeader), b
}

// The list of tasks comes in pages, oldest first; the answer stays a JSON
// array, so a client from before pages reads the first page, and the
// cursor of the next is in a header. The client follows the pages.
func TestTaskListComesInPages(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	ctx := context.Background()
	n := api.DefaultTasksPage + 5
	var ids []string
	for i := range n {
		clk.advance(time.Millisecond)
		ids = append(ids, e.submit(fmt.Sprint("task ", i), "").ID)
	}

	// The call of a client from before pages: the first page, and where
	// the next starts.
	status, next, body := e.get("/v1/tasks")
	var first []api.TaskView
	must(t, json.Unmarshal(body, &first))
	if status != 200 || len(first) != api.DefaultTasksPage || next != ids[api.DefaultTasksPage-1] {
		t.Fatalf("GET /v1/tasks: %d, %d tasks, next %q; want %d tasks and next %s", status, len(first), next, api.DefaultTasksPage, ids[api.DefaultTasksPage-1])
	}
	for i, v := range first {
		if v.ID != ids[i] {
			t.Fatalf("task %d is %s, want %s (oldest first)", i, v.ID, ids[i])
		}
	}

	// Pages of 3, followed to the end.
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, cursor, err := e.client.TasksPage(ctx, after, 3)
		must(t, err)
		if len(page) > 3 {
			t.Fatalf("a page of %d tasks, limit 3", len(page))
		}
		for _, v := range page {
			got = append(got, v.ID)
		}
		if cursor == "" {
			if pages != (n+2)/3-1 {
				t.Errorf("%d pages of 3 for %d tasks", pages+1, n)
			}
			break
		}
		if cursor != got[len(got)-1] {
			t.Fatalf("cursor %s, want the page's last task %s", cursor, got[len(got)-1])
		}
		after = cursor
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Errorf("the pages hold %d tasks, not the %d in order", len(got), len(ids))
	}
	all, err := e.client.Tasks(ctx)
	must(t, err)
	if len(all) != n || all[n-1].ID != ids[n-1] {
		t.Errorf("Client.Tasks: %d tasks, want %d", len(all), n)
	}

	// The last page has no cursor; a task created meanwhile is on it.
	_, next, body = e.get("/v1/tasks?after=" + ids[n-2])
	var last []api.TaskView
	must(t, json.Unmarshal(body, &last))
	if len(last) != 1 || next != "" {
		t.Errorf("the last page: %d tasks, next %q", len(last), next)
	}
	for _, bad := range []string{"limit=0", "limit=-1", "limit=x", "after=t-nope"} {
		if status, _, body := e.get("/v1/tasks?" + bad); status != 400 {
			t.Errorf("?%s: %d %s, want 400", bad, status, body)
		}
	}
}

// The list narrows at the store: by phase, by the agent holding the
// lease, by repository, to what has not ended; ?cursor is ?after's other
// name; ?order=newest lists the newest first, ?order=oldest as the
// default does; a filter or an order that is not one is 400.
func TestTaskListFilters(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	var ids []string
	for i := range 4 {
		clk.advance(time.Millisecond)
		ids = append(ids, e.submit(fmt.Sprint("task ", i), "").ID)
	}
	claimed := e.claim("ag-1", "available", 1)[0].Task.ID // the oldest
	if _, err := e.client.CancelTask(context.Background(), ids[3]); err != nil {
		t.Fatal(err)
	}
	list := func(query string) []string {
		t.Helper()
		status, _, body := e.get("/v1/tasks?" + query)
		var views []api.TaskView
		if status != 200 || json.Unmarshal(body, &views) != nil {
			t.Fatalf("?%s: %d %s", query, status, body)
		}
		var got []string
		for _, v := range views {
			got = append(got, v.ID)
		}
		return got
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"phase=queued", ids[1:3]},
		{"phase=claimed", []string{claimed}},
		{"agent=ag-1", []string{claimed}},
		{"agent=ag-2", nil},
		{"live=true", ids[:3]},
		{"live=true&limit=1&cursor=" + ids[0], ids[1:2]},
		{"phase=cancelled&live=true", nil},
		{"repo=web", nil},
		{"order=oldest", ids},
		{"order=newest", []string{ids[3], ids[2], ids[1], ids[0]}},
		{"order=newest&live=true", []string{ids[2], ids[1], ids[0]}},
		{"order=newest&limit=1&after=" + ids[2], ids[1:2]},
	} {
		if got := list(tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("?%s: %v, want %v", tc.query, got, tc.want)
		}
	}
	for _, bad := range []string{"phase=donezo", "live=maybe", "after=" + ids[0] + "&cursor=" + ids[1], "order=random"} {
		if status, _, body := e.get("/v1/tasks?" + bad); status != 400 {
			t.Errorf("?%s: %d %s, want 400", bad, status, body)
		}
	}
}

// A task's events come in pages read from its file, numbered (seq), at
// most a limit of them and MaxEventsPageBytes; a client from before pages
// gets the first, the client follows them all.
func TestEventsComeInPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	e.submit("fix it", "")
	c := e.claim("ag-1", "available", 1)[0]
	id := c.Task.ID
	var evs []api.Event
	for i := range 1200 {
		evs = append(evs, ev(fmt.Sprint("p-", i), state.EventProgress, c, state.ProgressEvent{Message: fmt.Sprint("step ", i)}))
	}
	e.send("ag-1", evs...)

	status, next, body := e.get("/v1/tasks/" + id + "/events")
	var first []api.StoredEvent
	must(t, json.Unmarshal(body, &first))
	if status != 200 || len(first) != api.DefaultEventsPage || next != strconv.Itoa(api.DefaultEventsPage) {
		t.Fatalf("GET events: %d, %d events, next %q", status, len(first), next)
	}
	for i, se := range first {
		if se.Seq != i+1 || se.Key != evs[i].Key || se.AgentID != "ag-1" {
			t.Fatalf("event %d: seq %d key %s agent %s", i, se.Seq, se.Key, se.AgentID)
		}
	}
	// A limit over the maximum is the maximum.
	_, next, body = e.get("/v1/tasks/" + id + "/events?after=100&limit=5000")
	var page []api.StoredEvent
	must(t, json.Unmarshal(body, &page))
	if len(page) != api.MaxEventsPage || page[0].Seq != 101 || next != strconv.Itoa(100+api.MaxEventsPage) {
		t.Errorf("after=100&limit=5000: %d events from seq %d, next %q", len(page), page[0].Seq, next)
	}
	_, next, body = e.get("/v1/tasks/" + id + "/events?after=1190")
	must(t, json.Unmarshal(body, &page))
	if len(page) != 10 || next != "" || page[9].Seq != 1200 {
		t.Errorf("the last page: %d events, next %q", len(page), next)
	}
	if _, next, body = e.get("/v1/tasks/" + id + "/events?after=5000"); string(body) != "[]\n" || next != "" {
		t.Errorf("past the end: %q, next %q", body, next)
	}
	for _, bad := range []string{"after=-1", "after=x", "limit=0"} {
		if status, _, _ := e.get("/v1/tasks/" + id + "/events?" + bad); status != 400 {
			t.Errorf("?%s: %d, want 400", bad, status)
		}
	}

	// Big events: a page stops before MaxEventsPageBytes.
	var big []api.Event
	for i := range 12 {
		big = append(big, ev(fmt.Sprint("big-", i), state.EventLog, c, state.LogEvent{Stream: "stdout", Lines: []string{strings.Repeat("y", 200<<10)}}))
	}
	for _, b := range big {
		e.send("ag-1", b)
	}
	after, seen := "1200", 0
	for {
		page, cursor, err := e.client.TaskEventsPage(ctx, id, after, api.MaxEventsPage)
		must(t, err)
		b, _ := json.Marshal(page)
		if len(page) == 0 || len(b) > api.MaxEventsPageBytes+len(page)*16 { // the seq each answer adds
			t.Fatalf("a page of %d events, %d bytes; the limit is %d", len(page), len(b), api.MaxEventsPageBytes)
		}
		seen += len(page)
		if cursor == "" {
			break
		}
		after = cursor
	}
	if seen != len(big) {
		t.Errorf("the pages of big events hold %d, want %d", seen, len(big))
	}
	all, err := e.client.TaskEvents(ctx, id)
	must(t, err)
	if len(all) != 1200+len(big) {
		t.Fatalf("Client.TaskEvents: %d events, want %d", len(all), 1200+len(big))
	}
	for i, se := range all {
		if se.Seq != i+1 {
			t.Fatalf("event %d has seq %d", i, se.Seq)
		}
	}
}

// Events being appended are not read: a page ends where the events the
// control plane stored for good end (an append not yet synced and
// answered, or one it undoes), and a torn line is never half shown.
func TestEventsPageStopsAtWhatIsStored(t *testing.T) {
	t.Parallel()
	fileStoreOnly(t) // it reads the files
	dir := t.TempDir()
	e := newEnv(t, dir, &clock{now: t0})
	e.submit("x", "")
	c := e.claim("ag-1", "available", 1)[0]
	e.send("ag-1", ev("k1", state.EventProgress, c, state.ProgressEvent{Message: "one"}))
	appendRaw(t, dir, c.Task.ID, `{"key":"k-in-progress","kind":"progress","task_id":"`+c.Task.ID+`","payload":{}}`+"\n"+`{"key":"k-torn","kind":"progress","task_id":"`)
	evs, err := e.client.TaskEvents(context.Background(), c.Task.ID)
	if err != nil || len(evs) != 1 || evs[0].Key != "k1" {
		t.Fatalf("events with an append in progress: %v %+v", err, evs)
	}
}

// appendRaw appends text to a task's events file, as a writer in progress
// or a crash would leave it.
func appendRaw(t *testing.T, dir, taskID, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "events", taskID+".jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	defer f.Close()
	_, err = f.WriteString(text)
	must(t, err)
}

// The agents come in pages by id; Client.Agents follows them to the end.
func TestAgentListComesInPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		id := fmt.Sprintf("ag-%d", i)
		ids = append(ids, id)
		if _, err := e.agent(id).Heartbeat(ctx, api.HeartbeatRequest{AgentID: id}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after := ""
	for {
		page, next, err := e.client.AgentsPage(ctx, after, 3)
		must(t, err)
		for _, a := range page {
			got = append(got, a.AgentID)
		}
		if next == "" {
			break
		}
		if len(page) != 3 || next != page[2].AgentID {
			t.Fatalf("a page of %d, next %q", len(page), next)
		}
		after = next
	}
	if !slices.Equal(got, ids) {
		t.Errorf("pages of 3: %v, want %v", got, ids)
	}
	all, err := e.client.Agents(ctx)
	must(t, err)
	if len(all) != len(ids) {
		t.Errorf("Client.Agents: %d agents, want %d", len(all), len(ids))
	}
	if status, _, body := e.get("/v1/agents?limit=0"); status != 400 {
		t.Errorf("?limit=0: %d %s, want 400", status, body)
	}
}
