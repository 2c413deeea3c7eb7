package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/outboxview"
	"github.com/edgeagent/agent/outbox"
)

func TestOutboxTailLastN(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	r := runAgent(t, "outbox", "tail", "-n", "2", "--data-dir", dataDir)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "4 ") || !strings.HasPrefix(lines[1], "5 ") {
		t.Fatalf("tail -n 2: %+v", r)
	}
}

func TestOutboxTailFollowsAppendsAndCompaction(t *testing.T) {
	t.Parallel()
	dataDir := seedOutbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := agentCmd(ctx, nil, "outbox", "tail", "-f", "-n", "1", "--json", "--data-dir", dataDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	o, err := outbox.Open(outboxview.Dir(dataDir), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	expect := func(seq uint64) {
		t.Helper()
		select {
		case l := <-lines:
			var r outbox.Record
			if err := json.Unmarshal([]byte(l), &r); err != nil || r.Seq != seq {
				t.Fatalf("tail -f printed %q, want seq %d", l, seq)
			}
		case <-ctx.Done():
			t.Fatalf("tail -f printed nothing for seq %d", seq)
		}
	}
	expect(5) // the last record already there: tail is following now
	for i := range 2 {
		if _, err := o.Append(outbox.Record{Kind: outbox.KindLog, TaskID: "t-3", Payload: json.RawMessage(`{"lines":["hi"]}`)}); err != nil {
			t.Fatal(err)
		}
		expect(uint64(6 + i))
	}
	must(t, o.MarkSent(1, 2, 3, 4, 5, 6))
	if _, err := o.Compact(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Append(outbox.Record{Kind: outbox.KindLog, TaskID: "t-3", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	expect(8) // once, though compaction rewrote 7 into a new file
	cmd.Process.Signal(syscall.SIGINT)
	for l := range lines {
		t.Errorf("unexpected line after compaction: %s", l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("tail -f after SIGINT: %v", err)
	}
}
