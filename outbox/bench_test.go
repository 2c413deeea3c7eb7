package outbox

import (
	"encoding/json"
	"fmt"
	"github.com/edgeagent/agent/internal/durable"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var benchPayloads = []int{256, 4096}

func benchPayload(size int) json.RawMessage {
	return json.RawMessage(`{"pad":"` + strings.Repeat("x", size-10) + `"}`)
}

// BenchmarkAppend measures durable appends: each returns only after its
// record is synced. Concurrent writers share syncs (group commit).
func BenchmarkAppend(b *testing.B) {
	for _, size := range benchPayloads {
		for _, writers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("payload=%d/writers=%d", size, writers), func(b *testing.B) {
				o, err := Open(b.TempDir(), Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer o.Close()
				r := Record{Kind: KindProgress, TaskID: "bench", Attempt: 1, Payload: benchPayload(size)}
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for w := range writers {
					n := b.N / writers
					if w < b.N%writers {
						n++
					}
					wg.Go(func() {
						for range n {
							if _, err := o.Append(r); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				st := o.Stats()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
				b.ReportMetric(float64(st.Syncs)/float64(st.Appends), "fsyncs/record")
			})
		}
	}
}

// BenchmarkBaselineWriteFdatasync is the machine's own floor for durable
// records: one write and one fdatasync per record, nothing shared.
func BenchmarkBaselineWriteFdatasync(b *testing.B) {
	for _, size := range benchPayloads {
		b.Run(fmt.Sprintf("payload=%d", size), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			line := append(benchPayload(size), '\n')
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, err := f.Write(line); err != nil {
					b.Fatal(err)
				}
				if err := durable.Datasync(f); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
			b.ReportMetric(1, "fsyncs/record")
		})
	}
}

// BenchmarkCompactionPause measures how long compaction stops appends: the
// copy of what was appended during the copy, the sync, the rename and the
// directory sync. 20 000 live records of 256 bytes are copied each time
// while 8 writers keep appending.
func BenchmarkCompactionPause(b *testing.B) {
	o, err := Open(b.TempDir(), Options{CompactMinBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	r := Record{Kind: KindProgress, TaskID: "bench", Payload: benchPayload(256)}
	for range 20_000 / 64 {
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() { o.Append(r) })
		}
		wg.Wait()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					o.Append(r)
				}
			}
		})
	}
	var pause, took time.Duration
	b.ResetTimer()
	for b.Loop() {
		res, err := o.Compact(nil)
		if err != nil {
			b.Fatal(err)
		}
		pause += res.Pause
		took += res.Took
	}
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(pause.Microseconds())/float64(b.N), "pause-µs")
	b.ReportMetric(float64(took.Microseconds())/float64(b.N), "compaction-µs")
}
