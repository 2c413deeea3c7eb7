package outbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The writer keeps the file zeroed ahead of its lines while it is open:
// readers see the lines only, and a clean Close leaves the lines alone.
func TestWriterKeepsTheFileZeroedAhead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	o := openT(t, dir, Options{})
	tl, err := NewTailer(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var tailed []uint64
	next := func() {
		t.Helper()
		if err := tl.Next(func(r Record) { tailed = append(tailed, r.Seq) }); err != nil {
			t.Fatal(err)
		}
	}
	// Enough records (of about 1.3 KiB) to pass the first zeroed MiB, so
	// that the file is extended while the Tailer follows it.
	big := strings.Repeat("y", 1200)
	const n = 1200
	for i := range n {
		mustAppend(t, o, Record{Kind: KindProgress, TaskID: "t", Attempt: 1, Payload: []byte(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, big))})
		if i%50 == 0 {
			next()
		}
		if i == 0 || i == n-1 {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := o.Stats().FileBytes
			want := lines // later appends eat into the stretch
			if i == 0 {
				want += zeroAheadBytes
			}
			if int64(len(b)) < want || len(bytes.TrimLeft(b[lines:], "\x00")) != 0 || b[lines-1] != '\n' {
				t.Fatalf("after %d appends: file of %d bytes, lines end at %d; want zeros after them to %d", i+1, len(b), lines, want)
			}
			if i == n-1 && int64(len(b)) < 2*zeroAheadBytes {
				t.Fatalf("after %d appends: file of %d bytes, not extended past the first stretch", n, len(b))
			}
		}
	}
	next()
	if len(tailed) != n || tailed[0] != 1 || tailed[n-1] != n {
		t.Fatalf("the Tailer saw %d records (first %v), want %d in order", len(tailed), tailed[:min(3, len(tailed))], n)
	}
	snap, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stats.Pending != n || snap.Stats.FileBytes != o.Stats().FileBytes {
		t.Fatalf("Inspect of the open outbox: %d pending, %d bytes; want %d and %d", snap.Stats.Pending, snap.Stats.FileBytes, n, o.Stats().FileBytes)
	}
	lines := o.Stats().FileBytes
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != lines {
		t.Fatalf("after Close: %v, size %d; want the lines' %d bytes", err, info.Size(), lines)
	}
}

// A crash while a batch was being written can leave a hole: zeros where
// its first bytes never reached the disk, then the rest of it, then the
// zeroed stretch. The hole is a corrupt line, set aside as ever; the lines
// after it are read, by Open and by the Tailer; the stretch is cut, not
// counted torn.
func TestHoleBeforeLinesIsACorruptLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	o := openT(t, dir, Options{})
	for i := range 3 {
		mustAppend(t, o, rec("t", KindProgress, i))
	}
	o.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Zero the second record's line, all but its newline.
	lines := bytes.SplitAfter(b, []byte("\n"))
	start := len(lines[0]) + len(lines[1]) // the header, the first record
	for i := start; i < start+len(lines[2])-1; i++ {
		b[i] = 0
	}
	b = append(b, make([]byte, 3*4096)...)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	tl, err := NewTailer(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	var tailed []uint64
	if err := tl.Next(func(r Record) { tailed = append(tailed, r.Seq) }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tailed) != "[1 3]" {
		t.Fatalf("the Tailer saw %v, want [1 3]", tailed)
	}

	o = openT(t, dir, Options{})
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("pending %v, want [1 3]", got)
	}
	if st := o.Stats(); st.Quarantined != 1 || st.TornBytes != 0 {
		t.Fatalf("quarantined %d, torn %d; want the hole set aside and nothing torn", st.Quarantined, st.TornBytes)
	}
	q, err := os.ReadFile(filepath.Join(dir, QuarantineName))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(q, []byte("\n")) != 1 {
		t.Fatalf("quarantine holds %d lines, want the hole alone", bytes.Count(q, []byte("\n")))
	}
}

