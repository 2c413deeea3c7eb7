package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The cpload section: the control plane under load, over real HTTP on
// loopback. `agent controlplane serve` runs as its own process (or -cp-url
// names one already running); the store is filled with completed tasks
// through the API; then simulated agents register, heartbeat, claim and
// report their tasks as the agent does, while submitters add tasks at a
// steady rate and readers page through tasks and events. It runs only
// when -only names it.

// cpConfig is the cpload section's part of the configuration.
type cpConfig struct {
	agents      []int // one run per (agents, stored) pair
	stored      []int
	rate        float64 // tasks submitted per second
	duration    time.Duration
	heartbeat   time.Duration
	claimWait   time.Duration // 0: claims answer at once
	taskTime    time.Duration // from a task's first batch of events to its last
	readRate    float64       // list pages and event pages per second, each
	fillWorkers int
	store       string // --store for the control plane; "" passes none
	url         string // a control plane already running; "": start one
	token       string // its registration secret (with url)
	operator    string // an operator token of it (with url)
	agentBin    string // an agent binary already built
	pin         bool   // the control plane on CPU 0, the load on CPU 1
}

func fullCP() cpConfig {
	return cpConfig{agents: []int{1000}, stored: []int{1000}, rate: 10, duration: time.Minute, heartbeat: 10 * time.Second,
		taskTime: 2 * time.Second, readRate: 2, fillWorkers: 16, pin: true}
}

func quickCP() cpConfig {
	c := fullCP()
	c.agents, c.stored, c.rate, c.duration = []int{50}, []int{100}, 5, 10*time.Second
	return c
}

// cpRunPair is one run's size.
type cpRunPair struct{ agents, stored int }

// pairs are the runs: the lists of agents and stored tasks taken side by
// side, a list of one going with every item of the other.
func (c cpConfig) pairs() ([]cpRunPair, error) {
	a, s := c.agents, c.stored
	switch {
	case len(a) == 1:
		a = repeat(a[0], len(s))
	case len(s) == 1:
		s = repeat(s[0], len(a))
	case len(a) != len(s):
		return nil, fmt.Errorf("-cp-agents has %d values and -cp-stored %d: give as many, or one of either", len(a), len(s))
	}
	var out []cpRunPair
	for i := range a {
		out = append(out, cpRunPair{a[i], s[i]})
	}
	return out, nil
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// parseCounts parses "1000,10k,1M".
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		mul := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mul, f = 1000, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mul, f = 1_000_000, strings.TrimSuffix(f, "M")
		}
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", s)
		}
		out = append(out, n*mul)
	}
	return out, nil
}

// tokenArg is a token given on the command line: the contents of the
// file it names, or the value itself.
func tokenArg(v string) string {
	if b, err := os.ReadFile(v); err == nil {
		return strings.TrimSpace(string(b))
	}
	return v
}

