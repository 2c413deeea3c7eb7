package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// logEvents makes n log events of attempt, each of lines lines of width
// bytes, keyed prefix-i.
func logEvents(c api.Claimed, attempt int, prefix string, n, lines, width int) (evs []api.Event, sentLines, sentBytes int64) {
	for i := range n {
		l := make([]string, lines)
		for j := range l {
			s := fmt.Sprintf("%s event %d line %d ", prefix, i, j)
			l[j] = s + strings.Repeat("x", max(width-len(s), 0))
			sentLines, sentBytes = sentLines+1, sentBytes+int64(len(l[j]))
		}
		e := ev(fmt.Sprintf("%s-%d", prefix, i), state.EventLog, c, state.LogEvent{Stream: "stdout", Lines: l})
		e.Attempt = attempt
		evs = append(evs, e)
	}
	return evs, sentLines, sentBytes
}

// storedLog is what an events file holds of an attempt's log output, read
// from the file itself: the log lines' bytes as stored, the output lines
// kept (the mark's line not counted), and the marks.
type storedLog struct {
	bytes, lines, textBytes int64
	marks                   []api.StoredEvent
	seqOfMark               []int
}

func readStoredLog(t *testing.T, dir, taskID string, attempt int) storedLog {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "events", taskID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out storedLog
	r := bufio.NewReaderSize(f, 4<<20)
	for seq := 1; ; seq++ {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 {
			break
		}
		if err != nil {
			t.Fatalf("a torn line in the events file: %v", err)
		}
		var e api.StoredEvent
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind != state.EventLog || e.Attempt != attempt {
			continue
		}
		var p api.LogPayload
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out.bytes += int64(len(line))
		lines := p.Lines
		if p.Cut != nil {
			out.marks, out.seqOfMark = append(out.marks, e), append(out.seqOfMark, seq)
			if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "output cut here") {
				t.Errorf("the marked event does not end with the mark's line: %q", lines)
			}
			lines = lines[:max(len(lines)-1, 0)]
		}
		out.lines += int64(len(lines))
		out.textBytes += textBytes(lines)
	}
	return out
}

func outputFor(t *testing.T, v api.TaskView, attempt int) state.AttemptOutput {
	t.Helper()
	for _, o := range v.Output {
		if o.Attempt == attempt {
			return o
		}
	}
	t.Fatalf("task %s has no output account of attempt %d: %+v", v.ID, attempt, v.Output)
	return state.AttemptOutput{}
}

