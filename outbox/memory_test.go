package outbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// writeSentFile writes an outbox of n records of about size bytes each,
// all marked sent but the last pending ones, the way a long-running agent
// leaves it between compactions.
func writeSentFile(t testing.TB, dir string, n, size, pending int) int64 {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	pad := strings.Repeat("x", size)
	created := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	var sent []uint64
	for seq := uint64(1); seq <= uint64(n); seq++ {
		body := fmt.Sprintf(`{"seq":%d,"key":"t:log:%d","kind":"log","task_id":"t","attempt":1,"created_at":%q,"payload":{"pad":%q}`,
			seq, seq, created.Format(TimeFormat), pad)
		w.Write(seal([]byte(body)))
		if int(seq) <= n-pending {
			sent = append(sent, seq)
		}
		if len(sent) == maxSeqsPerMark || (int(seq) == n && len(sent) > 0) {
			w.Write(encodeMark(line{Op: opSent, Seqs: sent, At: created}))
			sent = sent[:0]
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	info, _ := f.Stat()
	f.Close()
	return info.Size()
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryIsOPendingNotOFileSize opens a 64 MB outbox whose records are
// all sent but 100, and checks that the open outbox holds a small fraction
// of the file in memory.
func TestMemoryIsOPendingNotOFileSize(t *testing.T) {
	dir := t.TempDir()
	size := writeSentFile(t, dir, 64_000, 1000, 100)
	before := heapInUse()
	o := openT(t, dir, Options{CompactMinBytes: 1 << 40}) // no compaction: measure the index alone
	grown := int64(heapInUse()) - int64(before)
	if st := o.Stats(); st.Pending != 100 {
		t.Fatalf("pending %d, want 100", st.Pending)
	}
	t.Logf("file %d bytes, heap grew %d bytes", size, grown)
	if grown > size/50 {
		t.Errorf("heap grew by %d bytes for a %d-byte file with 100 pending records: memory follows the file", grown, size)
	}
	runtime.KeepAlive(o)
}

// BenchmarkOpen measures recovery time per megabyte of outbox.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	size := writeSentFile(b, dir, 16_000, 1000, 1000)
	b.SetBytes(size)
	for b.Loop() {
		o, err := Open(dir, Options{CompactMinBytes: 1 << 40})
		if err != nil {
			b.Fatal(err)
		}
		o.Close()
	}
	b.ReportMetric(float64(size)/1e6, "file-MB")
}
