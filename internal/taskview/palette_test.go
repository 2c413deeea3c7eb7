package taskview

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

// TestTheTaskTableIsColouredByPhaseAndStaysAligned: with colour, each
// phase has its colour, and without the colours the table is the plain
// one, column for column.
func TestTheTaskTableIsColouredByPhaseAndStaysAligned(t *testing.T) {
	t.Parallel()
	tasks := colourTasks(t)
	now := tasks[0].CreatedAt.Add(time.Minute)
	var plain, coloured bytes.Buffer
	must(t, Table(&plain, Palette{}, tasks, now))
	must(t, Table(&coloured, Palette{On: true}, tasks, now))
	if sgr.MatchString(plain.String()) {
		t.Fatalf("colour with the palette off:\n%q", plain.String())
	}
	if got := sgr.ReplaceAllString(coloured.String(), ""); got != plain.String() {
		t.Errorf("the coloured table is not the plain one with colours:\n%s\nwant\n%s", got, plain.String())
	}
	for _, want := range []string{
		ColourGreen + "completed" + ColourOff,
		ColourRed + "failed" + ColourOff,
		ColourYellow + "recoverable_failed" + ColourOff,
		ColourCyan + "turn_started" + ColourOff,
	} {
		if !strings.Contains(coloured.String(), want) {
			t.Errorf("the table lacks %q:\n%q", want, coloured.String())
		}
	}
}

// TestShowColoursThePhaseTheCardAndTheTimeline: a completed task is green
// in show, its card's steps by status, and a blocked attempt's timeline
// line yellow, a permanent failure's red.
func TestShowColoursThePhaseTheCardAndTheTimeline(t *testing.T) {
	t.Parallel()
	tasks := colourTasks(t)
	now := tasks[0].CreatedAt.Add(time.Minute)
	show := func(task *state.Task) string {
		var b bytes.Buffer
		Show(&b, Palette{On: true}, testHint{}, task, now)
		return b.String()
	}
	cases := []struct {
		task *state.Task
		want []string
	}{
		{tasks[0], []string{"phase:    " + ColourGreen + "completed" + ColourOff, ColourGreen + "[x] Claimed" + ColourOff,
			ColourPlain + "[-] Waiting for reply" + ColourOff, ColourGreen + "Attempt 1  completed"}},
		{tasks[1], []string{ColourRed + "failed" + ColourOff, ColourRed + "[!] Working" + ColourOff, ColourRed + "Attempt 1  failed"}},
		{tasks[2], []string{ColourYellow + "recoverable_failed" + ColourOff, ColourYellow + "Attempt 1  failed"}},
		{tasks[3], []string{ColourCyan + "turn_started" + ColourOff, ColourCyan + "[>] Working" + ColourOff, ColourCyan + "Attempt 1  running"}},
	}
	for _, c := range cases {
		got := show(c.task)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: show lacks %q:\n%q", c.task.ID, w, got)
			}
		}
	}
}

// TestTheBoardCountsTheQueueOnlyWhereItSeesIt: the control plane's board
// counts the queued tasks; a data directory's says the queue is not
// there rather than count none.
func TestTheBoardCountsTheQueueOnlyWhereItSeesIt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	queued := []*state.Task{state.NewTask("t-q1", "p", now), state.NewTask("t-q2", "p", now)}
	remote := NewBoard(queued, 5)
	remote.QueueKnown = true
	if got := strings.Join(remote.Render("http://cp", "", Palette{}, testHint{}, now, 120, 40), "\n"); !strings.Contains(got, "2 queued") {
		t.Errorf("the control plane's board does not count its queue:\n%s", got)
	}
	local := strings.Join(NewBoard(nil, 5).Render("/data", "", Palette{}, testHint{}, now, 120, 40), "\n")
	if regexp.MustCompile(`\d+ queued`).MatchString(local) {
		t.Errorf("the local board counts a queue it cannot see:\n%s", local)
	}
	if !strings.Contains(local, "the queue is the control plane's") {
		t.Errorf("the local board does not say where the queue is:\n%s", local)
	}
}

// Moved from cmd/agent's TestThePaletteIsOffForAFileAndWithNoColor:
// output to a file or a buffer is never coloured, whatever NO_COLOR says.
// (A terminal's case, and NO_COLOR on one, are cmd/agent's
// TestTasksLsOnATerminal's.)
func TestPaletteForAFile(t *testing.T) {
	var b strings.Builder
	if PaletteFor(&b).On {
		t.Error("a buffer is coloured")
	}
	t.Setenv("NO_COLOR", "")
	f, err := os.CreateTemp(t.TempDir(), "out")
	must(t, err)
	defer f.Close()
	if PaletteFor(f).On {
		t.Error("a file is coloured")
	}
}
