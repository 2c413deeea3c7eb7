package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/edgeagent/agent/internal/durable"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}

func openT(t testing.TB, dir string, opts Options) *Outbox {
	t.Helper()
	o, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func rec(task string, kind Kind, i int) Record {
	return Record{Kind: kind, TaskID: task, Attempt: 1, Payload: json.RawMessage(fmt.Sprintf(`{"i": %d, "msg": "line\nwith newline"}`, i))}
}

func mustAppend(t testing.TB, o *Outbox, r Record) uint64 {
	t.Helper()
	seq, err := o.Append(r)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return seq
}

func pendingSeqs(t testing.TB, o *Outbox) []uint64 {
	t.Helper()
	recs, err := o.Pending(1<<30, 1<<40)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	var seqs []uint64
	for _, r := range recs {
		seqs = append(seqs, r.Seq)
	}
	return seqs
}

func TestAppendThenReopenKeepsEveryRecordInOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	kinds := []Kind{KindPhase, KindProgress, KindLog, KindAttempt, KindComplete}
	var want []Record
	for i, k := range kinds {
		r := rec("task-1", k, i)
		if k == KindPhase {
			r.Key = "task-1:phase:claimed:x"
		}
		r.Seq = mustAppend(t, o, r)
		want = append(want, r)
	}
	o.Close()

	o = openT(t, dir, Options{})
	got, err := o.Pending(100, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.Seq != w.Seq || g.Kind != w.Kind || g.TaskID != w.TaskID || g.Attempt != 1 {
			t.Errorf("record %d: got %+v, want %+v", i, g, w)
		}
		var p struct {
			I   int    `json:"i"`
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal(g.Payload, &p); err != nil || p.I != i || p.Msg != "line\nwith newline" {
			t.Errorf("record %d payload %s", i, g.Payload)
		}
		if i > 0 && g.Seq <= got[i-1].Seq {
			t.Errorf("seq not rising: %d after %d", g.Seq, got[i-1].Seq)
		}
	}
	if got[0].Key != "task-1:phase:claimed:x" {
		t.Errorf("explicit key not kept: %q", got[0].Key)
	}
	wantKey := fmt.Sprintf("task-1:progress:%s:%d", got[1].CreatedAt.Format(TimeFormat), got[1].Seq)
	if got[1].Key != wantKey {
		t.Errorf("default key %q, want %q", got[1].Key, wantKey)
	}
}

func TestLinesAreOneJSONObjectWithAllFieldsAndCRC32C(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	mustAppend(t, o, rec("t", KindProgress, 1))
	if err := o.MarkSent(1); err != nil {
		t.Fatal(err)
	}
	o.Close()
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 { // header, record, sent mark
		t.Fatalf("want 3 lines, got %d:\n%s", len(lines), data)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, l := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line is not one JSON object: %v: %s", err, l)
		}
		i := strings.LastIndex(l, `,"crc":"`)
		want := fmt.Sprintf("%08x", crc32.Checksum([]byte(l[:i]), table))
		if string(m["crc"]) != `"`+want+`"` {
			t.Errorf("crc %s, want %s in %s", m["crc"], want, l)
		}
	}
	var r map[string]json.RawMessage
	json.Unmarshal([]byte(lines[1]), &r)
	for _, f := range []string{"seq", "key", "kind", "task_id", "attempt", "created_at", "payload", "crc"} {
		if _, ok := r[f]; !ok {
			t.Errorf("record line lacks %q: %s", f, lines[1])
		}
	}
	var created string
	json.Unmarshal(r["created_at"], &created)
	if _, err := time.Parse(time.RFC3339Nano, created); err != nil || len(created) != len("2006-01-02T15:04:05.000000000Z") {
		t.Errorf("created_at %q is not RFC 3339 with nanoseconds", created)
	}
}

