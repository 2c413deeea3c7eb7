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
	"slices"
	"strconv"
	"strings"
	"time"
)

// The cpload section: the control plane under load, over real HTTP on
// loopback. `agent controlplane serve` runs as its own process, or several
// over one PostgreSQL database behind a round-robin proxy (-cp-pg makes a
// throwaway cluster; -cp-replicas), or -cp-url names one already running;
// the store is filled with completed tasks (a few through the API, the
// rest copies of them written straight to the store: cpload_fill.go);
// then simulated agents register, heartbeat, claim and
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
	store       string        // --store for the control plane; "" passes none
	url         string        // a control plane already running; "": start one
	token       string        // its registration secret (with url)
	operator    string        // an operator token of it (with url)
	agentBin    string        // an agent binary already built
	pin         bool          // the control plane on CPU 0, the load on CPU 1
	statements  int           // with pg: the statements to print from pg_stat_statements
	warmup      time.Duration // the load before the window opens
	balance     string        // replicas: "proxy" or "client"
	// pg: a throwaway PostgreSQL cluster for the run, a database of it
	// per run (--store); replicas: control plane processes on the same
	// store behind a round-robin proxy (PostgreSQL only when more than 1),
	// a run for each count of the list with each pair.
	pg       bool
	replicas []int
	// fill: "direct" (the API completes a few tasks, the store gets
	// copies of them straight) or "api" (every task through the API).
	fill string
	// mix: "captured" (shapes: a real agent's batches, cpload_mix.go) or
	// "synthetic" (shapes nil: taskEvents).
	mix    string
	shapes [][]string
}

// setMix sets the mix the agents send, and the claims' wait: wait, or
// when it is negative the mix's (the capture's long poll; none for the
// synthetic mix).
func (c *cpConfig) setMix(mix string, wait time.Duration) error {
	c.mix, c.shapes = mix, nil
	switch mix {
	case "captured":
		shapes, err := capturedBatches(agentCapture)
		if err != nil {
			return fmt.Errorf("-cp-mix captured: %w", err)
		}
		c.shapes = shapes
		if wait < 0 {
			wait = capturedClaimWait(agentCapture)
		}
	case "synthetic":
		if wait < 0 {
			wait = 0
		}
	default:
		return fmt.Errorf("-cp-mix %q: want captured or synthetic", mix)
	}
	c.claimWait = wait
	return nil
}

func fullCP() cpConfig {
	return cpConfig{agents: []int{1000}, stored: []int{1000}, rate: 10, duration: time.Minute, heartbeat: 10 * time.Second,
		taskTime: 2 * time.Second, readRate: 2, fillWorkers: 16, pin: true, replicas: []int{1}, fill: "direct"}
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
	// TooMany: 429 answers; Shed: 503 answers with Retry-After (the
	// control plane's admission control: answered at once, sent again
	// after the wait), which are not errors.
	Errors    int    `json:"errors"`
	TooMany   int    `json:"too_many"`
	Shed      int    `json:"shed,omitempty"`
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
	// Mix is what the agents sent for a task: captured or synthetic.
	Mix string `json:"mix,omitempty"`
	// Target is "spawned" (this run started the control plane) or the
	// URL of one already running; Store the --store it was given.
	Target string `json:"target"`
	Store  string `json:"store,omitempty"`
	Pinned bool   `json:"pinned"`
	// Replicas: control plane processes (behind the harness's proxy when
	// more than one); PG: the store is a throwaway PostgreSQL cluster.
	Replicas int `json:"replicas,omitempty"`
	// Balance is how the load reached the replicas: proxy or client.
	Balance string `json:"balance,omitempty"`
	PG      bool   `json:"pg,omitempty"`

	FillS   float64     `json:"fill_s"`
	FillHow string      `json:"fill_how,omitempty"`
	WindowS float64     `json:"window_s"`
	Kinds   []cpKindRow `json:"kinds"`
	// WarmupS is how long the load ran before the window; Enrolment is
	// the registrations it made meanwhile (all of them, usually).
	WarmupS   float64    `json:"warmup_s,omitempty"`
	Enrolment *cpKindRow `json:"enrolment,omitempty"`
	Requests  int        `json:"requests"`
	Submitted int        `json:"submitted"`
	Completed int        `json:"completed"`
	PerSec    float64    `json:"completed_per_s"`
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
	// Each replica's figures (the sums above are over them).
	PerReplica []cpReplicaRow `json:"per_replica,omitempty"`
	// PostgreSQL's processes: CPU over the window (utime+stime, from
	// /proc, the exited ones included).
	PGCPUS      float64 `json:"pg_cpu_s,omitempty"`
	PGCPUPerReq float64 `json:"pg_cpu_us_per_request,omitempty"`
	// The proxy's CPU over the window (the load generator's side).
	ProxyCPUS float64 `json:"proxy_cpu_s,omitempty"`
	// The 1-minute load average before and after the window.
	LoadAvg string `json:"load_avg,omitempty"`
	// The load generator's own CPU over the window.
	LoadCPUS      float64 `json:"load_cpu_s"`
	LoadCPUPerReq float64 `json:"load_cpu_us_per_request"`
}

