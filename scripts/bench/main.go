// Command bench measures the outbox and delivery beside peers, in one
// invocation: durable appends against a raw write+fdatasync loop, a
// hand-written group commit, tidwall/wal and nsqio/go-diskqueue; open and
// list pending against decoding each line once; drain through the
// product's delivery path against a raw batched POST loop; the compaction
// pause; the idle agent; and, only when -only names it, the control
// plane under load (cpload). It prints markdown tables (BENCHMARKS.md
// says what each number means). `make bench` runs it.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// The sections, in the order they run.
// cpload, the control plane under load, and capture, a real agent's
// requests recorded, run only when -only names them.
var sections = []string{"appends", "open", "drain", "compaction", "idle", "cpload", "capture"}

// fsDir is a file system the appends run on.
type fsDir struct{ name, dir string }

type config struct {
	quick      bool
	rounds     int
	appendTime time.Duration // per contender, case and round
	// appendSlices: appendTime is run in this many slices, the
	// contenders taking turns.
	appendSlices int
	payloads     []int
	writers      []int
	openTotal    int
	openPending  int
	// drainCompare is the backlog drained beside the raw POST loop.
	drainCompare int
	backlogs     []int
	// growthRounds: the largest backlog is drained in this many rounds.
	growthRounds int
	compactLive  int
	compactions  int
	idleWindow   time.Duration
	only         map[string]bool
	// capture: where it writes, how long the agent idles between its
	// tasks, the control plane's heartbeat interval.
	captureOut       string
	captureIdle      time.Duration
	captureHeartbeat time.Duration
	dataDir          string // on the repo's disk
	tmpfsDir         string // "" when there is no writable tmpfs
	repo             string
	cp               cpConfig
}

func fullConfig() config {
	return config{rounds: 3, appendTime: time.Second, appendSlices: 5, payloads: []int{256, 4096}, writers: []int{1, 8, 64},
		openTotal: 1_000_000, openPending: 100_000, drainCompare: 100_000, backlogs: []int{10_000, 100_000, 1_000_000},
		growthRounds: 1, compactLive: 20_000, compactions: 10, idleWindow: 20 * time.Second}
}

func quickConfig() config {
	return config{quick: true, rounds: 1, appendTime: 200 * time.Millisecond, appendSlices: 2, payloads: []int{256, 4096}, writers: []int{1, 8, 64},
		openTotal: 10_000, openPending: 1_000, drainCompare: 2_000, backlogs: []int{1_000, 2_000, 10_000},
		growthRounds: 1, compactLive: 2_000, compactions: 3, idleWindow: 2 * time.Second}
}

func (c config) filesystems() []fsDir {
	fs := []fsDir{{"disk", c.dataDir}}
	if c.tmpfsDir != "" {
		fs = append(fs, fsDir{"tmpfs", c.tmpfsDir})
	}
	return fs
}

func (c config) runs(section string) bool {
	if section == "cpload" || section == "capture" {
		return c.only[section]
	}
	return len(c.only) == 0 || c.only[section]
}

// report is everything one invocation measured.
type report struct {
	Date       time.Time         `json:"date"`
	Mode       string            `json:"mode"`
	Rounds     int               `json:"rounds"`
	Machine    machine           `json:"machine"`
	Took       float64           `json:"took_s"`
	Appends    []appendRow       `json:"appends,omitempty"`
	Open       *openResult       `json:"open,omitempty"`
	Drain      *drainResult      `json:"drain,omitempty"`
	Compaction *compactionResult `json:"compaction,omitempty"`
	Idle       *idleResult       `json:"idle,omitempty"`
	CPLoad     []*cploadResult   `json:"cpload,omitempty"`
	Capture    *captureReport    `json:"capture,omitempty"`
	Notes      []string          `json:"notes,omitempty"`
}

