package taskview

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/state"
)

// TestTheBoardSortsTasksIntoSections: running, retry scheduled, queued
// and the last ended first, as many as asked.
func TestTheBoardSortsTasksIntoSections(t *testing.T) {
	t.Parallel()
	tasks := colourTasks(t)
	now := tasks[0].CreatedAt.Add(time.Minute)
	tasks[0].UpdatedAt, tasks[1].UpdatedAt, tasks[2].UpdatedAt = now.Add(-3*time.Second), now.Add(-time.Second), now.Add(-2*time.Second)
	queued := state.NewTask("t-q", "p", now)
	b := NewBoard(append(tasks, queued), 2)
	ids := func(ts []*state.Task) string {
		var s []string
		for _, t := range ts {
			s = append(s, t.ID)
		}
		return strings.Join(s, ",")
	}
	if ids(b.Running) != "t-running" || ids(b.Queued) != "t-q" || len(b.Retrying) != 0 {
		t.Errorf("running %s, queued %s, retrying %s", ids(b.Running), ids(b.Queued), ids(b.Retrying))
	}
	if ids(b.Ended) != "t-failed,t-blocked" || b.EndedAll != 3 {
		t.Errorf("ended %s of %d, want the last two of 3", ids(b.Ended), b.EndedAll)
	}
	if b.Unended() != 2 {
		t.Errorf("unended %d, want 2", b.Unended())
	}
}

// TestTheBoardRendersWhatAPersonMayDo: a stop a person decides on says
// the command that retries it, whole, wrapped for a narrow terminal; the
// lines fit the width and the board the height, saying what did not fit.
func TestTheBoardRendersWhatAPersonMayDo(t *testing.T) {
	t.Parallel()
	tasks := colourTasks(t)
	now := tasks[0].CreatedAt.Add(time.Minute)
	b := NewBoard(tasks, 5)
	wide := strings.Join(b.Render("/data", "", Palette{}, testHint{placeholders: "(with URL the control plane's address)"}, now, 200, 100), "\n")
	for _, want := range []string{"1 running · 0 retry scheduled · 3 ended", "Running", "Ended", "[>] Working",
		"    a person decides: agent tasks retry t-blocked --control-plane http://cp", "(with URL the control plane's address)"} {
		if !strings.Contains(wide, want) {
			t.Errorf("the board lacks %q:\n%s", want, wide)
		}
	}
	narrow := b.Render("/data", "read failed", Palette{On: true}, testHint{}, now, 30, 100)
	for i, l := range narrow {
		if n := len([]rune(sgr.ReplaceAllString(l, ""))); n > 30 && !strings.HasPrefix(strings.TrimSpace(l), "agent") && !strings.HasPrefix(strings.TrimSpace(l), "--") {
			t.Errorf("line %d is %d columns on a 30-column terminal: %q", i, n, l)
		}
	}
	joined := strings.Join(narrow, "\n")
	_, cmd, ok := strings.Cut(joined, "    a person decides:\n")
	if !ok || strings.Join(strings.Fields(strings.ReplaceAll(cmd, "\\", "")), " ") != "agent tasks retry t-blocked --control-plane http://cp" {
		t.Errorf("the retry command is not wrapped whole:\n%s", joined)
	}
	short := b.Render("/data", "", Palette{}, testHint{}, now, 200, 6)
	if len(short) != 6 || !strings.HasPrefix(short[5], "… ") || !strings.Contains(short[5], "more lines") {
		t.Errorf("a board of 6 lines:\n%s", strings.Join(short, "\n"))
	}
}

func TestWrapCommandKeepsACommandWhole(t *testing.T) {
	t.Parallel()
	if got := wrapCommand("run:", "agent tasks retry t-1", "  ", 80); len(got) != 1 || got[0] != "run: agent tasks retry t-1" {
		t.Errorf("a command that fits: %q", got)
	}
	got := wrapCommand("run:", "agent tasks retry t-1 --control-plane http://127.0.0.1:8080", "  ", 24)
	if strings.Join(strings.Fields(strings.ReplaceAll(strings.Join(got[1:], " "), "\\", "")), " ") != "agent tasks retry t-1 --control-plane http://127.0.0.1:8080" {
		t.Errorf("the wrapped command is not the command:\n%s", strings.Join(got, "\n"))
	}
	for _, l := range got[1 : len(got)-1] {
		if !strings.HasSuffix(l, " \\") {
			t.Errorf("a continued line does not end in \\: %q", l)
		}
	}
}

func TestCountdownAndFitWidth(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{0: "now", -time.Second: "now", 2300 * time.Millisecond: "in 3s", time.Minute: "in 1m00s"} {
		if got := countdown(d); got != want {
			t.Errorf("countdown(%s) = %q, want %q", d, got, want)
		}
	}
	coloured := Palette{On: true}.Phase(state.PhaseCompleted)
	if got := fitWidth(coloured, 9); got != coloured {
		t.Errorf("a coloured word that fits was cut: %q", got)
	}
	if got := fitWidth(coloured, 5); got != "comp…" {
		t.Errorf("cut to 5: %q", got)
	}
}