func TestAppendReturnsOnlyAfterSync(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	var synced atomic.Bool
	var first sync.Once // Close syncs too, cutting the zeroed stretch
	o.sync = func(f *os.File) error {
		first.Do(func() { close(entered) })
		<-release
		err := durable.Datasync(f)
		synced.Store(true)
		return err
	}
	returned := make(chan bool) // whether the sync had finished when Append returned
	go func() {
		if _, err := o.Append(rec("t", KindLog, 0)); err != nil {
			t.Error(err)
		}
		returned <- synced.Load()
	}()
	<-entered
	// An Append that does not wait for its sync returns now: give it a
	// moment to show itself. The wait cannot fail a correct Append, however
	// slow the machine; and one that returns early is caught below too.
	select {
	case <-returned:
		close(release) // so that Close, at cleanup, finds the committer free
		t.Fatal("Append returned while its sync was held")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if !<-returned {
		t.Fatal("Append returned before its sync finished")
	}
}

// TestConcurrentAppendsShareSyncs holds each sync until every writer with
// appends left has queued its next one, the way writers pile up behind a
// slow disk, whatever the speed of this machine; the writers queued behind
// a sync must then share the next one.
func TestConcurrentAppendsShareSyncs(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{})
	const writers, each = 32, 20
	var left atomic.Int64 // writers with appends still to make
	left.Store(writers)
	o.qmu.Lock()
	firstSeq := o.nextSeq
	o.qmu.Unlock()
	o.sync = func(f *os.File) error {
		for {
			// Records given a seq and not yet acknowledged are in this
			// batch or queued behind it, one at most per writer.
			o.qmu.Lock()
			inFlight := int64(o.nextSeq-firstSeq) - int64(o.appends.Load())
			o.qmu.Unlock()
			if inFlight >= left.Load() {
				return durable.Datasync(f)
			}
			time.Sleep(100 * time.Microsecond) // polling for the writers, not timing them
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			defer left.Add(-1)
			for i := range each {
				mustAppend(t, o, rec(fmt.Sprint("w", w), KindProgress, i))
			}
		})
	}
	wg.Wait()
	st := o.Stats()
	if st.Appends != writers*each {
		t.Fatalf("appends %d, want %d", st.Appends, writers*each)
	}
	t.Logf("%d syncs for %d appends", st.Syncs, st.Appends)
	if st.Syncs*4 > st.Appends {
		t.Errorf("%d syncs for %d appends: concurrent appends are not sharing syncs", st.Syncs, st.Appends)
	}
	if got := len(pendingSeqs(t, o)); got != writers*each {
		t.Errorf("pending %d, want %d", got, writers*each)
	}
}

// readLines returns the lines of the outbox file at path, without the
// stretch the writer keeps zeroed after them while it is open.
func readLines(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(b, "\x00")
}

func TestMarksAreAppendedNeverRewritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	for i := range 5 {
		mustAppend(t, o, rec("t", KindProgress, i))
	}
	path := filepath.Join(dir, FileName)
	before := readLines(t, path)
	if err := o.MarkSent(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := o.MarkFailed("connection refused", 3); err != nil {
		t.Fatal(err)
	}
	if err := o.MarkDead("terminal", 4); err != nil {
		t.Fatal(err)
	}
	after := readLines(t, path)
	if !bytes.HasPrefix(after, before) || len(after) == len(before) {
		t.Fatalf("marks changed existing bytes or wrote nothing")
	}
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[3 5]" {
		t.Errorf("pending %v, want [3 5]", got)
	}
	o.Close()
	o = openT(t, dir, Options{})
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[3 5]" {
		t.Errorf("pending after reopen %v, want [3 5]", got)
	}
	if st := o.Stats(); st.Dead != 1 || st.Pending != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestDeadRecordsLeavePendingAndStayVisible(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	mustAppend(t, o, rec("t", KindComplete, 0))
	mustAppend(t, o, rec("t", KindProgress, 1))
	if err := o.MarkDead("terminal", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Compact(nil); err != nil {
		t.Fatal(err)
	}
	o.Close()
	snap, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Items) != 2 || snap.Items[0].State != StateDead || snap.Items[0].Reason != "terminal" {
		t.Fatalf("dead record not kept through compaction: %+v", snap.Items)
	}
	o = openT(t, dir, Options{})
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[2]" {
		t.Errorf("pending %v, want [2]", got)
	}
}

