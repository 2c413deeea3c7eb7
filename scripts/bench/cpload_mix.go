package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// The load's agents send what a real agent sends (-cp-mix captured, the
// default): for each task, the batches of events a real agent sent for a
// task it ran alone, as the capture in capture/ recorded them (the
// capture section makes it), their kinds and phases in order, the
// payloads made up to their size. -cp-mix synthetic sends the three
// batches of eight events the load sent before the capture.

//go:embed capture/agent-sample.jsonl
var agentCapture []byte

// capturedBatches are the shapes of the batches of events of the first
// task of a capture (it ran alone): each batch a list of shapes
// (eventShape), from the first batch after the claim that granted it to
// the one that completed it.
func capturedBatches(capture []byte) ([][]string, error) {
	var lines []captureLine
	sc := bufio.NewScanner(bytes.NewReader(capture))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l captureLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("the capture: %w", err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].AtMS < lines[j].AtMS })
	var out [][]string
	granted := false
	for _, l := range lines {
		switch {
		case !granted && l.Route == "/v1/tasks/claim" && l.Granted > 0:
			granted = true
		case granted && l.Route == "/v1/events" && len(l.Events) > 0:
			out = append(out, l.Events)
			for _, e := range l.Events {
				if e == string(state.EventComplete) {
					return out, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("the capture holds no task from its grant to its completion")
}

// shapedEvents makes the events of claimed task c in the batches shapes
// says. seq makes the keys the agent's outbox would make.
func shapedEvents(c claimed, seq *uint64, started time.Time, shapes [][]string) [][]api.Event {
	now := time.Now().UTC()
	ev := func(kind state.EventKind, payload any) api.Event {
		*seq++
		b, _ := json.Marshal(payload)
		key := c.Task.ID + ":" + string(kind) + ":" + now.Format(time.RFC3339Nano) + ":" + strconv.FormatUint(*seq, 10)
		return api.Event{Key: key, Kind: kind, TaskID: c.Task.ID, Attempt: 1, LeaseID: c.Lease.ID, CreatedAt: now, Payload: b}
	}
	a := state.Attempt{AttemptID: c.Task.ID + "-a1", Number: 1, Model: "bench-model", Status: state.AttemptRunning, StartedAt: started}
	done := a
	code := 0
	done.Status, done.CompletedAt, done.ExitCode = state.AttemptCompleted, now, &code
	out := make([][]api.Event, 0, len(shapes))
	for _, batch := range shapes {
		var b []api.Event
		for _, shape := range batch {
			kind, detail, _ := strings.Cut(shape, ":")
			switch state.EventKind(kind) {
			case state.EventPhase:
				b = append(b, ev(state.EventPhase, state.PhaseEvent{Phase: state.Phase(detail)}))
			case state.EventAttempt:
				if detail == string(state.AttemptRunning) || detail == "" {
					b = append(b, ev(state.EventAttempt, a))
				} else {
					b = append(b, ev(state.EventAttempt, done))
				}
			case state.EventLog:
				n, err := strconv.Atoi(detail)
				if err != nil || n <= 0 {
					n = 3
				}
				lines := make([]string, n)
				for i := range lines {
					lines[i] = "a line of the benchmark task's output, " + strconv.Itoa(i)
				}
				b = append(b, ev(state.EventLog, state.LogEvent{Stream: state.LogStdout, Lines: lines}))
			case state.EventProgress:
				b = append(b, ev(state.EventProgress, state.Progress{Message: "working through the benchmark task", Percent: 50, Step: "work"}))
			case state.EventComplete:
				b = append(b, ev(state.EventComplete, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "done: the benchmark task", Attempts: []state.Attempt{done}}))
			}
		}
		if len(b) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// capturedClaimWait is the longest wait a claim of the capture asked.
func capturedClaimWait(capture []byte) time.Duration {
	var most int64
	sc := bufio.NewScanner(bytes.NewReader(capture))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l captureLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Route == "/v1/tasks/claim" {
			most = max(most, l.WaitMS)
		}
	}
	return time.Duration(most) * time.Millisecond
}
