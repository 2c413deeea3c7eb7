package main

import (
	"bytes"
	"log"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if proxyMain() || childMain() { // the open section and cpload's proxy re-execute this binary
		return
	}
	os.Exit(m.Run())
}

// smallest is the quick mode cut down to its smallest case of each
// section: one payload, one writer, the data disk only.
func smallest(t *testing.T) config {
	cfg := quickConfig()
	cfg.appendTime = 50 * time.Millisecond
	cfg.payloads, cfg.writers = []int{256}, []int{1}
	cfg.openTotal, cfg.openPending = 1_000, 100
	cfg.drainCompare, cfg.backlogs = 500, []int{500, 1_000}
	cfg.compactLive, cfg.compactions = 500, 1
	cfg.idleWindow = 200 * time.Millisecond
	cfg.repo = "../.."
	cfg.dataDir = t.TempDir()
	if testing.Short() {
		cfg.only = map[string]bool{"appends": true, "open": true, "drain": true, "compaction": true}
	}
	return cfg
}

// TestSmallestRun runs every section on its smallest case and checks that
// the figures and the printed tables hold what they must.
func TestSmallestRun(t *testing.T) {
	cfg := smallest(t)
	var progress bytes.Buffer
	rep, err := run(cfg, log.New(&progress, "", 0))
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	var out bytes.Buffer
	printReport(&out, rep)
	text := out.String()

	t.Run("appends", func(t *testing.T) {
		if len(rep.Appends) != len(contenders) {
			t.Fatalf("%d rows, want one per contender (%d)", len(rep.Appends), len(contenders))
		}
		for i, row := range rep.Appends {
			if row.Contender != contenders[i].name || row.Case != "disk, 256 B, 1 writer" {
				t.Errorf("row %d is %q on %q", i, row.Contender, row.Case)
			}
			if row.Records <= 0 || row.RecordsPerSec <= 0 || row.Ratio <= 0 || row.CPUPerRec <= 0 {
				t.Errorf("%s: records %d, %.0f/s, ratio %.2f, CPU %.1f µs: want all above zero", row.Contender, row.Records, row.RecordsPerSec, row.Ratio, row.CPUPerRec)
			}
			switch {
			case row.Contender == "go-diskqueue":
				if row.SyncsPerRec != -1 {
					t.Errorf("go-diskqueue syncs/record %.3f, want -1 (not told)", row.SyncsPerRec)
				}
			case row.SyncsPerRec <= 0 || row.SyncsPerRec > 1:
				t.Errorf("%s: %.3f syncs/record, want in (0, 1]", row.Contender, row.SyncsPerRec)
			}
			if !strings.Contains(text, "| "+row.Case+" | "+row.Contender) {
				t.Errorf("the table has no row for %s", row.Contender)
			}
		}
		if !strings.Contains(text, "| disk, 256 B, 1 writer: outbox over the fdatasync loop |") {
			t.Errorf("the targets table has no 1-writer row")
		}
		if b := rep.Appends[0]; b.Ratio != 1 || b.SyncsPerRec != 1 {
			t.Errorf("baseline ratio %.3f, syncs/record %.3f: want 1 and 1", b.Ratio, b.SyncsPerRec)
		}
	})
	t.Run("open", func(t *testing.T) {
		o := rep.Open
		if o == nil {
			t.Fatal("no open figures")
		}
		// Every record and its header, plus at least one mark line.
		if o.Pending != cfg.openPending || o.LinesDecoded <= cfg.openTotal {
			t.Errorf("pending %d (want %d), lines decoded %d (want over %d)", o.Pending, cfg.openPending, o.LinesDecoded, cfg.openTotal)
		}
		if o.OutboxMS <= 0 || o.JSONMS <= 0 || o.Ratio <= 0 || o.HeapPerPend <= 0 {
			t.Errorf("open %.1f ms, decode %.1f ms, ratio %.2f, heap %.0f B: want all above zero", o.OutboxMS, o.JSONMS, o.Ratio, o.HeapPerPend)
		}
		if !strings.Contains(text, "| open + list pending, 1k records / 100 pending |") {
			t.Errorf("no open row in:\n%s", text)
		}
	})
	t.Run("drain", func(t *testing.T) {
		d := rep.Drain
		if d == nil {
			t.Fatal("no drain figures")
		}
		if d.Records != cfg.drainCompare || d.ProductPerSec <= 0 || d.RawPerSec <= 0 || d.Ratio <= 0 {
			t.Errorf("drain of %d: %.0f/s beside %.0f/s, ratio %.2f", d.Records, d.ProductPerSec, d.RawPerSec, d.Ratio)
		}
		if len(d.PerRecordUS) != len(cfg.backlogs) || d.GrowthRatio <= 0 {
			t.Fatalf("per-record costs %v, growth %.2f", d.PerRecordUS, d.GrowthRatio)
		}
		if len(d.RawPerRecordUS) != len(cfg.backlogs) || d.RawGrowthRatio <= 0 || slices.Contains(d.RawPerRecordUS, 0) {
			t.Fatalf("raw loop per-record costs %v, growth %.2f", d.RawPerRecordUS, d.RawGrowthRatio)
		}
		if !strings.Contains(text, "raw POST loop, same backlog: ") || !strings.Contains(text, "(the control plane's own growth)") {
			t.Errorf("the raw loop's per-backlog figures are not in the table")
		}
		for _, b := range []string{"500", "1k"} {
			if !strings.Contains(text, "| drain time per record, backlog "+b+" |") {
				t.Errorf("no drain row for backlog %s", b)
			}
		}
	})
	t.Run("compaction", func(t *testing.T) {
		c := rep.Compaction
		if c == nil {
			t.Fatal("no compaction figures")
		}
		if c.PauseUS <= 0 || c.TookUS < c.PauseUS {
			t.Errorf("pause %.0f µs, compaction %.0f µs: want a pause above zero within the compaction", c.PauseUS, c.TookUS)
		}
		if !strings.Contains(text, "| compaction pause (appends blocked)") {
			t.Errorf("no compaction row")
		}
	})
	t.Run("idle", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: the idle section builds the agent")
		}
		i := rep.Idle
		if i == nil {
			t.Fatal("no idle figures")
		}
		if i.RSSBytes < 1<<20 || i.CPUPercent < 0 || i.WindowS <= 0 {
			t.Errorf("idle agent: RSS %d B, CPU %.3f %%, window %.1f s", i.RSSBytes, i.CPUPercent, i.WindowS)
		}
		if i.RSSAnonBytes <= 0 || i.RSSFileBytes <= 0 || i.RSSAnonBytes+i.RSSFileBytes > i.RSSBytes+1<<20 {
			t.Errorf("idle agent: RssAnon %d B and RssFile %d B do not make up VmRSS %d B", i.RSSAnonBytes, i.RSSFileBytes, i.RSSBytes)
		}
		if !strings.Contains(text, "| idle agent run, RSS |") {
			t.Errorf("no idle row")
		}
	})
}

func TestOnly(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr bool
	}{
		{"", false},
		{"appends", false},
		{"open, drain", false},
		{"appends,nosuch", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var c config
			err := c.setOnly(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("setOnly(%q) = %v, want error: %v", tc.in, err, tc.wantErr)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestWithin checks that two contenders are compared round by round, not
// through their medians.
func TestWithin(t *testing.T) {
	a := &appendRow{Ratios: []float64{2, 9, 4}}
	b := &appendRow{Ratios: []float64{1, 3, 8}}
	// Per round: 2, 3, 0.5; the median is 2 (the medians' ratio, 4/3, is not).
	if got := within(a, b); got != 2 {
		t.Errorf("within = %v, want 2", got)
	}
}
