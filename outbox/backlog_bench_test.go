package outbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// writeBacklog writes an outbox of n records of about 200 bytes, laid out
// as Append writes them, marked sent 500 at a time as the sender does, all
// but the last pending ones.
func writeBacklog(b *testing.B, dir string, n, pending int) {
	b.Helper()
	f, err := os.Create(filepath.Join(dir, FileName))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	created := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	w.Write(encodeMark(line{Op: opHeader, Version: formatVersion, NextSeq: 1, CreatedAt: created, At: created}))
	var sent []uint64
	for seq := uint64(1); seq <= uint64(n); seq++ {
		r := Record{Kind: KindProgress, TaskID: fmt.Sprintf("task-%d", seq/1000), Attempt: 1,
			CreatedAt: created.Add(time.Duration(seq) * time.Millisecond), Payload: benchPayload(200)}
		d, err := newDraft(r)
		if err != nil {
			b.Fatal(err)
		}
		l := d.finish(seq)
		w.Write(l)
		if int(seq) <= n-pending {
			sent = append(sent, seq)
		}
		if len(sent) == 500 {
			w.Write(encodeMark(line{Op: opSent, Seqs: sent, At: created}))
			sent = sent[:0]
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
}

// BenchmarkOpenBacklog opens an outbox of 200k records with 20k pending
// and lists every pending record, beside reading the same file and
// decoding each line once with encoding/json (the yardstick of issue 13:
// the outbox should take at most half of that). It reports the heap the
// open outbox holds per pending record.
func BenchmarkOpenBacklog(b *testing.B) {
	const records, pending = 200_000, 20_000
	dir := b.TempDir()
	writeBacklog(b, dir, records, pending)
	b.Run("outbox", func(b *testing.B) {
		var perPending float64
		for b.Loop() {
			before := heapInUse()
			o, err := Open(dir, Options{CompactMinBytes: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			recs, err := o.Pending(1<<30, 1<<62)
			if err != nil || len(recs) != pending {
				b.Fatalf("Pending: %d records, %v", len(recs), err)
			}
			b.StopTimer()
			recs = nil
			perPending = float64(int64(heapInUse())-int64(before)) / pending
			runtime.KeepAlive(recs)
			o.Close()
			b.StartTimer()
		}
		b.ReportMetric(perPending, "heap-B/pending")
	})
	b.Run("decode-each-line", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(filepath.Join(dir, FileName))
			if err != nil {
				b.Fatal(err)
			}
			br := bufio.NewReaderSize(f, 1<<20)
			n := 0
			for {
				l, err := br.ReadSlice('\n')
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				var d line
				if err := json.Unmarshal(l, &d); err != nil {
					b.Fatal(err)
				}
				n++
			}
			f.Close()
			if n < records {
				b.Fatalf("%d lines", n)
			}
		}
	})
}

// BenchmarkDrainBacklog drains backlogs of growing size the way the sender
// does (Pending of 500, MarkSent), without a network, and reports the time
// per record: it must not grow with the backlog.
func BenchmarkDrainBacklog(b *testing.B) {
	for _, n := range drainBacklogs {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			src := b.TempDir()
			writeBacklog(b, src, n, n)
			data, err := os.ReadFile(filepath.Join(src, FileName))
			if err != nil {
				b.Fatal(err)
			}
			var took time.Duration
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
					b.Fatal(err)
				}
				o, err := Open(dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				for {
					recs, err := o.Pending(500, 1<<20)
					if err != nil {
						b.Fatal(err)
					}
					if len(recs) == 0 {
						break
					}
					seqs := make([]uint64, len(recs))
					for i, r := range recs {
						seqs[i] = r.Seq
					}
					if err := o.MarkSent(seqs...); err != nil {
						b.Fatal(err)
					}
				}
				took += time.Since(start)
				b.StopTimer()
				o.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N*n), "ns/record")
		})
	}
}

// drainBacklogs are BenchmarkDrainBacklog's sizes; OUTBOX_BENCH_1M=1 adds
// a backlog of a million.
var drainBacklogs = func() []int {
	if os.Getenv("OUTBOX_BENCH_1M") != "" {
		return []int{10_000, 100_000, 1_000_000}
	}
	return []int{10_000, 100_000}
}()
