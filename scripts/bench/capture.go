package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// The capture section (-only capture) records what a real agent sends:
// `agent controlplane serve`, a logging reverse proxy in front of it, and
// `agent run --executor sample` against the proxy; tasks are submitted to
// the control plane directly (people's requests are not the agent's), one
// alone and then three at once, with idle time before, between and after.
// Every request the agent made is one line of the capture, kept as data
// in scripts/bench/capture/ (-capture-out): cpload's mix is checked
// against it (captureMix).

// captureLine is one request of the agent, as the proxy saw it.
type captureLine struct {
	AtMS      int64  `json:"at_ms"` // since the agent started
	Method    string `json:"method"`
	Route     string `json:"route"` // ids replaced by {id}
	Status    int    `json:"status"`
	ReqBytes  int    `json:"req_bytes"`
	RespBytes int    `json:"resp_bytes"`
	MS        int64  `json:"ms"` // how long the control plane took to answer
	// Events: a batch's events in order, each its kind, and for a phase
	// its phase, for an attempt its status (phase:turn_started,
	// attempt:running); Running: a heartbeat's
	// running tasks; WaitMS, Max: a claim's wait and room; Granted: the
	// tasks a claim got. A claim the agent withdrew (it hung up: room
	// came, or it stopped) shows the proxy's 502.
	Events  []string `json:"events,omitempty"`
	Running int      `json:"running,omitempty"`
	WaitMS  int64    `json:"wait_ms,omitempty"`
	Max     int      `json:"max,omitempty"`
	Granted int      `json:"granted,omitempty"`
}

// captureReport is what the capture says, summed up.
type captureReport struct {
	Out            string         `json:"out"`
	Tasks          int            `json:"tasks"`
	Seconds        float64        `json:"seconds"`
	ByRoute        map[string]int `json:"by_route"`
	HeartbeatEvery float64        `json:"heartbeat_every_s"`
	EventsPerTask  float64        `json:"events_per_task"`
	BatchesPerTask float64        `json:"batches_per_task"`
	ClaimsPerTask  float64        `json:"claims_per_task"`
	ClaimWaitMS    int64          `json:"claim_wait_ms"`
	BatchSizes     map[int]int    `json:"batch_sizes"`
}

var idInPath = regexp.MustCompile(`/(t|a)-[0-9a-zA-Z]+`)

// captureProxy forwards to the control plane and logs every request.
type captureProxy struct {
	mu    sync.Mutex
	lines []captureLine
	start time.Time
	rp    *httputil.ReverseProxy
}

func (p *captureProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	l := captureLine{AtMS: time.Since(p.start).Milliseconds(), Method: r.Method, Route: idInPath.ReplaceAllString(r.URL.Path, "/{id}"), ReqBytes: len(body)}
	switch r.URL.Path {
	case "/v1/events":
		var req api.EventsRequest
		if json.Unmarshal(body, &req) == nil {
			for _, e := range req.Events {
				l.Events = append(l.Events, eventShape(e))
			}
		}
	case "/v1/agents/heartbeat":
		var req api.HeartbeatRequest
		if json.Unmarshal(body, &req) == nil {
			l.Running = len(req.Running)
		}
	case "/v1/tasks/claim":
		var req api.ClaimRequest
		if json.Unmarshal(body, &req) == nil {
			l.WaitMS, l.Max = req.WaitMS, req.Max
		}
	}
	rec := &captureWriter{ResponseWriter: w, status: http.StatusOK}
	began := time.Now()
	p.rp.ServeHTTP(rec, r)
	l.Status, l.RespBytes, l.MS = rec.status, rec.body.Len(), time.Since(began).Milliseconds()
	if r.URL.Path == "/v1/tasks/claim" {
		var ans api.ClaimResponse
		if json.Unmarshal(rec.body.Bytes(), &ans) == nil {
			l.Granted = len(ans.Tasks)
		}
	}
	p.mu.Lock()
	p.lines = append(p.lines, l)
	p.mu.Unlock()
}

type captureWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *captureWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *captureWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on (the reverse proxy flushes as it copies).
func (w *captureWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func captureSection(cfg config, progress *log.Logger) (*captureReport, error) {
	dir, err := os.MkdirTemp(cfg.dataDir, "capture-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	progress.Printf("capture: building the agent")
	bin, err := buildAgent(cfg, dir)
	if err != nil {
		return nil, err
	}
	creds := cpCreds{secret: randomHex(32), operator: randomHex(32)}
	secretFile, operatorFile := filepath.Join(dir, "secret"), filepath.Join(dir, "operators")
	if err := os.WriteFile(secretFile, []byte(creds.secret+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(operatorFile, []byte(creds.operator+"\n"), 0o600); err != nil {
		return nil, err
	}
	cp, err := cpServe{bin: bin, dir: filepath.Join(dir, "cp"), secretFile: secretFile, operatorFile: operatorFile,
		heartbeat: cfg.captureHeartbeat, pin: -1}.start()
	if err != nil {
		return nil, err
	}
	defer cp.stop()
	target, _ := url.Parse(cp.url)
	proxy := &captureProxy{rp: httputil.NewSingleHostReverseProxy(target)}
	// A claim the agent withdraws (its wait cut short) is no error here.
	proxy.rp.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: proxy}
	go hs.Serve(ln)
	defer hs.Close()

	agentLog := filepath.Join(dir, "agent.log")
	lf, err := os.Create(agentLog)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	proxy.start = time.Now()
	run := exec.Command(bin, "run", "--control-plane", "http://"+ln.Addr().String(), "--token-file", secretFile,
		"--data-dir", filepath.Join(dir, "agent-data"), "--executor", "sample", "--log-level", "info", "--max-concurrent", "4")
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AGENT_") {
			run.Env = append(run.Env, e)
		}
	}
	run.Stdout, run.Stderr = lf, lf
	if err := run.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	stopAgent := func() {
		select {
		case err := <-exited:
			exited <- err
			return
		default:
		}
		run.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			exited <- err
		case <-time.After(30 * time.Second):
			run.Process.Kill()
			exited <- <-exited
		}
	}
	defer stopAgent()

	client := &http.Client{Timeout: 30 * time.Second}
	submit := func(n int) (string, error) {
		b, _ := json.Marshal(api.CreateTaskRequest{Title: fmt.Sprintf("capture %d", n), Prompt: "A task of the capture: do the thing, check it, say what was done."})
		req, _ := http.NewRequest("POST", cp.url+"/v1/tasks", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+creds.operator)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var v api.TaskView
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("submit: %d %v", resp.StatusCode, err)
		}
		return v.ID, nil
	}
	ended := func(id string) bool {
		req, _ := http.NewRequest("GET", cp.url+"/v1/tasks/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+creds.operator)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var v api.TaskView
		return json.NewDecoder(resp.Body).Decode(&v) == nil && v.Phase.Terminal()
	}
	waitEnded := func(ids ...string) error {
		deadline := time.Now().Add(5 * time.Minute)
		for _, id := range ids {
			for !ended(id) {
				select {
				case err := <-exited:
					exited <- err
					b, _ := os.ReadFile(agentLog)
					return fmt.Errorf("the agent exited (%v); its log:\n%s", err, tail(b, 40))
				default:
				}
				if time.Now().After(deadline) {
					b, _ := os.ReadFile(agentLog)
					return fmt.Errorf("task %s did not end; the agent's log:\n%s", id, tail(b, 40))
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		return nil
	}
	idle := cfg.captureIdle
	progress.Printf("capture: the agent idles %s, runs a task, idles, runs three at once, idles", idle)
	time.Sleep(idle)
	n := 0
	one, err := submit(n)
	if err != nil {
		return nil, err
	}
	n++
	if err := waitEnded(one); err != nil {
		return nil, err
	}
	time.Sleep(idle)
	var three []string
	for range 3 {
		id, err := submit(n)
		if err != nil {
			return nil, err
		}
		three = append(three, id)
		n++
	}
	if err := waitEnded(three...); err != nil {
		return nil, err
	}
	time.Sleep(idle)
	stopAgent()

	proxy.mu.Lock()
	lines := append([]captureLine(nil), proxy.lines...)
	proxy.mu.Unlock()
	// In the order they were sent (a long poll is logged when answered).
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].AtMS < lines[j].AtMS })
	out := cfg.captureOut
	if !filepath.IsAbs(out) {
		out = filepath.Join(cfg.repo, out)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, l := range lines {
		enc.Encode(l)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	rep := summarizeCapture(lines, n)
	rep.Out = cfg.captureOut
	progress.Printf("capture: %d requests in %.0f s, %d tasks: %s; written to %s", len(lines), rep.Seconds, n, rep.text(), out)
	return rep, nil
}

// summarizeCapture sums up a capture of tasks tasks.
func summarizeCapture(lines []captureLine, tasks int) *captureReport {
	rep := &captureReport{Tasks: tasks, ByRoute: map[string]int{}, BatchSizes: map[int]int{}}
	var beats []int64
	events, batches, claims := 0, 0, 0
	for _, l := range lines {
		rep.ByRoute[l.Method+" "+l.Route]++
		switch l.Route {
		case "/v1/agents/heartbeat":
			beats = append(beats, l.AtMS)
		case "/v1/events":
			events += len(l.Events)
			batches++
			rep.BatchSizes[len(l.Events)]++
		case "/v1/tasks/claim":
			claims++
			rep.ClaimWaitMS = max(rep.ClaimWaitMS, l.WaitMS)
		}
		rep.Seconds = float64(l.AtMS) / 1000
	}
	if len(beats) > 1 {
		rep.HeartbeatEvery = float64(beats[len(beats)-1]-beats[0]) / 1000 / float64(len(beats)-1)
	}
	if tasks > 0 {
		rep.EventsPerTask = float64(events) / float64(tasks)
		rep.BatchesPerTask = float64(batches) / float64(tasks)
		rep.ClaimsPerTask = float64(claims) / float64(tasks)
	}
	return rep
}

func (r *captureReport) text() string {
	routes := make([]string, 0, len(r.ByRoute))
	for k, v := range r.ByRoute {
		routes = append(routes, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(routes)
	return fmt.Sprintf("a heartbeat every %.1f s; %.1f events a task in %.1f batches; %.1f claims a task (wait up to %d ms); %s",
		r.HeartbeatEvery, r.EventsPerTask, r.BatchesPerTask, r.ClaimsPerTask, r.ClaimWaitMS, strings.Join(routes, ", "))
}

// tail is the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// printCapture writes what the capture says.
func printCapture(w io.Writer, r *report) {
	c := r.Capture
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\n### A real agent's requests (capture)\n\n`agent run --executor sample` through a logging proxy, %d tasks, %.0f s; every request in %s.\n\n", c.Tasks, c.Seconds, c.Out)
	fmt.Fprintln(w, "| measure | value |\n|---|---:|")
	fmt.Fprintf(w, "| heartbeat every | %.1f s |\n", c.HeartbeatEvery)
	fmt.Fprintf(w, "| events a task | %.1f |\n", c.EventsPerTask)
	fmt.Fprintf(w, "| event batches a task | %.1f |\n", c.BatchesPerTask)
	fmt.Fprintf(w, "| claims a task (idle time included) | %.1f |\n", c.ClaimsPerTask)
	fmt.Fprintf(w, "| a claim's wait_ms, at most | %d |\n", c.ClaimWaitMS)
	sizes := make([]int, 0, len(c.BatchSizes))
	for n := range c.BatchSizes {
		sizes = append(sizes, n)
	}
	sort.Ints(sizes)
	for _, n := range sizes {
		fmt.Fprintf(w, "| batches of %d events | %d |\n", n, c.BatchSizes[n])
	}
	routes := make([]string, 0, len(c.ByRoute))
	for k := range c.ByRoute {
		routes = append(routes, k)
	}
	sort.Strings(routes)
	for _, k := range routes {
		fmt.Fprintf(w, "| `%s` | %d |\n", k, c.ByRoute[k])
	}
}

// eventShape is an event as the capture keeps it: its kind, and what
// the control plane's rules read of it (a phase's phase, an attempt's
// status); never its text.
func eventShape(e api.Event) string {
	switch e.Kind {
	case state.EventPhase:
		var p state.PhaseEvent
		if json.Unmarshal(e.Payload, &p) == nil {
			return string(e.Kind) + ":" + string(p.Phase)
		}
	case state.EventAttempt:
		var a state.Attempt
		if json.Unmarshal(e.Payload, &a) == nil {
			return string(e.Kind) + ":" + string(a.Status)
		}
	case state.EventLog:
		var l state.LogEvent
		if json.Unmarshal(e.Payload, &l) == nil {
			return fmt.Sprintf("%s:%d", e.Kind, len(l.Lines))
		}
	}
	return string(e.Kind)
}