// cpKindRow is one kind of request over the measured window.
type cpKindRow struct {
	Kind  string  `json:"kind"`
	Count int     `json:"count"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
	// Errors: answers other than 2xx and 429, and transport errors;
	// TooMany: 429 answers.
	Errors    int    `json:"errors"`
	TooMany   int    `json:"too_many"`
	LastError string `json:"last_error,omitempty"`
}

// cploadResult is one run of the cpload section.
type cploadResult struct {
	Agents     int     `json:"agents"`
	Stored     int     `json:"stored"`
	Rate       float64 `json:"rate_per_s"`
	HeartbeatS float64 `json:"heartbeat_s"`
	ClaimWaitS float64 `json:"claim_wait_s"`
	TaskTimeS  float64 `json:"task_time_s"`
	ReadRate   float64 `json:"read_rate_per_s"`
	// Target is "spawned" (this run started the control plane) or the
	// URL of one already running; Store the --store it was given.
	Target string `json:"target"`
	Store  string `json:"store,omitempty"`
	Pinned bool   `json:"pinned"`

	FillS     float64     `json:"fill_s"`
	WindowS   float64     `json:"window_s"`
	Kinds     []cpKindRow `json:"kinds"`
	Requests  int         `json:"requests"`
	Submitted int         `json:"submitted"`
	Completed int         `json:"completed"`
	PerSec    float64     `json:"completed_per_s"`
	// RejectedEvents: events answered other than accepted.
	RejectedEvents int    `json:"rejected_events"`
	LastRejected   string `json:"last_rejected,omitempty"`

	// The control plane's process (zero with -cp-url): CPU over the
	// window, start-up from exec until /healthz answered, empty and with
	// the stored tasks, and its memory after that start and at the end.
	ServerCPUS      float64 `json:"server_cpu_s,omitempty"`
	ServerCPUPerReq float64 `json:"server_cpu_us_per_request,omitempty"`
	StartupEmptyMS  float64 `json:"startup_empty_ms,omitempty"`
	StartupMS       float64 `json:"startup_ms,omitempty"`
	RSSStart        int64   `json:"rss_start_bytes,omitempty"`
	HWMStart        int64   `json:"hwm_start_bytes,omitempty"`
	RSSEnd          int64   `json:"rss_end_bytes,omitempty"`
	HWMEnd          int64   `json:"hwm_end_bytes,omitempty"`
	// The load generator's own CPU over the window.
	LoadCPUS      float64 `json:"load_cpu_s"`
	LoadCPUPerReq float64 `json:"load_cpu_us_per_request"`
}

// errors is every error and 429 of the run, and rejected events.
func (r *cploadResult) errors() int {
	n := r.RejectedEvents
	for _, k := range r.Kinds {
		n += k.Errors + k.TooMany
	}
	return n
}

func cploadSection(cfg config, log *log.Logger) ([]*cploadResult, error) {
	pairs, err := cfg.cp.pairs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.dataDir, "cpload-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var bin string
	if cfg.cp.url == "" {
		if cfg.cp.agentBin == "" {
			log.Printf("cpload: building the agent")
		}
		if bin, err = buildAgent(cfg, dir); err != nil {
			return nil, err
		}
	}
	var out []*cploadResult
	for i, p := range pairs {
		res, err := cploadRun(cfg, p, bin, filepath.Join(dir, fmt.Sprintf("run-%d", i)), log)
		if err != nil {
			return out, fmt.Errorf("%d agents, %d stored: %w", p.agents, p.stored, err)
		}
		out = append(out, res)
	}
	return out, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func cploadRun(cfg config, p cpRunPair, bin, dir string, log *log.Logger) (*cploadResult, error) {
	cp := cfg.cp
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	res := &cploadResult{Agents: p.agents, Stored: p.stored, Rate: cp.rate, HeartbeatS: cp.heartbeat.Seconds(), ClaimWaitS: cp.claimWait.Seconds(),
		TaskTimeS: cp.taskTime.Seconds(), ReadRate: cp.readRate, Target: "spawned", Store: cp.store}
	pin := cp.pin && runtime.NumCPU() >= 2 && cp.url == ""
	res.Pinned = pin
	creds := cpCreds{secret: cp.token, operator: cp.operator}
	url := cp.url
	var proc *cpProc
	if url == "" {
		creds = cpCreds{secret: randomHex(32), operator: randomHex(32)}
		serve := cpServe{bin: bin, dir: filepath.Join(dir, "cp"), secretFile: filepath.Join(dir, "secret"), operatorFile: filepath.Join(dir, "operators"),
			store: cp.store, heartbeat: cp.heartbeat, pin: -1}
		if pin {
			serve.pin = 0
		}
		if err := os.WriteFile(serve.secretFile, []byte(creds.secret+"\n"), 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(serve.operatorFile, []byte(creds.operator+"\n"), 0o600); err != nil {
			return nil, err
		}
		var err error
		if proc, err = serve.start(); err != nil {
			return nil, err
		}
		res.StartupEmptyMS = ms(proc.startup)
		url = proc.url
		defer func() { proc.stop() }()
		log.Printf("cpload: control plane at %s, up in %.0f ms", url, res.StartupEmptyMS)
		// Filled, then started again: the start-up and memory figures are
		// of a control plane that loads the stored tasks.
		if p.stored > 0 {
			start := time.Now()
			if err := cploadFill(cfg, p, url, creds, log); err != nil {
				return nil, err
			}
			res.FillS = time.Since(start).Seconds()
			proc.stop()
			if proc, err = serve.start(); err != nil {
				return nil, err
			}
			url = proc.url
			log.Printf("cpload: control plane started again with %d stored tasks: up in %.0f ms", p.stored, ms(proc.startup))
		}
		res.StartupMS = ms(proc.startup)
		mem, err := statusFields(strconv.Itoa(proc.pid), "VmRSS", "VmHWM")
		if err != nil {
			return nil, err
		}
		res.RSSStart, res.HWMStart = mem[0], mem[1]
	} else {
		if creds.secret == "" || creds.operator == "" {
			return nil, fmt.Errorf("-cp-url needs -cp-token (the registration secret) and -cp-operator (an operator token)")
		}
		start := time.Now()
		if err := cploadFill(cfg, p, url, creds, log); err != nil {
			return nil, err
		}
		res.FillS = time.Since(start).Seconds()
		res.Target = url
	}

	c := newCPClient(url, p.agents+cp.fillWorkers)
	defer c.close()
	c.rec = &recorder{}
	l := &cpLoad{c: c, creds: creds, prefix: "load-" + randomHex(4), log: log}
	// Some completed tasks for the readers from the start: the stored
	// ones, as the list shows them.
	var first []struct {
		ID string `json:"id"`
	}
	if _, err := c.call(nKinds, "GET", "/v1/tasks?limit=500", creds.operator, nil, &first); err != nil {
		return nil, err
	}
	for _, t := range first {
		l.noteDone(t.ID)
	}
	if pin {
		restore, err := pinSelf(1)
		if err != nil {
			log.Printf("cpload: not pinned: %v", err)
			res.Pinned = false
		}
		defer restore()
	}
	log.Printf("cpload: %d agents, %.0f tasks/s, %d stored, for %s", p.agents, cp.rate, p.stored, cp.duration)
	var srv0 time.Duration
	if proc != nil {
		var err error
		if srv0, err = procCPU(proc.pid); err != nil {
			return nil, err
		}
	}
	load0, start := cpuTime(), time.Now()
	c.rec.on.Store(true)
	stop := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.ctx = ctx
	time.AfterFunc(cp.duration, func() { close(stop); cancel() })
	l.run(loadShape{agents: p.agents, heartbeat: cp.heartbeat, claimWait: cp.claimWait, taskTime: cp.taskTime, rate: cp.rate, readRate: cp.readRate}, stop)
	c.rec.on.Store(false)
	window := time.Since(start)
	res.LoadCPUS = (cpuTime() - load0).Seconds()
	res.WindowS = window.Seconds()
	res.Kinds = c.rec.rows()
	res.Requests = c.rec.requests()
	res.Submitted, res.Completed, res.RejectedEvents = int(l.submitted.Load()), int(l.completed.Load()), int(l.rejected.Load())
	if res.RejectedEvents > 0 {
		res.LastRejected = l.lastRejected()
	}
	res.PerSec = float64(res.Completed) / res.WindowS
	if res.Requests > 0 {
		res.LoadCPUPerReq = res.LoadCPUS * 1e6 / float64(res.Requests)
	}
	if proc != nil {
		srv1, err := procCPU(proc.pid)
		if err != nil {
			return nil, err
		}
		res.ServerCPUS = (srv1 - srv0).Seconds()
		if res.Requests > 0 {
			res.ServerCPUPerReq = res.ServerCPUS * 1e6 / float64(res.Requests)
		}
		mem, err := statusFields(strconv.Itoa(proc.pid), "VmRSS", "VmHWM")
		if err != nil {
			return nil, err
		}
		res.RSSEnd, res.HWMEnd = mem[0], mem[1]
	}
	log.Printf("cpload: %d requests in %.1f s, %d tasks completed (%.1f/s), %d errors", res.Requests, res.WindowS, res.Completed, res.PerSec, res.errors())
	return res, nil
}

func cploadFill(cfg config, p cpRunPair, url string, creds cpCreds, log *log.Logger) error {
	c := newCPClient(url, cfg.cp.fillWorkers)
	defer c.close()
	l := &cpLoad{c: c, creds: creds, prefix: "fill-" + randomHex(4), log: log}
	log.Printf("cpload: filling the store with %d completed tasks", p.stored)
	return l.fill(p.stored, cfg.cp.fillWorkers)
}

// printCPLoad writes a table per run of the cpload section.
func printCPLoad(w io.Writer, r *report) {
	for _, c := range r.CPLoad {
		target := "spawned `agent controlplane serve`"
		if c.Target != "spawned" {
			target = "the control plane at " + c.Target
		}
		if c.Store != "" {
			target += ", --store " + c.Store
		}
		pinned := ""
		if c.Pinned {
			pinned = "; the control plane pinned to CPU 0, the load to CPU 1"
		}
		wait := "claims answer at once (after each heartbeat and each task's end)"
		if c.ClaimWaitS > 0 {
			wait = fmt.Sprintf("claims are long polls of %.0f s (their latency holds the wait)", c.ClaimWaitS)
		}
		fmt.Fprintf(w, "\n### Control plane under load: %s agents, %g tasks/s, %s stored tasks\n\n", count(c.Agents), c.Rate, count(c.Stored))
		fmt.Fprintf(w, "%s%s; %.0f s window, heartbeat every %.0f s, %s, tasks take %.0f s, %g list pages and %g event pages a second.\n\n",
			target, pinned, c.WindowS, c.HeartbeatS, wait, c.TaskTimeS, c.ReadRate, c.ReadRate)
		fmt.Fprintln(w, "| request | count | p50 ms | p99 ms | max ms | errors | 429 |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		for _, k := range c.Kinds {
			fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %.1f | %d | %d |\n", k.Kind, k.Count, k.P50MS, k.P99MS, k.MaxMS, k.Errors, k.TooMany)
		}
		fmt.Fprintln(w, "\n| measure | value |\n|---|---:|")
		fmt.Fprintf(w, "| tasks completed | %d (%.2f/s; %d submitted) |\n", c.Completed, c.PerSec, c.Submitted)
		fmt.Fprintf(w, "| events not accepted | %d |\n", c.RejectedEvents)
		if c.Target == "spawned" {
			fmt.Fprintf(w, "| control plane CPU per request | %.0f µs (%.1f s over %d requests) |\n", c.ServerCPUPerReq, c.ServerCPUS, c.Requests)
			fmt.Fprintf(w, "| control plane start-up, empty / with %s stored | %.0f ms / %.0f ms |\n", count(c.Stored), c.StartupEmptyMS, c.StartupMS)
			fmt.Fprintf(w, "| control plane RSS after start (VmRSS / VmHWM) | %.1f MB / %.1f MB |\n", float64(c.RSSStart)/1e6, float64(c.HWMStart)/1e6)
			fmt.Fprintf(w, "| control plane RSS at the end (VmRSS / VmHWM) | %.1f MB / %.1f MB |\n", float64(c.RSSEnd)/1e6, float64(c.HWMEnd)/1e6)
		}
		if c.FillS > 0 {
			fmt.Fprintf(w, "| fill: %s tasks submitted and completed through the API | %.1f s (%.0f/s) |\n", count(c.Stored), c.FillS, float64(c.Stored)/c.FillS)
		}
		fmt.Fprintf(w, "| load generator CPU per request | %.0f µs (%.1f s) |\n", c.LoadCPUPerReq, c.LoadCPUS)
		for _, k := range c.Kinds {
			if k.LastError != "" {
				fmt.Fprintf(w, "\n%s error, the last: %s\n", k.Kind, k.LastError)
			}
		}
		if c.LastRejected != "" {
			fmt.Fprintf(w, "\nan event not accepted: %s\n", c.LastRejected)
		}
	}
}