// On a disk that fills up while the outbox is open, the records the
// zeroed stretch has room for are still written; past it, the next
// stretch does not fit, and appends fail with the disk's error and leave
// nothing behind, until space returns. Needs root, to mount a small
// tmpfs (above zeroAheadMinFree, so that the stretch is made at all).
func TestZeroedStretchOnADiskThatFills(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(disk, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", disk).Run() })
	dir := filepath.Join(disk, "outbox")
	o := openT(t, dir, Options{})
	payload := []byte(`{"pad":"` + strings.Repeat("z", 4000) + `"}`)
	r := Record{Kind: KindProgress, TaskID: "t", Attempt: 1, Payload: payload}
	mustAppend(t, o, r) // makes the stretch
	filler, err := os.Create(filepath.Join(disk, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 1<<20)
	for {
		if _, err := filler.Write(block); err != nil {
			break
		}
	}
	for {
		if _, err := filler.Write(block[:4096]); err != nil {
			break
		}
	}
	filler.Close()
	acked := 1
	var appendErr error
	for range 1000 {
		if _, appendErr = o.Append(r); appendErr != nil {
			break
		}
		acked++
	}
	if appendErr == nil || !strings.Contains(appendErr.Error(), "no space left") {
		t.Fatalf("after %d appends on a full disk: %v, want no space left", acked, appendErr)
	}
	if per := int(o.Stats().FileBytes) / acked; acked < zeroAheadBytes/per/2 {
		t.Fatalf("only %d records of %d bytes fit after the disk filled; the stretch holds about %d", acked-1, per, zeroAheadBytes/per)
	}
	t.Logf("%d records written after the disk filled, then: %v", acked-1, appendErr)
	if err := os.Remove(filepath.Join(disk, "filler")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, o, r)
	acked++
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o = openT(t, dir, Options{})
	st := o.Stats()
	if st.Pending != acked || st.TornBytes != 0 || st.Quarantined != 0 {
		t.Fatalf("reopened: %d pending, %d torn, %d quarantined; want %d, 0, 0", st.Pending, st.TornBytes, st.Quarantined, acked)
	}
}

// A batch written without a stretch (here, its zero write refused by a
// file size limit, as a quota would) moves the file's end past the
// stretch; the next stretch must start after the lines, never over them
// (found in review: it zeroed, or cut, acknowledged records).
func TestStretchNeverStartsOverLines(t *testing.T) {
	// Not in parallel: the file size limit it sets is the whole process's.
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	mustAppend(t, o, rec("t", KindProgress, 0))
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	// Room for lines 64 KiB past the stretch, none for another stretch.
	// (The runtime ignores SIGXFSZ: a write past the limit fails EFBIG.)
	z := o.zeroed
	lim := syscall.Rlimit{Cur: uint64(z + 64<<10), Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("set a file size limit: %v", err)
	}
	acked := 1
	for o.size < z+16<<10 {
		if _, err := o.Append(rec("t", KindProgress, acked)); err != nil {
			syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
			t.Fatalf("append %d: %v", acked, err)
		}
		acked++
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	for range 300 { // past the end once more: a stretch is made again
		mustAppend(t, o, rec("t", KindProgress, acked))
		acked++
	}
	if _, err := o.Pending(1<<30, 1<<40); err != nil {
		t.Fatalf("Pending: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o = openT(t, dir, Options{})
	if st := o.Stats(); st.Pending != acked || st.Quarantined != 0 || st.TornBytes != 0 {
		t.Fatalf("reopened: %d pending, %d quarantined, %d torn; %d were acknowledged", st.Pending, st.Quarantined, st.TornBytes, acked)
	}
}

// The Tailer follows writers that extend the stretch again and again, and
// sees every record in order: where it finds bytes after the first NUL (a
// batch being written), it reads to the last of them, not into the
// stretch as it is being written (found in review: records were skipped).
func TestTailerMissesNothingWhileTheStretchGrows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{CompactMinBytes: 1 << 40})
	tl, err := NewTailer(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	const writers, each = 32, 250 // about 25 MiB: some 25 extensions
	pad := strings.Repeat("p", 3000)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := o.Append(Record{Kind: KindProgress, TaskID: "t", Attempt: 1, Payload: []byte(fmt.Sprintf(`{"w":%d,"i":%d,"p":%q}`, w, i, pad))}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var last uint64
	gaps := 0
	for last < writers*each && !t.Failed() {
		if err := tl.Next(func(r Record) {
			if r.Seq != last+1 {
				gaps++
				t.Errorf("the Tailer went from seq %d to %d", last, r.Seq)
			}
			last = r.Seq
		}); err != nil {
			t.Fatal(err)
		}
		if gaps > 5 {
			break
		}
	}
	wg.Wait()
}
