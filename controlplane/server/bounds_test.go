package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// This file's attacks use only what the API had before the control plane
// was bounded (no option, no constant of the bounds), so that each runs,
// and fails, against that code too. The figures they hold the server to
// are docs/controlplane.md's.
const (
	attackOutput  = 48 << 20 // what the task prints
	defaultCap    = 8 << 20  // the default cap of an attempt's stored output
	markMax       = 2 << 10  // the mark's size, at most
	titleCapRunes = 200
	// heapBound is what the server may hold, on top of what it held
	// before, with the attacks done and their readers stalled: the 30
	// tasks themselves (their 256 KiB prompts, kept in memory by design:
	// 7.7 MiB) and a bounded amount per stalled answer.
	heapBound = 24 << 20
)

// liveHeap is the heap's live bytes, after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// peakHeap samples the heap's objects (live and not yet collected) until
// stop is called, which returns the highest sample: for the log, not for
// assertions.
func peakHeap() (stop func() int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak int64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, int64(s[0].Value.Uint64()))
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 { close(done); <-finished; return peak }
}

// stalledClient sends a GET with the operator's token, waits for the
// first byte of the answer (the server is writing it), and then reads
// nothing more: its receive buffer is as small as the kernel allows.
func stalledClient(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: cp\r\nAuthorization: Bearer %s\r\n\r\n", path, opToken)
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return conn
}

// storedLogBytes is the size of a task's log events in its events file.
func storedLogBytes(t *testing.T, dir, taskID string) int64 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "events", taskID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if len(line) == 0 || err != nil {
			return n
		}
		if strings.Contains(string(line[:min(len(line), 200)]), `"kind":"log"`) {
			n += int64(len(line))
		}
	}
}

// The bad cases one task or client can make, together: a task prints
// 48 MB, forwarded by its agent with its own token; 30 tasks come with
// 1.7 MB titles and 256 KiB prompts; six clients ask for the task list
// and six for the 48 MB task's events, and never read the answers. The
// attempt's stored output stays at its cap and a mark, every title at
// 200 characters, and what the server holds under a figure.
func TestBoundsUnderAttack(t *testing.T) {
	fileStoreOnly(t) // it reads the files
	if testing.Short() {
		t.Skip("48 MB through the API")
	}
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnv(t, dir, clk)
	ctx := context.Background()
	before := liveHeap()
	peak := peakHeap()

	// 1. 48 MB of output, in log events of 500 lines of 100 bytes.
	e.submit("print 48 MB", "")
	c := e.claim("ag-1", "available", 1)[0]
	e.send("ag-1", ev("a1", state.EventAttempt, c, state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: t0}))
	line := strings.Repeat("z", 99)
	lines := make([]string, 500)
	for i := range lines {
		lines[i] = line
	}
	payload, _ := json.Marshal(state.LogEvent{Stream: "stdout", Lines: lines})
	events := (attackOutput + len(payload) - 1) / len(payload)
	for sent := 0; sent < events; sent += 20 {
		batch := make([]api.Event, 0, 20)
		for i := sent; i < min(sent+20, events); i++ {
			batch = append(batch, api.Event{Key: fmt.Sprintf("%s:log:%d", c.Task.ID, i), Kind: state.EventLog, TaskID: c.Task.ID, Attempt: 1, LeaseID: c.Lease.ID, CreatedAt: t0, Payload: payload})
		}
		for _, r := range e.send("ag-1", batch...) {
			if r.Status != api.StatusAccepted {
				t.Fatalf("log event %s: %+v, want accepted", r.Key, r)
			}
		}
	}
	stored := storedLogBytes(t, dir, c.Task.ID)
	t.Logf("output: %d MiB sent, %.1f MiB stored", events*len(payload)>>20, float64(stored)/(1<<20))
	if stored > defaultCap+markMax {
		t.Errorf("the attempt's log events take %d bytes on disk; the cap is %d and a mark", stored, defaultCap)
	}

	// 2. 30 tasks with titles of 1.7 MB and prompts of 256 KiB.
	title, prompt := strings.Repeat("T", 1700000), strings.Repeat("P", 256<<10)
	for i := range 30 {
		clk.advance(time.Millisecond)
		if _, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Title: title, Prompt: fmt.Sprintf("%02d", i) + prompt[2:]}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.client.Tasks(ctx)
	if err != nil || len(all) != 31 {
		t.Fatalf("%d tasks, %v", len(all), err)
	}
	for _, v := range all {
		if n := utf8.RuneCountInString(v.Title); n > titleCapRunes {
			t.Errorf("a title of %d characters; the cap is %d", n, titleCapRunes)
			break
		}
	}
	all = nil

	// 3. Twelve clients that never read.
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	addr := strings.TrimPrefix(e.http.URL, "http://")
	for i := range 12 {
		path := "/v1/tasks"
		if i%2 == 1 {
			path = "/v1/tasks/" + c.Task.ID + "/events"
		}
		wg.Go(func() {
			conn := stalledClient(t, addr, path)
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	held := liveHeap() - before
	t.Logf("heap: %.1f MiB held with 12 readers stalled (bound %d MiB); %.1f MiB at the peak sampled", float64(held)/(1<<20), heapBound>>20, float64(peak()-before)/(1<<20))
	if held > heapBound {
		t.Errorf("the server holds %.1f MiB with its readers stalled; the bound is %d MiB", float64(held)/(1<<20), heapBound>>20)
	}
}

// allocated is how many bytes the program allocated so far.
func allocated() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.TotalAlloc)
}