// TestTornTailIsTruncatedAtEveryByte cuts the last record at every byte and
// checks that Open keeps every earlier record and truncates the rest.
func TestTornTailIsTruncatedAtEveryByte(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	for i := range 3 {
		mustAppend(t, o, rec("t", KindProgress, i))
	}
	o.Close()
	path := filepath.Join(dir, FileName)
	full, _ := os.ReadFile(path)
	lastStart := bytes.LastIndexByte(full[:len(full)-1], '\n') + 1
	for cut := lastStart + 1; cut < len(full); cut++ {
		os.WriteFile(path, full[:cut], 0o600)
		os.Remove(filepath.Join(dir, QuarantineName))
		o, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		seqs := pendingSeqs(t, o)
		st := o.Stats()
		o.Close()
		if fmt.Sprint(seqs) != "[1 2]" {
			t.Fatalf("cut at %d: pending %v, want [1 2]", cut, seqs)
		}
		if st.TornBytes != int64(cut-lastStart) {
			t.Fatalf("cut at %d: torn bytes %d, want %d", cut, st.TornBytes, cut-lastStart)
		}
		if info, _ := os.Stat(path); info.Size() != int64(lastStart) {
			t.Fatalf("cut at %d: file is %d bytes, want it truncated to %d", cut, info.Size(), lastStart)
		}
		q, _ := os.ReadFile(filepath.Join(dir, QuarantineName))
		if !bytes.Contains(q, []byte(`"reason":"outbox: torn tail"`)) {
			t.Fatalf("cut at %d: torn bytes not kept aside: %s", cut, q)
		}
	}
}

// A run of NULs at the end of the file is the stretch the writer keeps
// zeroed ahead (or what a crash after a size update but before the data
// leaves): Open cuts it, neither counting it torn nor setting it aside,
// and appends go on where the lines end.
func TestTailOfZerosIsCutNotSetAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	mustAppend(t, o, rec("t", KindProgress, 0))
	o.Close()
	path := filepath.Join(dir, FileName)
	lines, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(lines, make([]byte, 100_000)...), 0o600); err != nil {
		t.Fatal(err)
	}
	o = openT(t, dir, Options{})
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[1]" {
		t.Fatalf("pending %v", got)
	}
	if st := o.Stats(); st.TornBytes != 0 || st.Quarantined != 0 || st.FileBytes != int64(len(lines)) {
		t.Errorf("stats %+v, want no torn bytes, nothing quarantined, %d bytes", st, len(lines))
	}
	if _, err := os.Stat(filepath.Join(dir, QuarantineName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the zeros were set aside: %v", err)
	}
	mustAppend(t, o, rec("t", KindProgress, 1))
	o.Close()
	o = openT(t, dir, Options{})
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("after append past the cut: pending %v", got)
	}
}

func TestCorruptMiddleLineIsQuarantinedOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	for i := range 4 {
		mustAppend(t, o, rec("t", KindProgress, i))
	}
	o.Close()
	path := filepath.Join(dir, FileName)
	data, _ := os.ReadFile(path)
	i := bytes.Index(data, []byte(`{"i": 1,`)) // record 2's payload
	data[i+len(`{"i": `)] ^= 0x20              // flip a bit inside it
	os.WriteFile(path, data, 0o600)
	if snap, err := Inspect(dir); err != nil || snap.Stats.Quarantined != 1 {
		t.Fatalf("Inspect does not report the corrupt line: %v %+v", err, snap)
	}

	o = openT(t, dir, Options{})
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[1 3 4]" {
		t.Fatalf("pending %v, want [1 3 4]", got)
	}
	if st := o.Stats(); st.Quarantined != 1 || st.TornBytes != 0 {
		t.Fatalf("stats %+v", st)
	}
	q, _ := os.ReadFile(filepath.Join(dir, QuarantineName))
	if n := bytes.Count(q, []byte("\n")); n != 1 || !bytes.Contains(q, []byte("crc mismatch")) {
		t.Fatalf("quarantine holds %d entries: %s", n, q)
	}
	o.Close()

	o = openT(t, dir, Options{})
	if st := o.Stats(); st.Quarantined != 0 {
		t.Errorf("reopen quarantined again: %+v", st)
	}
	q2, _ := os.ReadFile(filepath.Join(dir, QuarantineName))
	if !bytes.Equal(q, q2) {
		t.Errorf("quarantine grew on reopen")
	}
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[1 3 4]" {
		t.Fatalf("pending after reopen %v", got)
	}
	if seq := mustAppend(t, o, rec("t", KindProgress, 9)); seq != 5 {
		t.Errorf("next seq %d, want 5", seq)
	}
}

func TestOverlongLineIsSkippedWithoutBufferingIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{MaxRecordBytes: 4096})
	mustAppend(t, o, rec("t", KindProgress, 0))
	o.Close()
	path := filepath.Join(dir, FileName)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(append(bytes.Repeat([]byte("x"), 1<<20), '\n'))
	f.Close()
	o = openT(t, dir, Options{MaxRecordBytes: 4096})
	mustAppend(t, o, rec("t", KindProgress, 1))
	o.Close()
	o = openT(t, dir, Options{MaxRecordBytes: 4096})
	if got := pendingSeqs(t, o); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("pending %v", got)
	}
}

func TestCompactionKeepsLiveRecordsAttemptsAndSeq(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	var sent []uint64
	for i := range 200 {
		seq := mustAppend(t, o, rec("t", KindProgress, i))
		if i%10 != 0 {
			sent = append(sent, seq)
		}
	}
	if err := o.MarkSent(sent...); err != nil {
		t.Fatal(err)
	}
	o.MarkFailed("503 Service Unavailable", 1, 11)
	o.MarkFailed("connection refused", 11)
	o.MarkDead("terminal", 21)
	want := pendingSeqs(t, o)
	before := o.Stats()
	res, err := o.Compact(nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.BytesAfter >= res.BytesBefore/4 || res.Records != 20 {
		t.Errorf("compaction %+v: expected it to keep 20 records and shrink the file", res)
	}
	if got := pendingSeqs(t, o); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pending after compaction %v, want %v", got, want)
	}
	recs, _ := o.Pending(1, 1<<20)
	if !bytes.Contains(recs[0].Payload, []byte(`"i": 0`)) {
		t.Errorf("payload after compaction: %s", recs[0].Payload)
	}
	o.Close()

	snap, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tries map[uint64]Item = map[uint64]Item{}
	for _, it := range snap.Items {
		tries[it.Seq] = it
	}
	if tries[11].Tries != 2 || tries[11].LastError != "connection refused" || tries[1].Tries != 1 {
		t.Errorf("send attempts lost in compaction: %+v %+v", tries[1], tries[11])
	}
	if tries[21].State != StateDead || tries[21].Reason != "terminal" {
		t.Errorf("dead record lost in compaction: %+v", tries[21])
	}
	if snap.Stats.LastCompaction.IsZero() || before.LastCompaction.After(snap.Stats.LastCompaction) {
		t.Errorf("last compaction time not recorded: %v", snap.Stats.LastCompaction)
	}
	// Everything sent: compaction must still remember the next seq.
	o = openT(t, dir, Options{})
	o.MarkSent(want...)
	o.Compact(nil)
	o.Close()
	o = openT(t, dir, Options{})
	if seq := mustAppend(t, o, rec("t", KindProgress, 0)); seq != 201 {
		t.Errorf("seq after compacting everything away: %d, want 201", seq)
	}
}

