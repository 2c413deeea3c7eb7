package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCPLoad runs the cpload section with tiny numbers against a real
// `agent controlplane serve` process, and checks that tasks completed
// without a single error, and that the table and the JSON hold them.
func TestCPLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the cpload section builds the agent")
	}
	cfg := quickConfig()
	cfg.repo, cfg.dataDir = "../..", t.TempDir()
	cfg.only = map[string]bool{"cpload": true}
	cfg.cp = quickCP()
	// What a real agent sends (the capture's batches), claims answered at
	// once to keep the run short: every event accepted.
	if err := cfg.cp.setMix("captured", 0); err != nil {
		t.Fatal(err)
	}
	cfg.cp.agents, cfg.cp.stored = []int{8}, []int{60}
	cfg.cp.rate, cfg.cp.duration, cfg.cp.heartbeat, cfg.cp.taskTime, cfg.cp.readRate = 20, 3*time.Second, 500*time.Millisecond, 200*time.Millisecond, 5
	cfg.cp.fillWorkers = 4
	var progress bytes.Buffer
	rep, err := run(cfg, log.New(&progress, "", 0))
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.CPLoad) != 1 {
		t.Fatalf("%d cpload results, want 1", len(rep.CPLoad))
	}
	r := rep.CPLoad[0]
	if r.Completed <= 0 || r.PerSec <= 0 || r.Submitted <= 0 {
		t.Errorf("%d tasks completed (%.2f/s) of %d submitted: want some", r.Completed, r.PerSec, r.Submitted)
	}
	if n := r.errors(); n != 0 {
		b, _ := json.MarshalIndent(r, "", "  ")
		t.Errorf("%d errors:\n%s", n, b)
	}
	var kinds []string
	for _, k := range r.Kinds {
		kinds = append(kinds, k.Kind)
		if k.Count <= 0 || k.P50MS <= 0 || k.P99MS < k.P50MS || k.MaxMS < k.P99MS {
			t.Errorf("%s: %d requests, p50 %.2f, p99 %.2f, max %.2f ms", k.Kind, k.Count, k.P50MS, k.P99MS, k.MaxMS)
		}
	}
	if !slices.Equal(kinds, cpKindNames[:]) {
		t.Errorf("kinds %v, want %v", kinds, cpKindNames)
	}
	if r.StartupMS <= 0 || r.StartupEmptyMS <= 0 || r.RSSStart < 1<<20 || r.HWMEnd < r.RSSEnd || r.ServerCPUPerReq <= 0 || r.LoadCPUS <= 0 || r.FillS <= 0 {
		t.Errorf("start-up %.1f / %.1f ms, RSS %d, end %d / %d, CPU per request %.0f µs, load CPU %.2f s, fill %.2f s",
			r.StartupEmptyMS, r.StartupMS, r.RSSStart, r.RSSEnd, r.HWMEnd, r.ServerCPUPerReq, r.LoadCPUS, r.FillS)
	}
	// The table, and the same table from the JSON (-print).
	var out, again bytes.Buffer
	printReport(&out, rep)
	b, _ := json.Marshal(rep)
	var back report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	printReport(&again, &back)
	if out.String() != again.String() {
		t.Errorf("the tables of the JSON differ:\n%s\nfrom\n%s", again.String(), out.String())
	}
	for _, want := range []string{"### Control plane under load: files, 8 agents, 20 tasks/s, 60 stored tasks", "| heartbeat | ", "| events-page | ", "| tasks completed | "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

// TestCPLoadPG runs the cpload section over a throwaway PostgreSQL
// cluster, with one replica and then two behind the proxy, the store
// filled by COPY: tasks complete, without an error.
func TestCPLoadPG(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the cpload section builds the agent")
	}
	if _, err := pgBinDir(); err != nil {
		t.Skip(err)
	}
	cfg := quickConfig()
	cfg.repo, cfg.dataDir = "../..", t.TempDir()
	cfg.only = map[string]bool{"cpload": true}
	cfg.cp = quickCP()
	cfg.cp.pg, cfg.cp.replicas = true, []int{1, 2}
	cfg.cp.agents, cfg.cp.stored = []int{8}, []int{fillTemplates + 40}
	cfg.cp.rate, cfg.cp.duration, cfg.cp.heartbeat, cfg.cp.taskTime, cfg.cp.readRate = 20, 3*time.Second, 500*time.Millisecond, 200*time.Millisecond, 5
	cfg.cp.fillWorkers = 4
	var progress bytes.Buffer
	rep, err := run(cfg, log.New(&progress, "", 0))
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.CPLoad) != 2 {
		t.Fatalf("%d cpload results, want 2", len(rep.CPLoad))
	}
	for i, r := range rep.CPLoad {
		if r.Replicas != i+1 || len(r.PerReplica) != i+1 || !r.PG {
			t.Errorf("run %d: %d replicas (%d rows), pg %v", i, r.Replicas, len(r.PerReplica), r.PG)
		}
		if r.Completed <= 0 {
			t.Errorf("run %d: no task completed", i)
		}
		if n := r.errors(); n != 0 {
			b, _ := json.MarshalIndent(r, "", "  ")
			t.Errorf("run %d: %d errors:\n%s", i, n, b)
		}
		if r.ServerCPUS <= 0 || r.PGCPUS <= 0 || r.RSSEnd < 1<<20 {
			t.Errorf("run %d: server CPU %.2f s, PostgreSQL CPU %.2f s, RSS %d", i, r.ServerCPUS, r.PGCPUS, r.RSSEnd)
		}
	}
	var out bytes.Buffer
	printReport(&out, rep)
	for _, want := range []string{"PostgreSQL, 8 agents, 20 tasks/s, 60 stored tasks, 2 replicas", "| PostgreSQL CPU per request | ", "| replica 2: ", "by COPY"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

// TestCPReplicasFiles: replicas need a shared store; the file store is
// refused in one line, before anything is built.
func TestCPReplicasFiles(t *testing.T) {
	cfg := quickConfig()
	cfg.cp = quickCP()
	cfg.cp.replicas = []int{1, 2}
	_, err := cploadSection(cfg, log.New(io.Discard, "", 0))
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Errorf("cploadSection: %v; want a one-line refusal", err)
	}
}