// A start reads no stored event of a task its file says is up to date:
// with 40 MB of events on disk, it allocates a few KiB per task, and
// holds nothing of them after.
func TestStartReadsNoStoredEvents(t *testing.T) {
	fileStoreOnly(t) // it reads the files
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnv(t, dir, clk)
	e.submit("x", "")
	c := e.claim("ag-1", "available", 1)[0]
	e.send("ag-1", runToCompletion(c)...)

	// 40 MB more of log events in the file, which the task file says it
	// reflects (as a control plane without a cap would have stored them).
	// The task ended: its file is in the file store's archive.
	taskFile := filepath.Join(dir, "ended", c.Task.ID+".json")
	var task map[string]any
	b, err := os.ReadFile(taskFile)
	must(t, err)
	must(t, json.Unmarshal(b, &task))
	f, err := os.OpenFile(filepath.Join(dir, "events", c.Task.ID+".jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	w := bufio.NewWriterSize(f, 1<<20)
	payload, _ := json.Marshal(state.LogEvent{Stream: "stdout", Lines: []string{strings.Repeat("o", 40<<10)}})
	n := 1000
	for i := range n {
		b, _ := json.Marshal(api.StoredEvent{Event: api.Event{Key: fmt.Sprint("old-log-", i), Kind: state.EventLog, TaskID: c.Task.ID, Attempt: 1, LeaseID: c.Lease.ID, CreatedAt: t0, Payload: payload}, AgentID: "ag-1", ReceivedAt: t0})
		w.Write(append(b, '\n'))
	}
	must(t, w.Flush())
	info, err := f.Stat()
	must(t, err)
	f.Close()
	task["events_applied"] = task["events_applied"].(float64) + float64(n)
	task["events_bytes"] = info.Size()
	b, _ = json.Marshal(task)
	must(t, os.WriteFile(taskFile, b, 0o600))

	before, allocs := liveHeap(), allocated()
	e = e.restart(clk)
	allocs = allocated() - allocs
	held := liveHeap() - before
	t.Logf("a start with %d MiB of stored events allocates %.1f MiB and holds %.1f MiB", info.Size()>>20, float64(allocs)/(1<<20), float64(held)/(1<<20))
	if allocs > 1<<20 || held > 1<<20 {
		t.Errorf("the start allocates %.1f MiB and holds %.1f MiB with %d MiB of events stored; it should read none of them", float64(allocs)/(1<<20), float64(held)/(1<<20), info.Size()>>20)
	}
	if r := e.send("ag-1", runToCompletion(c)[0])[0]; r.Status != api.StatusDuplicate {
		t.Errorf("an event sent again after the start: %+v", r)
	}
}