// Compaction reads live lines in spans: side by side, across small gaps of
// sent lines, never more than compactSpan at once unless one line is
// larger. Every payload must come through whole and in order, whatever
// the spans, and progress must end at the total.
func TestCompactionCopiesSpansWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{MaxRecordBytes: 3 << 20})
	sizes := []int{100, 5_000, 40_000, compactSpan - 300, 2 * compactSpan, 300, compactGap + 1, 64}
	want := map[uint64]string{}
	var sent []uint64
	for i := range 400 {
		size := sizes[i%len(sizes)]
		p := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", size))
		seq := mustAppend(t, o, Record{Kind: KindLog, TaskID: "t", Payload: json.RawMessage(p)})
		// Runs of live lines, gaps of one sent line (small or large) and
		// long stretches of sent lines.
		if i%7 == 3 || i%50 >= 40 {
			sent = append(sent, seq)
		} else {
			want[seq] = p
		}
	}
	if err := o.MarkSent(sent...); err != nil {
		t.Fatal(err)
	}
	var calls [][2]int
	res, err := o.Compact(func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != len(want) {
		t.Errorf("compaction kept %d records, want %d", res.Records, len(want))
	}
	if len(calls) == 0 || calls[len(calls)-1] != [2]int{len(want), len(want)} {
		t.Errorf("progress calls %v: want the last to be %d of %d", calls, len(want), len(want))
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] <= calls[i-1][0] {
			t.Errorf("progress went back: %v", calls)
			break
		}
	}
	check := func(o *Outbox, when string) {
		recs, err := o.Pending(len(want)+1, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(want) {
			t.Fatalf("%s: %d pending, want %d", when, len(recs), len(want))
		}
		for _, r := range recs {
			if string(r.Payload) != want[r.Seq] {
				t.Fatalf("%s: seq %d reads back %d bytes, not its payload of %d", when, r.Seq, len(r.Payload), len(want[r.Seq]))
			}
		}
	}
	check(o, "after compaction")
	o.Close()
	o = openT(t, dir, Options{MaxRecordBytes: 3 << 20})
	defer o.Close()
	if st := o.Stats(); st.Quarantined != 0 {
		t.Errorf("reopened compacted file quarantined %d lines", st.Quarantined)
	}
	check(o, "reopened")
}

func TestCompactionRunsOnItsOwnWhenSentRecordsDominate(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{CompactMinBytes: 64 << 10})
	payload := json.RawMessage(`{"pad":"` + strings.Repeat("x", 900) + `"}`)
	for i := range 2000 {
		seq := mustAppend(t, o, Record{Kind: KindLog, TaskID: "t", Payload: payload})
		if i%100 != 99 { // leave one in a hundred pending
			o.MarkSent(seq)
		}
	}
	o.Close() // waits for a compaction in flight
	st := o.Stats()
	if st.Compactions == 0 {
		t.Fatalf("no automatic compaction: %+v", st)
	}
	if st.FileBytes > 256<<10 {
		t.Errorf("file is %d bytes with %d live: compaction did not keep it small", st.FileBytes, st.LiveBytes)
	}
	if st.Pending != 20 {
		t.Errorf("pending %d, want 20", st.Pending)
	}
}

func TestCompactionUnderConcurrentAppendsLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	var (
		mu      sync.Mutex
		pending = map[uint64]bool{}
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	// Each compaction waits for appends made since the last one, so that
	// every one of them runs among appends, however the goroutines are
	// scheduled.
	appended := make(chan struct{}, 1)
	writerGone := make(chan struct{})
	var gone sync.Once
	for w := range 4 {
		wg.Go(func() {
			defer gone.Do(func() { close(writerGone) })
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				seq := mustAppend(t, o, rec(fmt.Sprint("w", w), KindProgress, i))
				if i%3 == 0 {
					mu.Lock()
					pending[seq] = true
					mu.Unlock()
				} else if err := o.MarkSent(seq); err != nil {
					t.Error(err)
				}
				select {
				case appended <- struct{}{}:
				default:
				}
			}
		})
	}
	for range 20 {
		for range 8 {
			select {
			case <-appended:
			case <-writerGone:
				t.Fatal("a writer stopped before the compactions were done")
			}
		}
		if _, err := o.Compact(nil); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	check := func(o *Outbox) {
		recs, err := o.Pending(1<<30, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(pending) {
			t.Fatalf("pending %d, want %d", len(recs), len(pending))
		}
		for _, r := range recs {
			if !pending[r.Seq] {
				t.Fatalf("seq %d pending but was sent", r.Seq)
			}
		}
	}
	check(o)
	o.Close()
	check(openT(t, dir, Options{}))
}

func TestFullOutboxRefusesLogsFirstAndSaysHowMany(t *testing.T) {
	o := openT(t, t.TempDir(), Options{MaxBytes: 8 << 10})
	var err error
	logs := 0
	for ; err == nil; logs++ {
		_, err = o.Append(rec("t", KindLog, logs))
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("Append: %v, want ErrFull", err)
	}
	for i := range 3 {
		if _, err := o.Append(rec("t", KindLog, i)); !errors.Is(err, ErrFull) {
			t.Fatalf("log append while full: %v", err)
		}
	}
	// A refused record's draft goes back for reuse: a refusal costs its
	// index entry, not a new line buffer each time.
	refused := rec("t", KindLog, 0)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := o.Append(refused); !errors.Is(err, ErrFull) {
			t.Fatalf("log append while full: %v", err)
		}
	})
	if allocs > 1 && !raceEnabled {
		t.Errorf("a refused append makes %.0f allocations, want at most 1 (its index entry)", allocs)
	}
	for _, k := range []Kind{KindProgress, KindAttempt, KindComplete, KindPhase} {
		for i := range 10 {
			mustAppend(t, o, rec("t", k, i)) // never refused, past the limit too
		}
	}
	if st := o.Stats(); st.DroppedLogs != 4+51 || st.FileBytes <= 8<<10 {
		t.Errorf("stats %+v", st)
	}
	recs, _ := o.Pending(1<<20, 1<<30)
	var marker *Record
	for i, r := range recs {
		if r.Kind == KindLog && bytes.Contains(r.Payload, []byte(`"dropped":55`)) {
			marker = &recs[i]
			if next := recs[i+1]; next.Kind != KindProgress {
				t.Errorf("marker is not right before the next record of the task: %+v", next)
			}
		}
	}
	if marker == nil {
		t.Fatal("no marker record announces the dropped log records")
	}
}

func TestOneWriterPerDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	mustAppend(t, o, rec("t", KindProgress, 0))
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), filepath.Join(dir, LockName)) {
		t.Fatalf("second Open: %v, want ErrLocked naming the lock file", err)
	}
	snap, err := Inspect(dir)
	if err != nil || snap.Stats.Pending != 1 {
		t.Fatalf("Inspect while locked: %v %+v", err, snap)
	}
	o.Close()
	o2 := openT(t, dir, Options{})
	if got := pendingSeqs(t, o2); len(got) != 1 {
		t.Errorf("pending %v", got)
	}
}

func TestFilesAndDirectoriesArePrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "outbox")
	o := openT(t, dir, Options{})
	mustAppend(t, o, rec("t", KindProgress, 0))
	o.Close()
	os.WriteFile(filepath.Join(dir, FileName), []byte("garbage\n"), 0o600)
	openT(t, dir, Options{}).Close()
	for _, p := range []string{dir, filepath.Join(dir, FileName), filepath.Join(dir, QuarantineName), filepath.Join(dir, LockName)} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if info.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, info.Mode().Perm(), want)
		}
	}
}

