package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// bounds is an outputBounds of cap own on a disk of size bytes with free
// bytes free, as *free says at each look.
func bounds(own int64, size int64, free *int64) *outputBounds {
	b := newOutputBounds(own, "/data", slog.New(slog.DiscardHandler))
	b.free = func(string) int64 { return *free }
	b.size = func(string) int64 { return size }
	return b
}

// batch is n lines of width bytes, named by prefix.
func batch(prefix string, n, width int) state.LogEvent {
	l := state.LogEvent{Stream: state.LogStdout}
	for i := range n {
		s := fmt.Sprintf("%s %d ", prefix, i)
		l.Lines = append(l.Lines, s+strings.Repeat("x", max(width-len(s), 0)))
	}
	return l
}

func payloadBytes(t *testing.T, v any) int64 {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b))
}

// An attempt's log records go into the outbox up to the cap: the record
// that would pass it keeps the lines that fit and says what it withheld;
// after it, lines are counted, and said once before the task's next
// record that is not a log. Each attempt has a cap of its own; the
// smaller of the agent's own and the control plane's, once it says it, holds.
func TestTheOutputCapCutsAnAttemptAndCountsTheRest(t *testing.T) {
	t.Parallel()
	free := int64(1 << 30)
	b := bounds(10_000, 1<<30, &free)
	var put, kept, printed int64
	var cut *api.OutputCut
	for i := range 10 {
		l := batch(fmt.Sprintf("b%d", i), 20, 100) // 2 KB each
		printed += int64(len(l.Lines))
		out, w, ok := b.admitLog("t-1", 1, l)
		if !ok {
			if cut == nil {
				t.Fatalf("batch %d refused before the cap cut", i)
			}
			continue
		}
		if cut != nil {
			t.Fatalf("batch %d written after the cap cut", i)
		}
		put += payloadBytes(t, out)
		kept += int64(len(out.Lines))
		if w != nil {
			cut = w
			if w.CapBytes != 10_000 || w.Lines != int64(len(l.Lines)-len(out.Lines)) || len(out.Lines) == 0 {
				t.Errorf("the record that cut: %d lines kept, %+v", len(out.Lines), w)
			}
		}
	}
	if cut == nil || put > 10_000 || put < 10_000-200 {
		t.Fatalf("%d bytes of payload put in the outbox, the cap 10000; cut %+v", put, cut)
	}
	if n := b.notes("t-1", 1, false); len(n) != 0 {
		t.Errorf("notes before a log record: %+v", n)
	}
	n := b.notes("t-1", 1, true)
	if len(n) != 1 {
		t.Fatalf("notes before the attempt's end: %+v, want what it withheld", n)
	}
	w := n[0].payload.(api.LogPayload).Withheld
	if kept+cut.Lines+w.Lines != printed || n[0].attempt != 1 || w.CapBytes != 10_000 {
		t.Errorf("kept %d lines, withheld %d then %d (%+v): printed %d", kept, cut.Lines, w.Lines, w, printed)
	}
	if n := b.notes("t-1", 1, true); len(n) != 0 {
		t.Errorf("the withheld counts said twice: %+v", n)
	}
	b.attemptEnded("t-1", 1)

	// Attempt 2 has a cap of its own: the smaller of the agent's own and
	// the control plane's, once it says one (not under 64 KiB).
	b.own = 1 << 20
	b.told.Store(100_000)
	var w2 *api.OutputCut
	for i := 0; w2 == nil && i < 100; i++ {
		_, w2, _ = b.admitLog("t-1", 2, batch(fmt.Sprintf("a2-%d", i), 20, 100))
	}
	if w2 == nil || w2.CapBytes != 100_000 {
		t.Errorf("attempt 2 cut at %+v, want the control plane's cap of 100000", w2)
	}
	if b.told.Store(1000); b.limit() != 64<<10 {
		t.Errorf("a control plane's cap of 1000 bytes: %d, want the least, 64 KiB", b.limit())
	}
	if b.told.Store(8 << 20); b.limit() != 1<<20 {
		t.Errorf("a control plane's cap of 8 MiB over the agent's 1 MiB: %d, want the agent's", b.limit())
	}
	// Progress has a cap of its own, the same size: a task that floods
	// progress reports fills no more of the outbox than one that prints.
	b.own = 10_000
	b.told.Store(0)
	admitted := 0
	for range 200 {
		if b.admitProgress("t-1", 3, 100) {
			admitted++
		}
	}
	if admitted != 100 {
		t.Errorf("%d progress records of 100 bytes admitted under a 10000-byte cap, want 100", admitted)
	}
	if _, _, ok := b.admitLog("t-1", 3, batch("after-progress", 1, 10)); !ok {
		t.Errorf("the attempt's log output was cut by its progress")
	}
	b.taskEnded("t-1")
	if len(b.attempts) != 0 {
		t.Errorf("accounts kept after the task ended: %v", b.attempts)
	}
}

// Under the disk floor, log and progress records are refused and their
// lines counted; when space returns, the task's next record is preceded by
// one line saying how much was dropped. Before a completion, the line is
// written under the floor too: it is the task's story.
func TestUnderTheDiskFloorOutputWaitsAndIsSaid(t *testing.T) {
	t.Parallel()
	if got := diskFloor(24 << 20); got != minDiskFloor {
		t.Errorf("the floor of 24 MiB: %d", got)
	}
	if got := diskFloor(512 << 20); got != 32<<20 {
		t.Errorf("the floor of 512 MiB: %d", got)
	}
	if got := diskFloor(1 << 40); got != maxDiskFloor {
		t.Errorf("the floor of 1 TiB: %d", got)
	}
	free := int64(1 << 20) // under the 2 MiB floor of a 24 MiB disk
	b := bounds(DefaultMaxAttemptOutput, 24<<20, &free)
	if _, _, ok := b.admitLog("t-1", 1, batch("low", 30, 50)); ok {
		t.Errorf("a log record was admitted under the floor")
	}
	if b.admitProgress("t-1", 1, 100) {
		t.Errorf("a progress record was admitted under the floor")
	}
	free = 8 << 20
	if !b.admitProgress("t-1", 1, 100) {
		t.Errorf("a progress record was refused above the floor")
	}
	out, _, ok := b.admitLog("t-1", 1, batch("back", 2, 50))
	if !ok || len(out.Lines) != 2 {
		t.Fatalf("a log record above the floor: %v %+v", ok, out)
	}
	n := b.notes("t-1", 1, false)
	if len(n) != 1 || !strings.Contains(n[0].payload.(state.LogEvent).Lines[0], "30 line(s) of output") {
		t.Errorf("the note before the next record: %+v", n)
	}
	if n := b.notes("t-1", 1, true); len(n) != 0 {
		t.Errorf("said twice: %+v", n)
	}

	free = 1 << 20
	b.admitLog("t-2", 1, batch("low", 5, 50))
	if n := b.notes("t-2", 1, true); len(n) != 1 || !strings.Contains(n[0].payload.(state.LogEvent).Lines[0], "5 line(s)") {
		t.Errorf("the note before a completion under the floor: %+v", n)
	}

	free = -1 // cannot be told: nothing refused for it
	if _, _, ok := b.admitLog("t-3", 1, batch("x", 1, 10)); !ok {
		t.Errorf("a log record refused where the free space cannot be told")
	}
}