// TestClone: a copy of a template is the template under its new id,
// created when it is told, and its events keyed by the new id.
func TestClone(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	seq := int32(1)
	tt := &tmplTask{id: "t-0123456789", doc: []byte(`{"id":"t-0123456789","prompt":"p","phase":"completed","created_at":"2026-11-01T00:00:00Z","updated_at":"2026-11-01T00:00:02Z"}`),
		events: []tmplEvent{{key: "t-0123456789:log:1", seq: &seq, line: []byte(`{"key":"t-0123456789:log:1","task_id":"t-0123456789"}`)}}}
	id := cloneID(7, 42)
	if id != "t-c070000002a" {
		t.Errorf("cloneID = %q", id)
	}
	task, doc, evs, err := tt.clone(id, created)
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != id || !task.CreatedAt.Equal(created) || !task.UpdatedAt.Equal(created.Add(2*time.Second)) || strings.Contains(string(doc), tt.id) {
		t.Errorf("clone: %s created %v updated %v, doc %s", task.ID, task.CreatedAt, task.UpdatedAt, doc)
	}
	if len(evs) != 1 || evs[0].key != id+":log:1" || strings.Contains(string(evs[0].line), tt.id) || *evs[0].seq != 1 {
		t.Errorf("events: %+v", evs)
	}
}

func TestCPPairs(t *testing.T) {
	for _, tc := range []struct {
		agents, stored string
		want           []cpRunPair
		wantErr        bool
	}{
		{"1000", "1k", []cpRunPair{{1000, 1000}}, false},
		{"1000,300", "1k,10k", []cpRunPair{{1000, 1000}, {300, 10000}}, false},
		{"300", "10k,1M", []cpRunPair{{300, 10000}, {300, 1_000_000}}, false},
		{"1,2", "1,2,3", nil, true},
	} {
		a, err1 := parseCounts(tc.agents)
		s, err2 := parseCounts(tc.stored)
		if err1 != nil || err2 != nil {
			t.Fatalf("parse %q %q: %v %v", tc.agents, tc.stored, err1, err2)
		}
		got, err := cpConfig{agents: a, stored: s}.pairs()
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("%s × %s: %v, %v; want %v", tc.agents, tc.stored, got, err, tc.want)
		}
	}
	if _, err := parseCounts("ten"); err == nil {
		t.Error("parseCounts(ten) took it")
	}
}

// The capture kept as data holds a task from its grant to its completion,
// each batch's events with what the rules read of them; the load's mix
// is made of it, and claims wait as the capture's did.
func TestCapturedMix(t *testing.T) {
	shapes, err := capturedBatches(agentCapture)
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for _, b := range shapes {
		events += len(b)
		for _, e := range b {
			if kind, detail, _ := strings.Cut(e, ":"); (kind == "phase" || kind == "attempt") && detail == "" {
				t.Errorf("event %q: its phase or status is not in the capture", e)
			}
		}
	}
	if len(shapes) < 3 || events < 8 {
		t.Fatalf("%d batches, %d events: not a task's", len(shapes), events)
	}
	last := shapes[len(shapes)-1]
	if last[len(last)-1] != "complete" {
		t.Errorf("the last batch %v does not end with the completion", last)
	}
	var c cpConfig
	if err := c.setMix("captured", -1); err != nil || c.claimWait != 20*time.Second {
		t.Errorf("captured mix: claims wait %v (%v), want the capture's 20s", c.claimWait, err)
	}
	if err := c.setMix("synthetic", -1); err != nil || c.claimWait != 0 || c.shapes != nil {
		t.Errorf("synthetic mix: wait %v, shapes %v (%v)", c.claimWait, c.shapes, err)
	}
	if err := c.setMix("bogus", -1); err == nil {
		t.Error("a mix of no name was taken")
	}
	got := shapedEvents(claimed{}, new(uint64), time.Now(), shapes)
	n := 0
	for _, b := range got {
		n += len(b)
	}
	if n != events {
		t.Errorf("%d events made of %d shapes", n, events)
	}
}
