package main

import (
	"fmt"
	"io"
	"strings"
)

// printReport writes the figures as markdown.
func printReport(w io.Writer, r *report) {
	m := r.Machine
	fmt.Fprintf(w, "%s mode, %d round%s, %s UTC, took %.0f s\n\n", r.Mode, r.Rounds, plural(r.Rounds), r.Date.Format("2006-01-02 15:04"), r.Took)
	fmt.Fprintf(w, "machine: %d CPUs, %s, kernel %s, data disk %s (%s), tmpfs %s; 1-minute load average %s\n", m.CPUs, m.Model, m.Kernel, m.DataFS, m.DataDir, m.TmpFS, m.Load)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
	if len(r.Appends) > 0 {
		fmt.Fprintf(w, "\n### Durable appends\n\nratio: records/s over the %s's in the same case and round, median over rounds; the per-round ratios beside it.\n\n", baselineName)
		fmt.Fprintln(w, "| case | contender | ratio | per round | records/s | syncs/record | CPU µs/record |")
		fmt.Fprintln(w, "|---|---|---:|---|---:|---:|---:|")
		for _, a := range r.Appends {
			syncs := "n/a"
			if a.SyncsPerRec >= 0 {
				syncs = fmt.Sprintf("%.3f", a.SyncsPerRec)
			}
			name := a.Contender
			if name == "go-diskqueue" {
				name += " (not durable at ack)"
			}
			fmt.Fprintf(w, "| %s | %s | %.2fx | %s | %.0f | %s | %.1f |\n", a.Case, name, a.Ratio, ratios(a.Ratios), a.RecordsPerSec, syncs, a.CPUPerRec)
		}
	}
	defer printCapture(w, r)
	defer printCPLoad(w, r) // after the targets
	defer printTargets(w, r)
	if r.Open == nil && r.Drain == nil && r.Compaction == nil && r.Idle == nil {
		return
	}
	fmt.Fprintln(w, "\n### Open, drain, compaction, idle\n\n| measure | value | beside | ratio (median) | per round |")
	fmt.Fprintln(w, "|---|---:|---|---:|---|")
	if o := r.Open; o != nil {
		fmt.Fprintf(w, "| open + list pending, %s records / %s pending | %.0f ms | decode each line once (%d lines): %.0f ms | %.2fx time | %s |\n",
			count(o.Records), count(o.Pending), o.OutboxMS, o.LinesDecoded, o.JSONMS, o.Ratio, ratios(o.Ratios))
		fmt.Fprintf(w, "| heap per pending record (open outbox, after GC) | %.0f B | | | |\n", o.HeapPerPend)
		fmt.Fprintf(w, "| RSS per pending record (VmRSS growth, garbage returned) | %.0f B | | | |\n", o.RSSPerPend)
		fmt.Fprintf(w, "| peak RSS per pending record (VmHWM over VmRSS before open) | %.0f B | | | |\n", o.PeakPerPend)
	}
	if d := r.Drain; d != nil {
		fmt.Fprintf(w, "| drain %s pending (agent.Replay) | %.0f records/s | raw POST loop, batches of 500: %.0f records/s | %.2fx throughput | %s |\n",
			count(d.Records), d.ProductPerSec, d.RawPerSec, d.Ratio, ratios(d.Ratios))
		for i, b := range d.Backlogs {
			if i < len(d.RawPerRecordUS) {
				fmt.Fprintf(w, "| drain time per record, backlog %s | %.1f µs | raw POST loop, same backlog: %.1f µs | %.2fx time | %d round%s |\n",
					count(b), d.PerRecordUS[i], d.RawPerRecordUS[i], d.PerRecordUS[i]/d.RawPerRecordUS[i], d.GrowthRoundsOf[i], plural(d.GrowthRoundsOf[i]))
			} else {
				fmt.Fprintf(w, "| drain time per record, backlog %s | %.1f µs | | | %d round%s |\n", count(b), d.PerRecordUS[i], d.GrowthRoundsOf[i], plural(d.GrowthRoundsOf[i]))
			}
		}
		if len(d.Backlogs) > 1 {
			raw := ""
			if d.RawGrowthRatio > 0 {
				raw = fmt.Sprintf("raw POST loop: %.2fx (the control plane's own growth)", d.RawGrowthRatio)
			}
			fmt.Fprintf(w, "| per-record cost, %s over %s backlog | %.2fx | %s | | |\n", count(d.Backlogs[len(d.Backlogs)-1]), count(d.Backlogs[0]), d.GrowthRatio, raw)
		}
	}
	if c := r.Compaction; c != nil {
		fmt.Fprintf(w, "| compaction pause (appends blocked), %s live records of 256 B, 8 writers | %.0f µs mean (max %.0f) | whole compaction: %.0f µs | | %d compactions a round |\n",
			count(c.Live), c.PauseUS, c.MaxPauseUS, c.TookUS, c.Compactions)
	}
	if i := r.Idle; i != nil {
		fmt.Fprintf(w, "| idle agent run, CPU over %.0f s | %.3f %% of a core | | | |\n", i.WindowS, i.CPUPercent)
		parts := ""
		if i.RSSAnonBytes > 0 {
			parts = fmt.Sprintf("its own (RssAnon): %.1f MB; mapped files, its binary (RssFile): %.1f MB", float64(i.RSSAnonBytes)/1e6, float64(i.RSSFileBytes)/1e6)
		}
		fmt.Fprintf(w, "| idle agent run, RSS | %.1f MB | %s | | |\n", float64(i.RSSBytes)/1e6, parts)
	}
}

func ratios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}