func main() {
	if proxyMain() || childMain() {
		return
	}
	quick := flag.Bool("quick", false, "small counts and one round: for development and CI smoke")
	only := flag.String("only", "", "comma-separated sections to run: "+strings.Join(sections, ","))
	rounds := flag.Int("rounds", 0, "rounds (default 3, 1 with -quick)")
	dir := flag.String("dir", "", "where the disk runs work (default: a temp dir on the repo's disk)")
	repo := flag.String("repo", "../..", "the agent's repository (to build the agent for the idle section)")
	jsonOut := flag.String("json", "", "also write the figures as JSON to this file")
	printFile := flag.String("print", "", "measure nothing: print the tables of a file -json wrote")
	cpAgents := flag.String("cp-agents", "", "cpload: simulated agents, a comma-separated list for several runs (default 1000, 50 with -quick)")
	cpStored := flag.String("cp-stored", "", "cpload: completed tasks stored before the load, a list like -cp-agents (default 1000, 100 with -quick; 10k, 1M take)")
	cpRate := flag.Float64("cp-rate", 0, "cpload: tasks submitted per second (default 10, 5 with -quick)")
	cpDuration := flag.Duration("cp-duration", 0, "cpload: the measured window (default 60s, 10s with -quick)")
	cpHeartbeat := flag.Duration("cp-heartbeat", 0, "cpload: each agent's heartbeat interval, spread evenly over the agents (default 10s)")
	cpClaimWait := flag.Duration("cp-claim-wait", -1, "cpload: claims as long polls of this wait; 0: claims answer at once, after each heartbeat and task (default: as the mix says: the capture's wait, 20s, with -cp-mix captured; 0 with synthetic)")
	cpMix := flag.String("cp-mix", "captured", "cpload: what the agents send for a task: captured (the batches a real agent sent, scripts/bench/capture/agent-sample.jsonl) or synthetic (three batches of eight events, the mix before the capture)")
	cpTaskTime := flag.Duration("cp-task-time", 0, "cpload: from a task's first events to its completion (default 2s)")
	cpReadRate := flag.Float64("cp-read-rate", 0, "cpload: GET /v1/tasks pages and GET /v1/tasks/{id}/events pages per second, each (default 2)")
	cpStore := flag.String("cp-store", "", "cpload: passed to the control plane as --store URL (none when empty)")
	cpURL := flag.String("cp-url", "", "cpload: load a control plane already running at this URL instead of starting one (needs -cp-token and -cp-operator)")
	cpToken := flag.String("cp-token", "", "cpload, with -cp-url: its registration secret, or a file holding it")
	cpOperator := flag.String("cp-operator", "", "cpload, with -cp-url: an operator token, or a file holding it")
	cpAgentBin := flag.String("cp-agent-bin", "", "cpload: an agent binary already built (default: build ./cmd/agent)")
	cpPG := flag.Bool("cp-pg", false, "cpload: run the control plane over a throwaway PostgreSQL cluster (initdb in a temp dir, a free loopback port, fsync on; removed at the end), a database per run")
	cpReplicas := flag.String("cp-replicas", "1", "cpload: control plane processes on the same store, behind a round-robin proxy in the harness (more than 1: PostgreSQL only); a list (1,2) runs each pair with each count")
	cpFill := flag.String("cp-fill", "direct", "cpload: how the stored tasks are made: direct (the API completes 20, the store gets copies of them: COPY into PostgreSQL, the filestore package for files) or api (every one through the API)")
	cpBalance := flag.String("cp-balance", "proxy", "cpload, with replicas: how the load reaches them: proxy (a round-robin reverse proxy in a child process, the load's side) or client (the load's requests go round-robin to the replicas' addresses, as a load balancer that costs this machine nothing would)")
	cpWarmup := flag.Duration("cp-warmup", 0, "cpload: run the load this long before the window opens: the agents register and settle into their rounds first (registrations are then reported as the enrolment, apart from the window)")
	cpStatements := flag.Int("cp-pg-statements", 0, "cpload, with -cp-pg: print the N statements PostgreSQL spent most time in over each window (pg_stat_statements) on stderr")
	cpPin := flag.Bool("cp-pin", true, "cpload: with 2 or more CPUs, pin the control plane to CPU 0 and the load to CPU 1")
	captureOut := flag.String("capture-out", "scripts/bench/capture/agent-sample.jsonl", "capture: where the agent's requests are written, one JSON line each (relative to -repo)")
	captureIdle := flag.Duration("capture-idle", 35*time.Second, "capture: how long the agent idles before, between and after its tasks")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (this process: the product's outbox, delivery and the control plane run in it) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			os.Exit(1)
		}
	}
	if *printFile != "" {
		var rep report
		b, err := os.ReadFile(*printFile)
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -print:", err)
			os.Exit(1)
		}
		printReport(os.Stdout, &rep)
		return
	}
	cfg := fullConfig()
	if *quick {
		cfg = quickConfig()
	}
	if *rounds > 0 {
		cfg.rounds = *rounds
	}
	if err := cfg.setOnly(*only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	cfg.repo = *repo
	cfg.captureOut, cfg.captureIdle, cfg.captureHeartbeat = *captureOut, *captureIdle, 10*time.Second
	cfg.cp = fullCP()
	if *quick {
		cfg.cp = quickCP()
	}
	for _, l := range []struct {
		s   string
		dst *[]int
	}{{*cpAgents, &cfg.cp.agents}, {*cpStored, &cfg.cp.stored}} {
		if l.s == "" {
			continue
		}
		v, err := parseCounts(l.s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cp-agents, -cp-stored:", err)
			os.Exit(2)
		}
		*l.dst = v
	}
	if *cpRate > 0 {
		cfg.cp.rate = *cpRate
	}
	if *cpDuration > 0 {
		cfg.cp.duration = *cpDuration
	}
	if *cpHeartbeat > 0 {
		cfg.cp.heartbeat = *cpHeartbeat
	}
	if *cpTaskTime > 0 {
		cfg.cp.taskTime = *cpTaskTime
	}
	if *cpReadRate > 0 {
		cfg.cp.readRate = *cpReadRate
	}
	cfg.cp.store, cfg.cp.url, cfg.cp.agentBin, cfg.cp.pin = *cpStore, *cpURL, *cpAgentBin, *cpPin
	if err := cfg.cp.setMix(*cpMix, *cpClaimWait); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	cfg.cp.statements = *cpStatements
	cfg.cp.warmup = *cpWarmup
	cfg.cp.balance = *cpBalance
	cfg.cp.token, cfg.cp.operator = tokenArg(*cpToken), tokenArg(*cpOperator)
	cfg.cp.pg, cfg.cp.fill = *cpPG, *cpFill
	if reps, err := parseCounts(*cpReplicas); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -cp-replicas:", err)
		os.Exit(2)
	} else {
		cfg.cp.replicas = reps
	}
	if *cpFill != "direct" && *cpFill != "api" {
		fmt.Fprintln(os.Stderr, "bench: -cp-fill: want direct or api")
		os.Exit(2)
	}
	cleanup, err := cfg.setDirs(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	rep, runErr := run(cfg, log.New(os.Stderr, "bench: ", 0))
	pprof.StopCPUProfile() // nothing when not profiling
	cleanup()
	printReport(os.Stdout, rep)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "bench:", runErr)
		os.Exit(1)
	}
}

