package main

import (
	"fmt"
	"log"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/outbox"
)

// compactionResult is the pause appends see while a compaction runs, as
// outbox/bench_test.go's BenchmarkCompactionPause measures it: 20,000 live
// records of 256 B copied while 8 writers keep appending.
type compactionResult struct {
	Live        int     `json:"live"`
	Compactions int     `json:"compactions"`
	PauseUS     float64 `json:"pause_us"`     // median over rounds of the mean pause
	MaxPauseUS  float64 `json:"max_pause_us"` // the longest single pause
	TookUS      float64 `json:"took_us"`      // median over rounds of the mean compaction
	Appends     int64   `json:"appends"`      // appended meanwhile
}

func compactionSection(cfg config, log *log.Logger) (*compactionResult, error) {
	res := &compactionResult{Live: cfg.compactLive, Compactions: cfg.compactions}
	var pauses, tooks []float64
	for round := range cfg.rounds {
		p, t, mx, n, err := compactOnce(cfg.dataDir, cfg.compactLive, cfg.compactions)
		if err != nil {
			return nil, err
		}
		log.Printf("round %d, compaction: pause %.0f µs (max %.0f), compaction %.0f µs", round+1, p, mx, t)
		pauses, tooks = append(pauses, p), append(tooks, t)
		res.MaxPauseUS = math.Max(res.MaxPauseUS, mx)
		res.Appends += n
	}
	res.PauseUS, res.TookUS = median(pauses), median(tooks)
	return res, nil
}

// compactOnce returns the mean pause, the mean compaction, the longest
// pause (µs) and the records appended meanwhile.
func compactOnce(parent string, live, times int) (pause, took, longest float64, appended int64, err error) {
	dir, err := os.MkdirTemp(parent, "compact-")
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	o, err := outbox.Open(dir, outbox.Options{CompactMinBytes: math.MaxInt64})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer o.Close()
	r := outbox.Record{Kind: outbox.KindProgress, TaskID: "bench", Payload: benchPayload(256)}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for next.Add(1) <= int64(live) {
				o.Append(r)
			}
		})
	}
	wg.Wait()
	if st := o.Stats(); st.Pending != live {
		return 0, 0, 0, 0, fmt.Errorf("compaction: %d pending after %d appends", st.Pending, live)
	}
	var stop atomic.Bool
	var count atomic.Int64
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				if _, err := o.Append(r); err == nil {
					count.Add(1)
				}
			}
		})
	}
	var sumPause, sumTook time.Duration
	for range times {
		res, err := o.Compact(nil)
		if err != nil {
			stop.Store(true)
			wg.Wait()
			return 0, 0, 0, 0, err
		}
		sumPause += res.Pause
		sumTook += res.Took
		longest = math.Max(longest, us(res.Pause))
	}
	stop.Store(true)
	wg.Wait()
	return us(sumPause) / float64(times), us(sumTook) / float64(times), longest, count.Load(), nil
}