// An attempt's log output is stored up to the cap: past it, log events
// are accepted (the agent does not send them again) and counted, one
// stored event marks where, and the task says how much was cut. Other
// events are never cut; a log event sent again is a duplicate and counts
// nothing; the next attempt has a cap of its own, an attempt the task
// cannot have none; the counts survive a restart.
func TestLogOutputIsCappedPerAttempt(t *testing.T) {
	t.Parallel()
	fileStoreOnly(t) // it reads the files
	const limit = 64 << 10
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnvOpts(t, dir, clk, Options{MaxAttemptOutput: limit})
	ctx := context.Background()
	e.submit("print a lot", "")
	c := e.claim("ag-1", "available", 1)[0]
	id := c.Task.ID
	a1 := state.Attempt{AttemptID: "a1", Number: 1, Status: state.AttemptRunning, StartedAt: t0}
	e.send("ag-1", ev(id+":phase:executor_starting", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
		ev(id+":attempt:1", state.EventAttempt, c, a1))

	// 1 MB of output in 100 events of 100 lines of 100 bytes.
	logs, sentLines, sentBytes := logEvents(c, 1, "out", 100, 100, 100)
	for i, r := range e.send("ag-1", logs...) {
		if r.Status != api.StatusAccepted {
			t.Fatalf("log event %d: %+v, want accepted", i, r)
		}
	}
	progress := ev(id+":progress:late", state.EventProgress, c, state.ProgressEvent{Message: "still here", Percent: 90})
	phase := ev(id+":phase:turn_started", state.EventPhase, c, state.PhaseEvent{Phase: state.PhaseTurnStarted})
	if got := statuses(e.send("ag-1", progress, phase)); got != "accepted accepted" {
		t.Fatalf("progress and phase past the cap: %s", got)
	}

	got := readStoredLog(t, dir, id, 1)
	if got.bytes > limit+2<<10 {
		t.Errorf("attempt 1's log events take %d bytes in the events file; the cap is %d and a mark under 2 KiB", got.bytes, limit)
	}
	if got.bytes < limit-16<<10 {
		t.Errorf("attempt 1's log events take %d bytes: the cap (%d) is not filled", got.bytes, limit)
	}
	if len(got.marks) != 1 {
		t.Fatalf("%d marks stored, want 1", len(got.marks))
	}
	mark := got.marks[0]
	var p api.LogPayload
	must(t, json.Unmarshal(mark.Payload, &p))
	if p.Cut.CapBytes != limit || mark.Key == "" || mark.Attempt != 1 || p.Stream != "stdout" {
		t.Errorf("the mark: %+v, payload %+v", mark, p)
	}
	v, err := e.client.Task(ctx, id)
	must(t, err)
	o := outputFor(t, v, 1)
	if o.CutAt != got.seqOfMark[0] || o.StoredBytes != got.bytes {
		t.Errorf("the task says cut at %d, %d bytes stored; the file has the mark at %d and %d bytes", o.CutAt, o.StoredBytes, got.seqOfMark[0], got.bytes)
	}
	if got.lines+o.CutLines != sentLines || got.textBytes+o.CutBytes != sentBytes {
		t.Errorf("stored %d lines (%d bytes) and cut %d (%d bytes); sent %d (%d bytes)", got.lines, got.textBytes, o.CutLines, o.CutBytes, sentLines, sentBytes)
	}
	if v.OutputCutLines != o.CutLines || v.OutputCutBytes != o.CutBytes || o.CutLines == 0 {
		t.Errorf("the task view's totals %d lines %d bytes, the attempt's %d %d", v.OutputCutLines, v.OutputCutBytes, o.CutLines, o.CutBytes)
	}
	if v.Progress.Message != "still here" || v.Phase != state.PhaseTurnStarted {
		t.Errorf("progress and phase past the cap were not applied: %s %+v", v.Phase, v.Progress)
	}
	evs, err := e.client.TaskEvents(ctx, id)
	must(t, err)
	if last := evs[len(evs)-1]; last.Key != phase.Key || evs[len(evs)-2].Key != progress.Key {
		t.Errorf("progress and phase past the cap were not stored: the last events are %s, %s", evs[len(evs)-2].Key, last.Key)
	}

	// Sent again (the answer was lost): duplicates, nothing counted twice.
	if got := statuses(e.send("ag-1", logs...)); got != strings.TrimSpace(strings.Repeat("duplicate ", len(logs))) {
		t.Fatalf("the log events sent again: %s", got)
	}
	if v2, _ := e.client.Task(ctx, id); outputFor(t, v2, 1) != o {
		t.Errorf("sending again changed the counts: %+v, was %+v", outputFor(t, v2, 1), o)
	}

	// An attempt number the task cannot have opens no budget of its own.
	bogus, bogusLines, _ := logEvents(c, 99, "bogus", 3, 10, 100)
	e.send("ag-1", bogus...)
	v, _ = e.client.Task(ctx, id)
	if o1 := outputFor(t, v, 1); o1.CutLines != o.CutLines+bogusLines || len(v.Output) != 1 {
		t.Errorf("log events of attempt 99: %+v, want them cut from attempt 1's", v.Output)
	}
	o = outputFor(t, v, 1)

	// The counts are on disk: a restart keeps them, and attempt 1 stays cut.
	e = e.restart(clk)
	more, moreLines, _ := logEvents(c, 1, "more", 2, 10, 100)
	e.send("ag-1", more...)
	v, _ = e.client.Task(ctx, id)
	if o1 := outputFor(t, v, 1); o1.CutLines != o.CutLines+moreLines || o1.StoredBytes != o.StoredBytes || o1.CutAt != o.CutAt {
		t.Errorf("after a restart attempt 1's account is %+v, want %+v with %d more lines cut", o1, o, moreLines)
	}

	// Attempt 2 has a cap of its own.
	done := a1
	done.Status, done.CompletedAt = state.AttemptFailed, t0.Add(time.Second)
	done.Error = &state.Error{Code: state.CodeNetwork}
	a2 := state.Attempt{AttemptID: "a2", Number: 2, Status: state.AttemptRunning, StartedAt: t0.Add(2 * time.Second)}
	e.send("ag-1", ev(id+":attempt:1:done", state.EventAttempt, c, done), ev(id+":attempt:2", state.EventAttempt, c, a2))
	second, _, _ := logEvents(c, 2, "second", 3, 10, 100)
	e.send("ag-1", second...)
	v, _ = e.client.Task(ctx, id)
	if o2 := outputFor(t, v, 2); o2.CutLines != 0 || o2.StoredBytes == 0 {
		t.Errorf("attempt 2's account: %+v, want its lines stored", o2)
	}
	if s := readStoredLog(t, dir, id, 2); s.lines != 30 || len(s.marks) != 0 {
		t.Errorf("attempt 2's stored lines: %d, %d marks; want 30 and none", s.lines, len(s.marks))
	}

	// The mark is the control plane's: an agent's is refused.
	forged := ev(id+":forged", state.EventLog, c, api.LogPayload{LogEvent: state.LogEvent{Stream: "stdout", Lines: []string{"x"}}, Cut: &api.OutputCut{CapBytes: 1}})
	forged.Attempt = 2
	if r := e.send("ag-1", forged)[0]; r.Status != api.StatusRejected || !strings.HasPrefix(string(r.Reason), string(api.ReasonInvalid)) {
		t.Errorf("a log event with a forged mark: %+v, want rejected invalid", r)
	}
}

// An agent that withholds output past its cap says so on its log events
// (output_withheld): the control plane tells agents its cap in every
// heartbeat answer; an agent's cut, before the control plane's, is marked
// where the agent said it, with the agent's cap, once; what it withholds
// after is counted; lines stored and lines cut add up to what the task
// printed. When the control plane cut first, what the agent withholds is
// counted on the task. Counts below 0 are refused; huge ones cannot wrap
// the task's totals.
func TestWhatTheAgentWithheldIsCountedAsCut(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	dir := t.TempDir()
	e := newEnvOpts(t, dir, &clock{now: t0}, Options{MaxAttemptOutput: limit})
	ctx := context.Background()
	resp, err := e.agent("ag-1").Heartbeat(ctx, api.HeartbeatRequest{AgentID: "ag-1"})
	must(t, err)
	if resp.MaxAttemptOutputBytes != limit {
		t.Fatalf("the heartbeat answer says a cap of %d, want %d", resp.MaxAttemptOutputBytes, limit)
	}
	withheld := func(c api.Claimed, key string, lines []string, w api.OutputCut) api.Event {
		return ev(key, state.EventLog, c, api.LogPayload{LogEvent: state.LogEvent{Stream: "stdout", Lines: lines}, Withheld: &w})
	}

	// The agent cut first, at a cap of its own below the control plane's.
	e.submit("agent cuts", "")
	c := e.claim("ag-1", "available", 1)[0]
	id := c.Task.ID
	logs, printed, printedBytes := logEvents(c, 1, "out", 3, 10, 100) // 3 KB, well under the cap
	e.send("ag-1", logs...)
	cutAt := withheld(c, "cut", []string{"last line that fit"}, api.OutputCut{CapBytes: 4 << 10, Lines: 500, Bytes: 50_000})
	later := withheld(c, "later", nil, api.OutputCut{CapBytes: 4 << 10, Lines: 70, Bytes: 7000})
	if got := statuses(e.send("ag-1", cutAt, later)); got != "accepted accepted" {
		t.Fatalf("the agent's withheld counts: %s", got)
	}
	printed, printedBytes = printed+1+500+70, printedBytes+int64(len("last line that fit"))+50_000+7000
	got := listedLog(t, e, id, 1)
	if len(got.marks) != 1 {
		t.Fatalf("%d marks, want 1 where the agent cut", len(got.marks))
	}
	var p api.LogPayload
	must(t, json.Unmarshal(got.marks[0].Payload, &p))
	if got.marks[0].Key != "cut" || p.Cut.CapBytes != 4<<10 || p.Cut.Lines != 500 || p.Cut.Bytes != 50_000 || p.Withheld != nil ||
		!strings.Contains(p.Lines[len(p.Lines)-1], "reached its cap of 4 KiB") || p.Lines[0] != "last line that fit" {
		t.Errorf("the mark: key %s, payload %+v", got.marks[0].Key, p)
	}
	v, err := e.client.Task(ctx, id)
	must(t, err)
	if got.lines+v.OutputCutLines != printed || got.textBytes+v.OutputCutBytes != printedBytes {
		t.Errorf("stored %d lines (%d bytes), cut %d (%d bytes); the task printed %d (%d bytes)", got.lines, got.textBytes, v.OutputCutLines, v.OutputCutBytes, printed, printedBytes)
	}

	// The control plane cut first: the agent's later counts add up.
	e.submit("control plane cuts", "")
	c = e.claim("ag-1", "available", 1)[0]
	id = c.Task.ID
	logs, printed, printedBytes = logEvents(c, 1, "flood", 100, 100, 100) // 1 MB, past the cap
	e.send("ag-1", logs...)
	e.send("ag-1", withheld(c, "agent-cut", nil, api.OutputCut{CapBytes: limit, Lines: 1000, Bytes: 100_000}))
	printed, printedBytes = printed+1000, printedBytes+100_000
	got = listedLog(t, e, id, 1)
	v, err = e.client.Task(ctx, id)
	must(t, err)
	if len(got.marks) != 1 || got.lines+v.OutputCutLines != printed || got.textBytes+v.OutputCutBytes != printedBytes {
		t.Errorf("%d marks; stored %d lines, cut %d; printed %d", len(got.marks), got.lines, v.OutputCutLines, printed)
	}

	// Counts below 0 are refused; huge ones saturate.
	bad := withheld(c, "negative", nil, api.OutputCut{Lines: -5})
	if r := e.send("ag-1", bad)[0]; r.Status != api.StatusRejected || !strings.Contains(string(r.Reason), "output_withheld") {
		t.Errorf("negative counts: %+v, want rejected", r)
	}
	e.send("ag-1", withheld(c, "huge-1", nil, api.OutputCut{Lines: math.MaxInt64, Bytes: math.MaxInt64}),
		withheld(c, "huge-2", nil, api.OutputCut{Lines: math.MaxInt64, Bytes: math.MaxInt64}))
	v, err = e.client.Task(ctx, id)
	must(t, err)
	if v.OutputCutLines != math.MaxInt64 || v.OutputCutBytes != math.MaxInt64 {
		t.Errorf("huge counts: %d lines, %d bytes cut, want them held at the most an int64 holds", v.OutputCutLines, v.OutputCutBytes)
	}
}

// listedLog is what the control plane lists of an attempt's log output,
// whatever its store: the output lines kept (the mark's line not
// counted), their bytes, and the marks.
func listedLog(t *testing.T, e *env, taskID string, attempt int) storedLog {
	t.Helper()
	evs, err := e.client.TaskEvents(context.Background(), taskID)
	must(t, err)
	var out storedLog
	for _, ev := range evs {
		if ev.Kind != state.EventLog || ev.Attempt != attempt {
			continue
		}
		var p api.LogPayload
		must(t, json.Unmarshal(ev.Payload, &p))
		lines := p.Lines
		if p.Cut != nil {
			out.marks = append(out.marks, ev)
			lines = lines[:max(len(lines)-1, 0)]
		}
		out.lines += int64(len(lines))
		out.textBytes += textBytes(lines)
	}
	return out
}

// The event that passes the cap keeps the lines that fit; the mark says
// what it cut of them.
func TestTheEventThatPassesTheCapKeepsWhatFits(t *testing.T) {
	t.Parallel()
	fileStoreOnly(t) // it reads the files
	const limit = 16 << 10
	dir := t.TempDir()
	e := newEnvOpts(t, dir, &clock{now: t0}, Options{MaxAttemptOutput: limit})
	e.submit("x", "")
	c := e.claim("ag-1", "available", 1)[0]
	big, sentLines, sentBytes := logEvents(c, 1, "big", 1, 400, 100) // 40 KB in one event
	if r := e.send("ag-1", big...)[0]; r.Status != api.StatusAccepted {
		t.Fatalf("%+v", r)
	}
	got := readStoredLog(t, dir, c.Task.ID, 1)
	if len(got.marks) != 1 {
		t.Fatalf("%d marks stored, want 1", len(got.marks))
	}
	var p api.LogPayload
	must(t, json.Unmarshal(got.marks[0].Payload, &p))
	if got.lines == 0 || got.bytes > limit || p.Cut.Lines != sentLines-got.lines || p.Cut.Bytes != sentBytes-got.textBytes {
		t.Errorf("kept %d lines in %d bytes (cap %d); the mark says %d lines, %d bytes cut of %d, %d", got.lines, got.bytes, limit, p.Cut.Lines, p.Cut.Bytes, sentLines, sentBytes)
	}
	if p.Lines[0] != "big event 0 line 0 "+strings.Repeat("x", 100-len("big event 0 line 0 ")) {
		t.Errorf("the first line kept: %q", p.Lines[0])
	}
}

// A crash between storing a batch that passes the cap and saving the task
// file: the next start counts the stored events again, the mark included;
// the lines cut after the mark were never answered for, and are counted
// when the agent sends them again. The counts end as without the crash.
func TestCutCountsSurviveACrashBeforeTheTaskFile(t *testing.T) {
	t.Parallel()
	fileStoreOnly(t) // it reads the files
	const limit = 32 << 10
	dir, clk := t.TempDir(), &clock{now: t0}
	e := newEnvOpts(t, dir, clk, Options{MaxAttemptOutput: limit})
	e.submit("x", "")
	c := e.claim("ag-1", "available", 1)[0]
	first, _, _ := logEvents(c, 1, "first", 2, 10, 100)
	e.send("ag-1", first...)
	taskFile := filepath.Join(dir, "tasks", c.Task.ID+".json")
	stale, err := os.ReadFile(taskFile)
	must(t, err)
	batch, _, _ := logEvents(c, 1, "second", 10, 50, 100)
	e.send("ag-1", batch...)
	want, err := e.client.Task(context.Background(), c.Task.ID)
	must(t, err)

	must(t, os.WriteFile(taskFile, stale, 0o600)) // the crash: the task file from before the batch
	e = e.restart(clk)
	if got := statuses(e.send("ag-1", batch...)); strings.Contains(got, "rejected") {
		t.Fatalf("the batch sent again after the crash: %s", got)
	}
	got, err := e.client.Task(context.Background(), c.Task.ID)
	must(t, err)
	if outputFor(t, got, 1) != outputFor(t, want, 1) {
		t.Errorf("after the crash and the batch sent again: %+v, want %+v", outputFor(t, got, 1), outputFor(t, want, 1))
	}
	if s := readStoredLog(t, dir, c.Task.ID, 1); len(s.marks) != 1 || s.bytes != outputFor(t, got, 1).StoredBytes {
		t.Errorf("the events file: %d marks, %d bytes; the task says %d", len(s.marks), s.bytes, outputFor(t, got, 1).StoredBytes)
	}
}

// Titles are cut to MaxTitleRunes characters at a character's boundary,
// the last one an ellipsis; prompts over MaxPromptBytes are refused.
func TestTitlesAreCappedAndPromptsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t.TempDir(), &clock{now: t0})
	ctx := context.Background()
	for _, tc := range []struct {
		name, title, want string
	}{
		{"ascii, 1.7 MB", strings.Repeat("a", 1700000), strings.Repeat("a", api.MaxTitleRunes-1) + "…"},
		{"two-byte characters", strings.Repeat("é", 1000), strings.Repeat("é", api.MaxTitleRunes-1) + "…"},
		{"at the cap", strings.Repeat("é", api.MaxTitleRunes), strings.Repeat("é", api.MaxTitleRunes)},
		{"short", "fix the login test", "fix the login test"},
	} {
		v, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Title: tc.title, Prompt: "do it"})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if v.Title != tc.want {
			t.Errorf("%s: title of %d bytes, want %d", tc.name, len(v.Title), len(tc.want))
		}
		if stored, _ := e.client.Task(ctx, v.ID); stored.Title != tc.want {
			t.Errorf("%s: stored title of %d bytes", tc.name, len(stored.Title))
		}
	}
	_, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: strings.Repeat("p", api.MaxPromptBytes+1)})
	if statusOf(err) != 400 || !strings.Contains(err.Error(), "prompt is longer than 256 KiB") {
		t.Errorf("a prompt over the cap: %v", err)
	}
	if _, err := e.client.CreateTask(ctx, api.CreateTaskRequest{Prompt: strings.Repeat("p", api.MaxPromptBytes)}); err != nil {
		t.Errorf("a prompt at the cap: %v", err)
	}
}
