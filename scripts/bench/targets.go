package main

import (
	"fmt"
	"io"
	"strings"
)

// target is one of issue 13's targets, as this run measured it.
type target struct {
	what     string
	measured string
	want     string
	met      bool
}

// row finds a contender's row of one case.
func row(rows []appendRow, cas, contender string) *appendRow {
	for i := range rows {
		if rows[i].Case == cas && rows[i].Contender == contender {
			return &rows[i]
		}
	}
	return nil
}

// within is the median over rounds of a's records/s over b's, both
// measured in the same round of the same case.
func within(a, b *appendRow) float64 {
	var xs []float64
	for i := range min(len(a.Ratios), len(b.Ratios)) {
		if b.Ratios[i] > 0 {
			xs = append(xs, a.Ratios[i]/b.Ratios[i])
		}
	}
	return median(xs)
}

// targets checks the figures against issue 13's targets.
func targets(r *report) []target {
	var ts []target
	check := func(what string, v float64, format, want string, met bool) {
		ts = append(ts, target{what, fmt.Sprintf(format, v), want, met})
	}
	for _, size := range []int{256, 4096} {
		for _, w := range []int{1, 8, 64} {
			cas := appendCase{fs: "disk", size: size, writers: w}.String()
			ob := row(r.Appends, cas, "outbox")
			if ob == nil {
				continue
			}
			if w == 1 {
				check(cas+": outbox over the fdatasync loop", ob.Ratio, "%.2fx", "≥ 0.95x", ob.Ratio >= 0.95)
				continue
			}
			if gc := row(r.Appends, cas, "group commit"); gc != nil {
				v := within(ob, gc)
				check(cas+": outbox over the group commit", v, "%.2fx", "≥ 0.95x", v >= 0.95)
			}
			if wb := row(r.Appends, cas, "tidwall/wal batch"); wb != nil {
				v := within(ob, wb)
				check(cas+": outbox over tidwall/wal batch", v, "%.2fx", "≥ 1.0x", v >= 1)
			}
		}
	}
	worst, worstCase := 0.0, ""
	for _, a := range r.Appends {
		if a.Contender != "outbox" || !strings.HasPrefix(a.Case, "tmpfs") {
			continue
		}
		if gc := row(r.Appends, a.Case, "group commit"); gc != nil && gc.CPUPerRec > 0 {
			if v := a.CPUPerRec / gc.CPUPerRec; v > worst {
				worst, worstCase = v, a.Case
			}
		}
	}
	if worstCase != "" {
		check("tmpfs: outbox CPU per record over the group commit's, worst case ("+worstCase+")", worst, "%.1fx", "≤ 2x", worst <= 2)
	}
	if o := r.Open; o != nil {
		check("open + list pending over decoding each line", o.Ratio, "%.2fx", "≤ 0.5x", o.Ratio <= 0.5)
		check("heap per pending record", o.HeapPerPend, "%.0f B", "≤ 200 B", o.HeapPerPend <= 200)
	}
	if d := r.Drain; d != nil {
		check("drain over the raw POST loop", d.Ratio, "%.2fx", "≥ 0.9x", d.Ratio >= 0.9)
		if len(d.Backlogs) > 1 {
			check(fmt.Sprintf("drain per record, %s over %s backlog", count(d.Backlogs[len(d.Backlogs)-1]), count(d.Backlogs[0])), d.GrowthRatio, "%.2fx", "≤ 1.2x", d.GrowthRatio <= 1.2)
		}
	}
	return ts
}

func printTargets(w io.Writer, r *report) {
	ts := targets(r)
	if len(ts) == 0 {
		return
	}
	fmt.Fprintln(w, "\n### Issue 13's targets\n\nRatios of two contenders are taken within each round, then the median.\n\n| target | measured | want | met |\n|---|---:|---|---|")
	for _, t := range ts {
		met := "no"
		if t.met {
			met = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.what, t.measured, t.want, met)
	}
	if i := r.Idle; i != nil {
		fmt.Fprintf(w, "| idle agent: CPU, RSS | %.3f %%, %.1f MB | no worse than before (issue 13: 0.03 %%, 11 MB) | compare |\n", i.CPUPercent, float64(i.RSSBytes)/1e6)
	}
}