func (c *config) setOnly(s string) error {
	if s == "" {
		return nil
	}
	c.only = map[string]bool{}
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(sections, name) {
			return fmt.Errorf("-only: unknown section %q (want some of %s)", name, strings.Join(sections, ","))
		}
		c.only[name] = true
	}
	return nil
}

// setDirs makes the work directories: one on the disk the repository is
// on (the temp dir when it is on that disk, else one in the repository's
// parent), and one on /dev/shm when it is writable. The cleanup removes
// them.
func (c *config) setDirs(dir string) (func(), error) {
	if dir == "" {
		dir = os.TempDir()
		if !sameDevice(dir, c.repo) {
			dir = filepath.Dir(must(filepath.Abs(c.repo)))
		}
	}
	d, err := os.MkdirTemp(dir, "agent-bench-")
	if err != nil {
		return nil, err
	}
	c.dataDir = d
	if writable("/dev/shm") {
		if c.tmpfsDir, err = os.MkdirTemp("/dev/shm", "agent-bench-"); err != nil {
			os.RemoveAll(d)
			return nil, err
		}
	}
	return func() { os.RemoveAll(c.dataDir); os.RemoveAll(c.tmpfsDir) }, nil
}

func must[T any](v T, _ error) T { return v }

// run measures the sections cfg selects.
func run(cfg config, log *log.Logger) (*report, error) {
	start := time.Now()
	_, dataFS := mountOf(cfg.dataDir)
	rep := &report{Date: start.UTC(), Mode: "full", Rounds: cfg.rounds, Machine: machine{CPUs: runtime.NumCPU(), Model: cpuModel(),
		Kernel: kernel(), DataFS: dataFS, DataDir: cfg.dataDir, TmpFS: cfg.tmpfsDir, Load: loadAvg()}}
	if cfg.quick {
		rep.Mode = "quick"
	}
	if cfg.tmpfsDir == "" {
		rep.Machine.TmpFS = "none"
		rep.Notes = append(rep.Notes, "tmpfs cases skipped: /dev/shm is not writable")
	}
	// A section that fails is reported and the others still run: one
	// broken build must not throw away minutes of figures.
	var errs []error
	section := func(name string, fn func() error) {
		if !cfg.runs(name) {
			return
		}
		if err := fn(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			rep.Notes = append(rep.Notes, fmt.Sprintf("section %s failed: %s", name, firstLine(err.Error())))
		}
	}
	section("appends", func() (err error) { rep.Appends, err = appendsSection(cfg, log); return err })
	var fx *fixture
	if cfg.runs("open") || cfg.runs("drain") || cfg.runs("idle") {
		var err error
		if fx, err = newFixture(filepath.Join(cfg.dataDir, "fixture")); err != nil {
			return rep, errors.Join(append(errs, fmt.Errorf("fixture: %w", err))...)
		}
	}
	section("open", func() (err error) { rep.Open, err = openSection(cfg, fx, log); return err })
	section("drain", func() (err error) { rep.Drain, err = drainSection(cfg, fx, log); return err })
	section("compaction", func() (err error) { rep.Compaction, err = compactionSection(cfg, log); return err })
	section("idle", func() (err error) { rep.Idle, err = idleSection(cfg, fx, log); return err })
	section("cpload", func() (err error) { rep.CPLoad, err = cploadSection(cfg, log); return err })
	section("capture", func() (err error) { rep.Capture, err = captureSection(cfg, log); return err })
	rep.Took = time.Since(start).Seconds()
	rep.Machine.Load += " at the start, " + loadAvg() + " at the end"
	return rep, errors.Join(errs...)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
