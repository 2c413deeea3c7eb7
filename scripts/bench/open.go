package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/edgeagent/agent/outbox"
)

// childEnv names the measurement a re-executed copy of this program runs
// (so each open starts in a fresh process: heap and RSS are its own).
const childEnv = "AGENT_BENCH_CHILD"

// The open measurements a child runs.
const (
	childOpenOutbox = "open-outbox"
	childOpenJSON   = "open-json"
)

// openFigures is what a child reports.
type openFigures struct {
	Seconds   float64 `json:"seconds"`
	Lines     int     `json:"lines"`   // json: lines decoded
	Pending   int     `json:"pending"` // outbox: pending records listed
	HeapBytes int64   `json:"heap_bytes"`
	RSSBytes  int64   `json:"rss_bytes"`  // VmRSS growth, once garbage is returned
	PeakBytes int64   `json:"peak_bytes"` // VmHWM over the VmRSS before open
}

// childMain runs the measurement the environment names on the directory
// given and prints its figures as JSON. It reports whether it ran.
func childMain() bool {
	what := os.Getenv(childEnv)
	if what == "" {
		return false
	}
	dir := os.Getenv(childEnv + "_DIR")
	var (
		f   openFigures
		err error
	)
	switch what {
	case childOpenOutbox:
		f, err = openAndList(dir)
	case childOpenJSON:
		f, err = decodeLines(filepath.Join(dir, outbox.FileName))
	default:
		err = fmt.Errorf("unknown child %q", what)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(f)
	return true
}

// heapNow collects garbage, returns freed memory to the system, and
// tells the live heap, so that heap and VmRSS then say what is held.
func heapNow() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// openAndList opens the outbox and lists every pending record, then tells
// what the open outbox holds once the listed records are dropped.
func openAndList(dir string) (openFigures, error) {
	heap0, rss0 := heapNow(), selfRSS()
	start := time.Now()
	o, err := outbox.Open(dir, outbox.Options{CompactMinBytes: math.MaxInt64})
	if err != nil {
		return openFigures{}, err
	}
	recs, err := o.Pending(math.MaxInt, math.MaxInt)
	took := time.Since(start)
	if err != nil {
		return openFigures{}, err
	}
	f := openFigures{Seconds: took.Seconds(), Pending: len(recs)}
	recs = nil
	f.HeapBytes, f.RSSBytes = heapNow()-heap0, selfRSS()-rss0
	if hwm, err := statusField("self", "VmHWM"); err == nil {
		f.PeakBytes = hwm - rss0
	}
	runtime.KeepAlive(recs)
	return f, o.Close()
}

// anyLine has every field an outbox line may carry, so that decoding it
// does the work a reader of the format must do at least once.
type anyLine struct {
	Op          string          `json:"op"`
	Seq         uint64          `json:"seq"`
	Key         string          `json:"key"`
	Kind        string          `json:"kind"`
	TaskID      string          `json:"task_id"`
	Attempt     int             `json:"attempt"`
	CreatedAt   time.Time       `json:"created_at"`
	Payload     json.RawMessage `json:"payload"`
	Seqs        []uint64        `json:"seqs"`
	N           int             `json:"n"`
	Reason      string          `json:"reason"`
	Error       string          `json:"error"`
	At          time.Time       `json:"at"`
	Version     int             `json:"version"`
	NextSeq     uint64          `json:"next_seq"`
	CompactedAt time.Time       `json:"compacted_at"`
	CRC         string          `json:"crc"`
}

// decodeLines is the yardstick of open: read the file and decode each
// line once with encoding/json.
func decodeLines(path string) (openFigures, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return openFigures{}, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	n := 0
	for {
		l, err := r.ReadSlice('\n')
		if err == io.EOF && len(l) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return openFigures{}, err
		}
		var d anyLine
		if err := json.Unmarshal(l, &d); err != nil {
			return openFigures{}, fmt.Errorf("line %d: %w", n+1, err)
		}
		n++
	}
	return openFigures{Seconds: time.Since(start).Seconds(), Lines: n}, nil
}

// runChild runs one measurement in a fresh copy of this program.
func runChild(what, dir string) (openFigures, error) {
	exe, err := os.Executable()
	if err != nil {
		return openFigures{}, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+what, childEnv+"_DIR="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return openFigures{}, fmt.Errorf("%s: %w", what, err)
	}
	var f openFigures
	if err := json.Unmarshal(out, &f); err != nil {
		return openFigures{}, fmt.Errorf("%s: %q: %w", what, out, err)
	}
	return f, nil
}

// openResult is the open section's figures.
type openResult struct {
	Records      int       `json:"records"`
	Pending      int       `json:"pending"`
	OutboxMS     float64   `json:"outbox_ms"` // median open + list pending
	JSONMS       float64   `json:"json_ms"`   // median decode every line
	Ratios       []float64 `json:"ratios"`    // outbox time over json time, per round
	Ratio        float64   `json:"ratio"`
	HeapPerPend  float64   `json:"heap_bytes_per_pending"`
	RSSPerPend   float64   `json:"rss_bytes_per_pending"`
	PeakPerPend  float64   `json:"peak_rss_bytes_per_pending"`
	LinesDecoded int       `json:"lines_decoded"`
}

func openSection(cfg config, fx *fixture, log *log.Logger) (*openResult, error) {
	src, err := fx.backlog(cfg.openTotal)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(fx.base, "open")
	if err := copyTree(src, dir); err != nil {
		return nil, err
	}
	if err := markSent(dir, cfg.openTotal-cfg.openPending); err != nil {
		return nil, err
	}
	// Read once, so both start from the page cache.
	if _, err := decodeLines(filepath.Join(dir, outbox.FileName)); err != nil {
		return nil, err
	}
	res := &openResult{Records: cfg.openTotal, Pending: cfg.openPending}
	var ob, js, heap, rss, peak []float64
	for round := range cfg.rounds {
		var o, j openFigures
		for k := range 2 {
			if (k+round)%2 == 0 {
				o, err = runChild(childOpenOutbox, dir)
			} else {
				j, err = runChild(childOpenJSON, dir)
			}
			if err != nil {
				return nil, err
			}
		}
		if o.Pending != cfg.openPending {
			return nil, fmt.Errorf("open listed %d pending, want %d", o.Pending, cfg.openPending)
		}
		log.Printf("round %d, open %s/%s pending: outbox %.0f ms, decode each line %.0f ms", round+1, count(cfg.openTotal), count(cfg.openPending), o.Seconds*1e3, j.Seconds*1e3)
		ob, js = append(ob, o.Seconds*1e3), append(js, j.Seconds*1e3)
		res.Ratios = append(res.Ratios, o.Seconds/j.Seconds)
		heap = append(heap, float64(o.HeapBytes)/float64(o.Pending))
		rss = append(rss, float64(o.RSSBytes)/float64(o.Pending))
		peak = append(peak, float64(o.PeakBytes)/float64(o.Pending))
		res.LinesDecoded = j.Lines
	}
	res.OutboxMS, res.JSONMS, res.Ratio = median(ob), median(js), median(res.Ratios)
	res.HeapPerPend, res.RSSPerPend, res.PeakPerPend = median(heap), median(rss), median(peak)
	return res, nil
}