// cpReplicaRow is one control plane process over the window.
type cpReplicaRow struct {
	CPUS      float64 `json:"cpu_s"`
	StartupMS float64 `json:"startup_ms"`
	RSSStart  int64   `json:"rss_start_bytes"`
	RSSEnd    int64   `json:"rss_end_bytes"`
	HWMEnd    int64   `json:"hwm_end_bytes"`
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
	if len(cfg.cp.replicas) == 0 {
		cfg.cp.replicas = []int{1}
	}
	most := slices.Max(cfg.cp.replicas)
	if slices.Min(cfg.cp.replicas) < 1 {
		return nil, fmt.Errorf("-cp-replicas: at least 1")
	}
	if most > 1 && !cfg.cp.pg && !strings.HasPrefix(cfg.cp.store, "postgres") {
		return nil, fmt.Errorf("-cp-replicas %d: replicas share a PostgreSQL store (-cp-pg or -cp-store postgres://…); the file store is one process's", most)
	}
	if cfg.cp.url != "" && (cfg.cp.pg || most > 1) {
		return nil, fmt.Errorf("-cp-url loads a control plane already running: no -cp-pg, no -cp-replicas")
	}
	if b := cfg.cp.balance; b != "" && b != "proxy" && b != "client" {
		return nil, fmt.Errorf("-cp-balance %q: want proxy or client", b)
	}
	if cfg.cp.pg && cfg.cp.store != "" {
		return nil, fmt.Errorf("-cp-pg makes the store: no -cp-store with it")
	}
	raiseNoFile()
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
	env := &cpEnv{bin: bin, templates: map[int]string{}}
	if cfg.cp.pg {
		cpu := -1
		if cfg.cp.pin && runtime.NumCPU() >= 2 {
			cpu = 0
		}
		var settings []string
		if cfg.cp.statements > 0 {
			settings = append(settings, "shared_preload_libraries=pg_stat_statements")
		}
		if env.pg, err = startPG(cpu, settings); err != nil {
			return nil, err
		}
		defer env.pg.remove()
		log.Printf("cpload: PostgreSQL at 127.0.0.1:%d (%s)", env.pg.port, env.pg.root)
	}
	var out []*cploadResult
	for _, p := range pairs {
		for _, reps := range cfg.cp.replicas {
			i := len(out)
			res, err := cploadRun(cfg, p, reps, env, i, filepath.Join(dir, fmt.Sprintf("run-%d", i)), log)
			if err != nil {
				return out, fmt.Errorf("%d agents, %d stored, %d replica(s): %w", p.agents, p.stored, reps, err)
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// cpEnv is what the section's runs share: the agent binary, and with
// -cp-pg the cluster and its filled databases (templates: stored count ->
// database), which each run copies.
type cpEnv struct {
	bin       string
	pg        *pgCluster
	templates map[int]string
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func cploadRun(cfg config, p cpRunPair, replicas int, env *cpEnv, runN int, dir string, log *log.Logger) (*cploadResult, error) {
	cp := cfg.cp
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	res := &cploadResult{Agents: p.agents, Stored: p.stored, Rate: cp.rate, HeartbeatS: cp.heartbeat.Seconds(), ClaimWaitS: cp.claimWait.Seconds(), Mix: cp.mix,
		TaskTimeS: cp.taskTime.Seconds(), ReadRate: cp.readRate, Target: "spawned", Store: cp.store, Replicas: replicas, PG: env.pg != nil}
	pin := cp.pin && runtime.NumCPU() >= 2 && cp.url == ""
	res.Pinned = pin
	creds := cpCreds{secret: cp.token, operator: cp.operator}
	url := cp.url
	var procs []*cpProc
	var proxy *cpProxy
	var urls []string // the replicas', for -cp-balance client
	if url == "" {
		creds = cpCreds{secret: randomHex(32), operator: randomHex(32)}
		serve := cpServe{bin: env.bin, dir: filepath.Join(dir, "cp"), secretFile: filepath.Join(dir, "secret"), operatorFile: filepath.Join(dir, "operators"),
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
		if err := cploadPrepare(cfg, p, env, runN, &serve, creds, res, log); err != nil {
			return nil, err
		}
		// The replicas, one after the other: the start-up and memory
		// figures are of control planes that load the stored tasks.
		defer func() {
			for _, pr := range procs {
				pr.stop()
			}
		}()
		for r := range replicas {
			s := serve
			if r > 0 {
				s.dir = fmt.Sprintf("%s-%d", serve.dir, r)
			}
			pr, err := s.start()
			if err != nil {
				return nil, err
			}
			procs = append(procs, pr)
			mem, err := statusFields(strconv.Itoa(pr.pid), "VmRSS", "VmHWM")
			if err != nil {
				return nil, err
			}
			res.PerReplica = append(res.PerReplica, cpReplicaRow{StartupMS: ms(pr.startup), RSSStart: mem[0]})
			res.RSSStart += mem[0]
			res.HWMStart += mem[1]
			log.Printf("cpload: control plane %d at %s, up in %.0f ms with %d stored tasks", r+1, pr.url, ms(pr.startup), p.stored)
		}
		res.StartupMS = res.PerReplica[0].StartupMS
		url = procs[0].url
		for _, pr := range procs {
			urls = append(urls, pr.url)
		}
		if len(procs) > 1 && cp.balance == "client" {
			res.Balance = "client"
			log.Printf("cpload: the load's requests go round-robin to the %d replicas", len(procs))
		} else if len(procs) > 1 {
			res.Balance = "proxy"
			cpu := -1
			if pin {
				cpu = 1
			}
			var err error
			if proxy, err = startProxy(urls, cpu); err != nil {
				return nil, err
			}
			defer proxy.stop()
			url = proxy.url
			log.Printf("cpload: %d replicas behind the proxy at %s", len(procs), url)
		}
	} else {
		if creds.secret == "" || creds.operator == "" {
			return nil, fmt.Errorf("-cp-url needs -cp-token (the registration secret) and -cp-operator (an operator token)")
		}
		start := time.Now()
		if err := cploadFill(cfg, p.stored, url, creds, log); err != nil {
			return nil, err
		}
		res.FillS = time.Since(start).Seconds()
		res.FillHow = "api"
		res.Target = url
	}

	c := newCPClient(url, p.agents+cp.fillWorkers)
	if res.Balance == "client" {
		c.bases = urls
	}
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
	log.Printf("cpload: %d agents, %.0f tasks/s, %d stored, %d replica(s), for %s", p.agents, cp.rate, p.stored, max(len(procs), 1), cp.duration)
	res.LoadAvg = loadAvg()
	srv0 := make([]time.Duration, len(procs))
	var pg0, proxy0 time.Duration
	stop := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.ctx = ctx
	shape := loadShape{agents: p.agents, heartbeat: cp.heartbeat, claimWait: cp.claimWait, taskTime: cp.taskTime, rate: cp.rate, readRate: cp.readRate, shapes: cp.shapes}
	ran := make(chan struct{})
	c.rec.on.Store(true)
	if cp.warmup > 0 {
		log.Printf("cpload: %s of warm-up before the window", cp.warmup)
		go func() { l.run(shape, stop); close(ran) }()
		time.Sleep(cp.warmup)
		rows := c.rec.reset()
		res.WarmupS, res.Enrolment = cp.warmup.Seconds(), &rows[kRegister]
		l.submitted.Store(0)
		l.completed.Store(0)
		l.rejected.Store(0)
	}
	if env.pg != nil && cp.statements > 0 {
		if err := env.pg.exec(fmt.Sprintf("run_%d", runN), "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()"); err != nil {
			return nil, err
		}
	}
	for i, pr := range procs {
		var err error
		if srv0[i], err = procCPU(pr.pid); err != nil {
			return nil, err
		}
	}
	if env.pg != nil {
		pg0 = env.pg.cpu()
	}
	if proxy != nil {
		proxy0, _ = procCPU(proxy.cmd.Process.Pid)
	}
	load0, start := cpuTime(), time.Now()
	time.AfterFunc(cp.duration, func() { close(stop); cancel() })
	if cp.warmup > 0 {
		<-ran
	} else {
		l.run(shape, stop)
	}
	c.rec.on.Store(false)
	window := time.Since(start)
	res.LoadCPUS = (cpuTime() - load0).Seconds()
	if env.pg != nil {
		res.PGCPUS = (env.pg.cpu() - pg0).Seconds()
	}
	if proxy != nil {
		p1, _ := procCPU(proxy.cmd.Process.Pid)
		res.ProxyCPUS = (p1 - proxy0).Seconds()
	}
	res.LoadAvg += " before, " + loadAvg() + " after"
	if env.pg != nil && cp.statements > 0 {
		if err := env.pg.printStatements(fmt.Sprintf("run_%d", runN), cp.statements, log); err != nil {
			log.Printf("cpload: pg_stat_statements: %v", err)
		}
	}
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
		res.PGCPUPerReq = res.PGCPUS * 1e6 / float64(res.Requests)
	}
	for i, pr := range procs {
		srv1, err := procCPU(pr.pid)
		if err != nil {
			return nil, err
		}
		row := &res.PerReplica[i]
		row.CPUS = (srv1 - srv0[i]).Seconds()
		res.ServerCPUS += row.CPUS
		mem, err := statusFields(strconv.Itoa(pr.pid), "VmRSS", "VmHWM")
		if err != nil {
			return nil, err
		}
		row.RSSEnd, row.HWMEnd = mem[0], mem[1]
		res.RSSEnd += mem[0]
		res.HWMEnd += mem[1]
	}
	if len(procs) > 0 && res.Requests > 0 {
		res.ServerCPUPerReq = res.ServerCPUS * 1e6 / float64(res.Requests)
	}
	log.Printf("cpload: %d requests in %.1f s, %d tasks completed (%.1f/s), %d errors", res.Requests, res.WindowS, res.Completed, res.PerSec, res.errors())
	return res, nil
}

// cploadPrepare makes the run's store and fills it with p.stored
// completed tasks: a database of the cluster (a copy of one filled
// before, for the same count) or the data directory. It measures the
// start-up of an empty control plane on the way, when it starts one.
func cploadPrepare(cfg config, p cpRunPair, env *cpEnv, runN int, serve *cpServe, creds cpCreds, res *cploadResult, log *log.Logger) error {
	cp := cfg.cp
	// fillAPI starts a control plane on the store s names, has the API
	// complete n tasks, and stops it.
	fillAPI := func(s cpServe, n int) error {
		proc, err := s.start()
		if err != nil {
			return err
		}
		defer proc.stop()
		if res.StartupEmptyMS == 0 {
			res.StartupEmptyMS = ms(proc.startup)
		}
		log.Printf("cpload: control plane at %s, up in %.0f ms", proc.url, ms(proc.startup))
		return cploadFill(cfg, n, proc.url, creds, log)
	}
	direct := cp.fill != "api"
	start := time.Now()
	defer func() { res.FillS = time.Since(start).Seconds() }()
	if env.pg == nil {
		if p.stored == 0 {
			return nil
		}
		if !direct || p.stored <= fillTemplates {
			res.FillHow = "api"
			return fillAPI(*serve, p.stored)
		}
		res.FillHow = "files"
		if err := fillAPI(*serve, fillTemplates); err != nil {
			return err
		}
		return fillFiles(serve.dir, cfg.tmpfsDir, p.stored, log)
	}
	db := fmt.Sprintf("run_%d", runN)
	defer func() { serve.store = env.pg.dsn(db) }()
	if p.stored == 0 {
		return env.pg.exec("postgres", "CREATE DATABASE "+db)
	}
	tmpl, ok := env.templates[p.stored]
	res.FillHow = "api"
	if direct && p.stored > fillTemplates {
		res.FillHow = "copy"
	}
	if !ok {
		tmpl = fmt.Sprintf("filled_%d", p.stored)
		if err := env.pg.exec("postgres", "CREATE DATABASE "+tmpl); err != nil {
			return err
		}
		s := *serve
		s.store, s.dir = env.pg.dsn(tmpl), serve.dir+"-fill"
		n := p.stored
		if res.FillHow == "copy" {
			n = fillTemplates
		}
		if err := fillAPI(s, n); err != nil {
			return err
		}
		if res.FillHow == "copy" {
			if err := fillPG(env.pg.dsn(tmpl), p.stored, log); err != nil {
				return err
			}
		}
		env.templates[p.stored] = tmpl
	} else {
		res.FillHow += ", a copy of the database filled before"
	}
	t0 := time.Now()
	if err := env.pg.exec("postgres", fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s STRATEGY FILE_COPY", db, tmpl)); err != nil {
		return err
	}
	log.Printf("cpload: database %s copied from %s in %.1f s", db, tmpl, time.Since(t0).Seconds())
	return nil
}

func cploadFill(cfg config, n int, url string, creds cpCreds, log *log.Logger) error {
	c := newCPClient(url, cfg.cp.fillWorkers)
	defer c.close()
	l := &cpLoad{c: c, creds: creds, prefix: "fill-" + randomHex(4), log: log}
	log.Printf("cpload: filling the store with %d completed tasks through the API", n)
	return l.fill(n, cfg.cp.fillWorkers)
}

// printCPLoad writes a table per run of the cpload section.
func printCPLoad(w io.Writer, r *report) {
	for _, c := range r.CPLoad {
		target := "spawned `agent controlplane serve`"
		if c.Replicas > 1 {
			target = fmt.Sprintf("%d spawned `agent controlplane serve` replicas behind a round-robin proxy in the harness (its CPU is the load's side)", c.Replicas)
			if c.Balance == "client" {
				target = fmt.Sprintf("%d spawned `agent controlplane serve` replicas, the load's requests sent round-robin to their addresses (no proxy)", c.Replicas)
			}
		}
		if c.Target != "spawned" {
			target = "the control plane at " + c.Target
		}
		switch {
		case c.PG:
			target += ", over a throwaway PostgreSQL cluster on this machine (fsync on)"
		case c.Store != "":
			target += ", --store " + c.Store
		default:
			target += ", over the file store"
		}
		pinned := ""
		if c.Pinned {
			pinned = "; the control plane pinned to CPU 0, the load to CPU 1"
			if c.PG {
				pinned = "; the control plane and PostgreSQL pinned to CPU 0, the load to CPU 1"
			}
		}
		wait := "claims answer at once (after each heartbeat and each task's end)"
		if c.ClaimWaitS > 0 {
			wait = fmt.Sprintf("claims are long polls of %.0f s (their latency holds the wait)", c.ClaimWaitS)
		}
		store := "files"
		if c.PG {
			store = "PostgreSQL"
		} else if c.Store != "" {
			store = c.Store
		}
		reps := ""
		if c.Replicas > 1 {
			reps = fmt.Sprintf(", %d replicas", c.Replicas)
		}
		fmt.Fprintf(w, "\n### Control plane under load: %s, %s agents, %g tasks/s, %s stored tasks%s\n\n", store, count(c.Agents), c.Rate, count(c.Stored), reps)
		mix := "three batches of eight events a task (synthetic)"
		if c.Mix == "captured" {
			mix = "a task's events in the batches a real agent sent them (captured)"
		}
		fmt.Fprintf(w, "%s%s; %.0f s window, heartbeat every %.0f s, %s, %s, tasks take %.0f s, %g list pages and %g event pages a second",
			target, pinned, c.WindowS, c.HeartbeatS, wait, mix, c.TaskTimeS, c.ReadRate, c.ReadRate)
		if c.LoadAvg != "" {
			fmt.Fprintf(w, "; 1-minute load average %s the window", c.LoadAvg)
		}
		fmt.Fprint(w, ".\n\n")
		fmt.Fprintln(w, "| request | count | p50 ms | p99 ms | max ms | errors | 429 | shed (503, Retry-After) |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, k := range c.Kinds {
			fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %.1f | %d | %d | %d |\n", k.Kind, k.Count, k.P50MS, k.P99MS, k.MaxMS, k.Errors, k.TooMany, k.Shed)
		}
		if e := c.Enrolment; e != nil {
			fmt.Fprintf(w, "\nBefore the window, %.0f s of warm-up: the agents registered (%d requests, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d errors, %d 429) and settled into their rounds.\n",
				c.WarmupS, e.Count, e.P50MS, e.P99MS, e.MaxMS, e.Errors, e.TooMany)
		}
		fmt.Fprintln(w, "\n| measure | value |\n|---|---:|")
		fmt.Fprintf(w, "| tasks completed | %d (%.2f/s; %d submitted) |\n", c.Completed, c.PerSec, c.Submitted)
		fmt.Fprintf(w, "| events not accepted | %d |\n", c.RejectedEvents)
		if c.Target == "spawned" {
			fmt.Fprintf(w, "| control plane CPU per request | %.0f µs (%.1f s over %d requests) |\n", c.ServerCPUPerReq, c.ServerCPUS, c.Requests)
			if c.PG {
				fmt.Fprintf(w, "| PostgreSQL CPU per request | %.0f µs (%.1f s) |\n", c.PGCPUPerReq, c.PGCPUS)
			}
			if c.StartupEmptyMS > 0 {
				fmt.Fprintf(w, "| control plane start-up, empty / with %s stored | %.0f ms / %.0f ms |\n", count(c.Stored), c.StartupEmptyMS, c.StartupMS)
			} else {
				fmt.Fprintf(w, "| control plane start-up with %s stored | %.0f ms |\n", count(c.Stored), c.StartupMS)
			}
			sum := ""
			if len(c.PerReplica) > 1 {
				sum = ", summed over the replicas"
			}
			fmt.Fprintf(w, "| control plane RSS after start (VmRSS / VmHWM%s) | %.1f MB / %.1f MB |\n", sum, float64(c.RSSStart)/1e6, float64(c.HWMStart)/1e6)
			fmt.Fprintf(w, "| control plane RSS at the end (VmRSS / VmHWM%s) | %.1f MB / %.1f MB |\n", sum, float64(c.RSSEnd)/1e6, float64(c.HWMEnd)/1e6)
			if len(c.PerReplica) > 1 {
				for i, p := range c.PerReplica {
					fmt.Fprintf(w, "| replica %d: CPU, start-up, RSS after start / at the end | %.1f s, %.0f ms, %.1f MB / %.1f MB |\n", i+1, p.CPUS, p.StartupMS, float64(p.RSSStart)/1e6, float64(p.RSSEnd)/1e6)
				}
			}
		}
		if c.FillS > 0 {
			how := "submitted and completed through the API"
			switch {
			case strings.HasPrefix(c.FillHow, "copy"):
				how = fmt.Sprintf("%d completed through the API, the rest copies of them by COPY into the tables", fillTemplates)
			case strings.HasPrefix(c.FillHow, "files"):
				how = fmt.Sprintf("%d completed through the API, the rest copies of them through the filestore package", fillTemplates)
			}
			if strings.Contains(c.FillHow, "database filled before") {
				fmt.Fprintf(w, "| fill: a copy (CREATE DATABASE … TEMPLATE) of the database filled for an earlier run (%s) | %.1f s |\n", how, c.FillS)
			} else {
				fmt.Fprintf(w, "| fill (not measured): %s tasks, %s | %.1f s (%.0f/s) |\n", count(c.Stored), how, c.FillS, float64(c.Stored)/c.FillS)
			}
		}
		fmt.Fprintf(w, "| load generator CPU per request | %.0f µs (%.1f s) |\n", c.LoadCPUPerReq, c.LoadCPUS)
		if c.ProxyCPUS > 0 {
			fmt.Fprintf(w, "| proxy CPU (the load's side, not in the line above) | %.1f s (%.0f µs per request) |\n", c.ProxyCPUS, c.ProxyCPUS*1e6/float64(max(c.Requests, 1)))
		}
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