func TestAppendRejectsBadRecords(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{MaxRecordBytes: 1024})
	cases := map[string]Record{
		"malformed kind": {Kind: "Chat!", TaskID: "t", Payload: json.RawMessage(`{}`)},
		"no task":        {Kind: KindLog, Payload: json.RawMessage(`{}`)},
		"not json":       {Kind: KindLog, TaskID: "t", Payload: json.RawMessage(`{oops`)},
		"no payload":     {Kind: KindLog, TaskID: "t"},
		"too large":      {Kind: KindLog, TaskID: "t", Payload: json.RawMessage(`"` + strings.Repeat("a", 2000) + `"`)},
	}
	for name, r := range cases {
		if _, err := o.Append(r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if st := o.Stats(); st.Pending != 0 {
		t.Errorf("bad records were written: %+v", st)
	}
}

func TestAfterCloseEverythingFails(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{})
	o.Close()
	if _, err := o.Append(rec("t", KindLog, 0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if err := o.MarkSent(1); !errors.Is(err, ErrClosed) {
		t.Errorf("MarkSent after Close: %v", err)
	}
	if _, err := o.Compact(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Compact after Close: %v", err)
	}
}

// Close in the middle of concurrent appends and marks: each call either
// fails with ErrClosed or was written, and every record acknowledged is in
// the file when it is opened again. A leader passes the lead on before it
// answers its batch, so Close can return while answers are still on their
// way; none may be lost or hang.
func TestCloseDuringConcurrentAppends(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		dir := t.TempDir()
		o := openT(t, dir, Options{})
		var (
			mu     sync.Mutex
			acked  = map[uint64]bool{}
			wg     sync.WaitGroup
			enough = make(chan struct{}) // closed once 50*(round+1) appends are acknowledged
			gone   = make(chan struct{}) // closed once every writer has stopped
		)
		for w := range 16 {
			wg.Go(func() {
				for i := 0; ; i++ {
					seq, err := o.Append(rec(fmt.Sprint("t", w), KindProgress, i))
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("append: %v", err)
						return
					}
					mu.Lock()
					acked[seq] = true
					if len(acked) == 50*(round+1) {
						close(enough)
					}
					mu.Unlock()
					if i%5 == 4 {
						if err := o.MarkFailed("503", seq); err != nil && !errors.Is(err, ErrClosed) {
							t.Errorf("mark: %v", err)
						}
					}
				}
			})
		}
		go func() { wg.Wait(); close(gone) }()
		select {
		case <-enough:
		case <-gone:
			t.Fatal("every writer stopped before Close")
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		<-gone
		o = openT(t, dir, Options{})
		got := map[uint64]bool{}
		for _, seq := range pendingSeqs(t, o) {
			got[seq] = true
		}
		o.Close()
		for seq := range acked {
			if !got[seq] {
				t.Fatalf("round %d: seq %d was acknowledged before Close and is not in the file (%d acknowledged, %d in the file)", round, seq, len(acked), len(got))
			}
		}
	}
}

func TestTailerFollowsAcrossCompaction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	mustAppend(t, o, rec("t", KindProgress, 0))
	tl, err := NewTailer(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	next := func() []uint64 {
		var s []uint64
		if err := tl.Next(func(r Record) { s = append(s, r.Seq) }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := next(); fmt.Sprint(got) != "[1]" {
		t.Fatalf("first read %v", got)
	}
	mustAppend(t, o, rec("t", KindProgress, 1))
	mustAppend(t, o, rec("t", KindProgress, 2))
	if got := next(); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("second read %v", got)
	}
	o.MarkSent(1)
	o.Compact(nil)
	mustAppend(t, o, rec("t", KindProgress, 3))
	if got := next(); fmt.Sprint(got) != "[4]" {
		t.Fatalf("read after compaction %v, want only the new record", got)
	}
}

func TestInspectExplainsAMissingOutbox(t *testing.T) {
	t.Parallel()
	_, err := Inspect(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, ErrNoOutbox) || !strings.Contains(err.Error(), "no such directory") {
		t.Errorf("Inspect of a missing directory: %v", err)
	}
	_, err = Inspect(t.TempDir())
	if !errors.Is(err, ErrNoOutbox) {
		t.Errorf("Inspect of an empty directory: %v", err)
	}
}

// TestPayloadKeptAsGivenUnlessItBreaksTheLine: a payload is validated, not
// rewritten; only one with a newline or carriage return between tokens is
// compacted, so that every record stays one line.
func TestPayloadKeptAsGivenUnlessItBreaksTheLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"compact", `{"a":1,"b":[true,null]}`, `{"a":1,"b":[true,null]}`},
		{"spaces kept", `{ "a": 1, "b": "x y" }`, `{ "a": 1, "b": "x y" }`},
		{"newline compacted", "{\n  \"a\": 1,\n  \"b\": \"x\\ny\"\n}", `{"a":1,"b":"x\ny"}`},
		{"carriage return compacted", "{\"a\":\r\n1}", `{"a":1}`},
		{"scalar", `"text"`, `"text"`},
		{"space around trimmed", " \t{\"a\": 1} ", `{"a": 1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			o := openT(t, dir, Options{})
			seq := mustAppend(t, o, Record{Kind: KindLog, TaskID: "t", Payload: json.RawMessage(c.in)})
			o.Close()
			data, err := os.ReadFile(filepath.Join(dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(data, []byte{'\n'}); n != 2 {
				t.Fatalf("file has %d lines, want 2 (header and record):\n%s", n, data)
			}
			o = openT(t, dir, Options{})
			defer o.Close()
			recs, err := o.Pending(10, 1<<20)
			if err != nil || len(recs) != 1 || recs[0].Seq != seq {
				t.Fatalf("Pending: %v %+v", err, recs)
			}
			if string(recs[0].Payload) != c.want {
				t.Errorf("payload %q, want %q", recs[0].Payload, c.want)
			}
		})
	}
	for _, bad := range []string{"", "{", `{"a":1}x`, "{\"a\":\"x\ny\"}"} {
		o := openT(t, t.TempDir(), Options{})
		if _, err := o.Append(Record{Kind: KindLog, TaskID: "t", Payload: json.RawMessage(bad)}); !errors.Is(err, ErrInvalid) {
			t.Errorf("payload %q: err %v, want ErrInvalid", bad, err)
		}
		o.Close()
	}
}

// The key Append makes is taskID:kind:createdAt:seq whatever the task id
// holds and whether or not the payload had to be compacted, in the line
// and after a reopen.
func TestGeneratedKeyWithOddTaskIDAndCompactedPayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := openT(t, dir, Options{})
	at := time.Date(2026, 11, 23, 10, 4, 5, 6, time.UTC)
	ids := []string{"t-1", `t "<é>" \ x`, "t\x01\u2028"}
	for _, id := range ids {
		if _, err := o.Append(Record{Kind: KindProgress, TaskID: id, CreatedAt: at, Payload: json.RawMessage("{\n  \"a\": [1,\r\n 2]\n}\n")}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(o *Outbox) {
		t.Helper()
		got, err := o.Pending(10, 1<<20)
		if err != nil || len(got) != len(ids) {
			t.Fatalf("pending %d, %v", len(got), err)
		}
		for i, r := range got {
			want := fmt.Sprintf("%s:progress:%s:%d", ids[i], at.Format(TimeFormat), r.Seq)
			if r.Key != want || string(r.Payload) != `{"a":[1,2]}` {
				t.Errorf("record %d: key %q payload %s, want key %q", i, r.Key, r.Payload, want)
			}
		}
	}
	check(o)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o = openT(t, dir, Options{})
	check(o)
}

func TestAppendRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	o := openT(t, t.TempDir(), Options{})
	for _, r := range []Record{
		{Kind: KindProgress, TaskID: "t\xff", Payload: json.RawMessage(`{}`)},
		{Kind: KindProgress, TaskID: "t", Key: "k\xff", Payload: json.RawMessage(`{}`)},
	} {
		if _, err := o.Append(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Append(task %q, key %q) = %v, want ErrInvalid", r.TaskID, r.Key, err)
		}
	}
}
