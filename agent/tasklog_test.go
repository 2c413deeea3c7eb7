package agent

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/state"
)

func TestTaskLogCapUnderAFlood(t *testing.T) {
	t.Parallel()
	const (
		limit = 64 << 10
		lines = 20_000 // about 1 MB of output
	)
	l := datadir.Layout{Dir: t.TempDir()}
	logs := newTaskLogs(limit)
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	follower, err := datadir.NewLogReader(l.Dir, "flood", 1)
	must(t, err)
	var followed []string
	follow := func() { must(t, follower.Next(func(s string) { followed = append(followed, s) })) }

	var written int64
	for i := 0; i < lines; i += 10 {
		batch := make([]string, 10)
		for j := range batch {
			batch[j] = fmt.Sprintf("line %05d %s", i+j, strings.Repeat("x", 30))
		}
		must(t, logs.append(l, "flood", 1, at, "stdout", batch))
		for _, s := range batch {
			written += int64(len(fmt.Sprintf("%s %-8s %s\n", "12:00:00.000", "stdout", s)))
		}
		if info, err := os.Stat(l.Log("flood", 1)); err != nil || info.Size() > limit/2 {
			t.Fatalf("after line %d the log is %d bytes (%v): the head is over half the cap", i, info.Size(), err)
		}
		if i%1000 == 0 {
			follow() // tasks logs -f, reading as the task writes
		}
	}
	must(t, logs.finish("flood"))
	follow()

	b, err := os.ReadFile(l.Log("flood", 1))
	must(t, err)
	if len(b) > limit {
		t.Fatalf("log is %d bytes, cap %d", len(b), limit)
	}
	if len(b) < limit*9/10 {
		t.Errorf("log is %d bytes: the cap %d is not used", len(b), limit)
	}
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if !strings.HasSuffix(got[0], "line 00000 "+strings.Repeat("x", 30)) {
		t.Errorf("first line %q, want the head of the output", got[0])
	}
	if !strings.Contains(got[len(got)-1], fmt.Sprintf("line %05d", lines-1)) {
		t.Errorf("last line %q, want the last line written", got[len(got)-1])
	}
	// Head, one notice, one omitted line, tail: and the numbers add up.
	var notices, marks int
	var omittedBytes, omittedLines int64
	mark := regexp.MustCompile(`agent    … (\d+) bytes \((\d+) lines\) omitted …$`)
	kept := int64(0)
	for _, s := range got {
		switch m := mark.FindStringSubmatch(s); {
		case m != nil:
			marks++
			omittedBytes, _ = strconv.ParseInt(m[1], 10, 64)
			omittedLines, _ = strconv.ParseInt(m[2], 10, 64)
		case strings.Contains(s, "agent    … output past"):
			notices++
		default:
			kept++
		}
	}
	if notices != 1 || marks != 1 {
		t.Fatalf("%d notices and %d omitted lines, want one of each", notices, marks)
	}
	if kept+omittedLines != lines {
		t.Errorf("%d lines kept + %d omitted, want %d", kept, omittedLines, lines)
	}
	var keptBytes int64
	for _, s := range got {
		if !strings.Contains(s, "agent    …") {
			keptBytes += int64(len(s) + 1)
		}
	}
	if keptBytes+omittedBytes != written {
		t.Errorf("%d bytes kept + %d omitted, want %d written", keptBytes, omittedBytes, written)
	}
	// The follower saw the file as it grew, line for line.
	if strings.Join(followed, "\n") != strings.Join(got, "\n") {
		t.Errorf("a follower read %d lines, the file holds %d", len(followed), len(got))
	}
}

func TestTaskLogNextAttemptEndsTheLastOne(t *testing.T) {
	t.Parallel()
	l := datadir.Layout{Dir: t.TempDir()}
	logs := newTaskLogs(1) // below the smallest cap: minTaskLogBytes is taken
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("y", 100)
	for range 200 {
		must(t, logs.append(l, "t", 1, at, "stdout", []string{long}))
	}
	must(t, logs.append(l, "t", 2, at, "stdout", []string{"second attempt"}))
	b, err := os.ReadFile(l.Log("t", 1))
	must(t, err)
	if !strings.Contains(string(b), "lines) omitted …") || !strings.HasSuffix(string(b), long+"\n") {
		t.Errorf("attempt 1's log was not ended when attempt 2 began:\n%s", b[max(0, len(b)-300):])
	}
	if int64(len(b)) > minTaskLogBytes {
		t.Errorf("attempt 1's log is %d bytes", len(b))
	}
	// A line longer than the whole cap is cut, not kept whole.
	must(t, logs.append(l, "t", 3, at, "stdout", []string{strings.Repeat("z", 100_000)}))
	must(t, logs.finish("t"))
	b, err = os.ReadFile(l.Log("t", 3))
	must(t, err)
	// The line itself is cut (its head kept, "…" where it stops), not only
	// the file.
	if len(b) > int(minTaskLogBytes) || !strings.HasSuffix(string(b), "z…\n") {
		t.Errorf("a 100 kB line under a %d byte cap left a %d byte log", minTaskLogBytes, len(b))
	}
}

// TestAgentCapsAFloodingTasksLog runs a task that floods its output
// through the agent: its log keeps the head and the tail within the cap.
func TestAgentCapsAFloodingTasksLog(t *testing.T) {
	t.Parallel()
	client, cfg := fixture(t)
	cfg.TaskLogMaxBytes = 16 << 10
	a, err := New(cfg)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	v, err := client.CreateTask(ctx, api.CreateTaskRequest{Prompt: "flood\n@flood 5000"})
	must(t, err)
	if got := waitTerminal(t, client, v.ID); got.Phase != state.PhaseCompleted {
		t.Errorf("phase %s", got.Phase)
	}
	cancel()
	must(t, <-errc) // the task's log is ended once Run returns

	var lines []string
	r, err := datadir.NewLogReader(cfg.DataDir, v.ID, 1)
	must(t, err)
	must(t, r.Next(func(s string) { lines = append(lines, s) }))
	b, err := os.ReadFile(datadir.Layout{Dir: cfg.DataDir}.Log(v.ID, 1))
	must(t, err)
	text := string(b)
	t.Logf("log: %d bytes, %d lines", len(b), len(lines))
	if len(b) > 16<<10 {
		t.Errorf("log is %d bytes, cap %d", len(b), 16<<10)
	}
	for _, want := range []string{"flood line 0 of", "lines) omitted …", "flood line 4999 of"} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	// The last of stdout's lines: stderr is read apart from stdout, so its
	// one line (the sample's greeting) may be logged after the flood ends.
	var stdout []string
	for _, l := range lines {
		if strings.Contains(l, " stdout ") {
			stdout = append(stdout, l)
		}
	}
	if len(stdout) == 0 || !strings.Contains(stdout[len(stdout)-1], "flood line 4999 of") {
		t.Errorf("tasks logs would not end stdout with its last line: %d lines, last %q", len(lines), lines[max(0, len(lines)-3):])
	}
}
