package outbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const crashChildEnv = "OUTBOX_CRASH_CHILD_DIR"

// crashPayload is what writer w puts in its i-th record; the parent checks
// every record it finds against it, so nothing can be invented unnoticed.
func crashPayload(w, i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d,"pad":%q}`, w, i, strings.Repeat(strconv.Itoa(i%10), 50+(w*37+i*11)%400)))
}

// crashChild appends from several goroutines until it is killed, printing
// "a SEQ W I" once an append returned, and "s SEQ" before it marks a record
// sent (after the mark, the record may rightly be gone). Marking most
// records sent gives compaction work; a compactor goroutine compacts again
// and again, printing "c" as it copies records and "C" when a compaction
// is over, so that the parent can kill it in the middle of one.
func crashChild(dir string) {
	o, err := Open(dir, Options{CompactMinBytes: 8 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format, args...)
		out.Flush()
		mu.Unlock()
	}
	base := rand.IntN(1 << 20)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := base; ; i++ {
				seq, err := o.Append(Record{Kind: KindProgress, TaskID: "crash", Attempt: w, Payload: crashPayload(w, i)})
				if err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
					os.Exit(4)
				}
				report("a %d %d %d\n", seq, w, i)
				if i%4 != 0 {
					report("s %d\n", seq)
					if err := o.MarkSent(seq); err != nil {
						os.Exit(5)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for {
			if _, err := o.Compact(func(done, total int) { report("c %d %d\n", done, total) }); err != nil {
				fmt.Fprintln(os.Stderr, "child: compact:", err)
				os.Exit(6)
			}
			report("C\n")
		}
	})
	wg.Wait()
}

// crashKills is how many times the crash test kills its child: 50 by
// default, more with OUTBOX_CRASH_KILLS (make crash uses 1000).
func crashKills() int {
	if n, err := strconv.Atoi(os.Getenv("OUTBOX_CRASH_KILLS")); err == nil && n > 0 {
		return n
	}
	return 50
}

// childSilence is how long a crash child may go without a line before the
// test calls it hung: minutes, far beyond any slow machine's pause.
const childSilence = 2 * time.Minute

// The kill moments are drawn from the child's own progress, never from the
// clock: half the kills come after a random number of acknowledged
// appends, half in the middle of a compaction the child reports, however
// fast or slow the machine (a race-built child starts slowly).
func TestCrashAtRandomMomentsLosesNoAcknowledgedRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kills := crashKills()
	acked := map[uint64][2]int{} // seq → writer, index; acknowledged and not known sent
	totalAcked := 0
	inAppends, inCompactions := 0, 0
	cutCompactions := 0 // kills that left a compaction's temporary file behind
	start := time.Now()
	for k := range kills {
		c := crashChildRun{k: k, duringCompaction: k%2 == 1, appendsBefore: 1 + rand.IntN(200)}
		reported := c.run(t, dir, acked, &totalAcked)
		// Only a compaction cut short leaves its temporary file (the next
		// Open removes it): the disk's word that the child died in one.
		left, _ := filepath.Glob(filepath.Join(dir, compactPattern))
		if len(left) > 0 {
			cutCompactions++
		}
		switch {
		case !c.duringCompaction:
			inAppends++
		case reported || len(left) > 0:
			inCompactions++
		}
		verifyAfterCrash(t, dir, acked, k)
	}
	snap, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("survived %d SIGKILLs in %v (%d among appends, %d in compactions, %d leaving a compaction file); %d appends acknowledged, %d still pending",
		kills, time.Since(start).Round(time.Millisecond), inAppends, inCompactions, cutCompactions, totalAcked, len(acked))
	if snap.Stats.LastCompaction.IsZero() {
		t.Errorf("the children never compacted: kills did not reach compaction")
	}
	if inAppends == 0 || inCompactions == 0 {
		t.Errorf("kills among appends %d, in compactions %d: both must happen", inAppends, inCompactions)
	}
	if totalAcked < kills {
		t.Errorf("only %d appends acknowledged over %d kills: the test is not exercising the outbox", totalAcked, kills)
	}
}

// crashChildRun is one crash child's life and the moment of its death.
type crashChildRun struct {
	k                int  // which kill this is
	duringCompaction bool // kill at a compaction report rather than at an append
	appendsBefore    int  // acknowledged appends before the kill, or before looking for a compaction
}

// run starts a crash child on dir, records what it acknowledges, kills it
// at the moment its reports call for, and waits for it. It reports whether
// the child died inside a compaction it had reported begun and not over.
func (c crashChildRun) run(t *testing.T, dir string, acked map[uint64][2]int, totalAcked *int) (compacting bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// stop ends the child and its reader at once; Wait comes after the
	// last read of the pipe, and before stderr, which Wait finishes, is read.
	stop := func() {
		cmd.Process.Kill()
		for range lines {
		}
		cmd.Wait()
	}
	defer func() {
		if cmd.ProcessState == nil { // a check failed: the child and its reader do not outlive the test
			stop()
		}
	}()
	// A guard against a child that hangs, not a time limit: every line
	// resets it, so a slow child is never cut short.
	hang := time.NewTimer(childSilence)
	defer hang.Stop()
	seen, killed := 0, false
	kill := func() {
		cmd.Process.Signal(syscall.SIGKILL)
		killed = true
	}
	for open := true; open; {
		var l string
		select {
		case l, open = <-lines:
		case <-hang.C:
			stop()
			t.Fatalf("kill %d: the child said nothing for %v\n%s", c.k, childSilence, stderr.String())
		}
		if !open {
			break
		}
		hang.Reset(childSilence)
		switch l[0] {
		case 'c':
			compacting = true
			if !killed && c.duringCompaction && seen >= c.appendsBefore {
				kill()
			}
			continue
		case 'C':
			compacting = false
			continue
		}
		record(t, l, acked, totalAcked)
		if l[0] == 'a' {
			seen++
			if !killed && !c.duringCompaction && seen >= c.appendsBefore {
				kill()
			}
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("kill %d: child was not killed: %v\n%s", c.k, err, stderr.String())
	}
	return compacting
}

func record(t *testing.T, l string, acked map[uint64][2]int, total *int) {
	f := strings.Fields(l)
	seq, _ := strconv.ParseUint(f[1], 10, 64)
	switch f[0] {
	case "a":
		w, _ := strconv.Atoi(f[2])
		i, _ := strconv.Atoi(f[3])
		acked[seq] = [2]int{w, i}
		*total++
	case "s":
		delete(acked, seq)
	default:
		t.Fatalf("child said %q", l)
	}
}

// verifyAfterCrash reopens the outbox as the next start would and checks
// that every acknowledged, unsent record is there, intact and in order, and
// that every record there is one the child wrote.
func verifyAfterCrash(t *testing.T, dir string, acked map[uint64][2]int, k int) {
	t.Helper()
	o, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("kill %d: reopen: %v", k, err)
	}
	defer o.Close()
	if st := o.Stats(); st.Quarantined != 0 {
		t.Fatalf("kill %d: a crash corrupted the middle of the file: %+v", k, st)
	}
	recs, err := o.Pending(1<<30, 1<<40)
	if err != nil {
		t.Fatalf("kill %d: %v", k, err)
	}
	found := make(map[uint64]bool, len(recs))
	var last uint64
	for _, r := range recs {
		if r.Seq <= last {
			t.Fatalf("kill %d: seq %d after %d", k, r.Seq, last)
		}
		last = r.Seq
		var p struct{ W, I int }
		if err := json.Unmarshal(r.Payload, &p); err != nil || string(r.Payload) != string(crashPayload(p.W, p.I)) || r.Attempt != p.W {
			t.Fatalf("kill %d: seq %d is not a record the child wrote: %s", k, r.Seq, r.Payload)
		}
		if want, ok := acked[r.Seq]; ok && want != [2]int{p.W, p.I} {
			t.Fatalf("kill %d: seq %d holds writer %d #%d, the child acknowledged %v", k, r.Seq, p.W, p.I, want)
		}
		found[r.Seq] = true
	}
	for seq := range acked {
		if !found[seq] {
			t.Fatalf("kill %d: acknowledged seq %d is lost", k, seq)
		}
	}
	// Records found but not acknowledged were written before the kill cut
	// the report short (or their sent mark was lost): allowed, and done
	// with. Of the acknowledged ones, send half, so that some pending
	// records live on across kills and compactions.
	var done []uint64
	for _, r := range recs {
		if _, ok := acked[r.Seq]; !ok || rand.IntN(2) == 0 {
			done = append(done, r.Seq)
			delete(acked, r.Seq)
		}
	}
	if err := o.MarkSent(done...); err != nil {
		t.Fatalf("kill %d: %v", k, err)
	}
}
