package metrics

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parse parses a scrape with Prometheus' own parser.
func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parse the scrape: %v\n%s", err, text)
	}
	return families
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestScrapeReadsBackAsWritten: what the registry writes, Prometheus'
// parser reads back the same: help and label values with the characters
// the format escapes, counters, and a histogram whose observations fall
// below, on, between and above its bounds.
func TestScrapeReadsBackAsWritten(t *testing.T) {
	var reg Registry
	odd := "a \"quoted\" back\\slash,\nnew line and é"
	c := newCounterVec("test_things_total", "Things, with a back\\slash and a\nline break.", "kind", "code")
	c.with(odd, "x").Add(3)
	c.with("plain", "y").Add(1 << 40)
	h := &histogramFamily{"test_seconds", "Latency.", newHistogram([]float64{0.5, 1, 2})}
	for _, v := range []float64{0.1, 0.5, 0.7, 1, 5, 10} {
		h.observe(v)
	}
	hv := newHistogramVec("test_vec_seconds", "Latency by route.", []float64{1}, "route")
	hv.with("GET /v1/tasks/{id}").observe(0.25)
	reg.add(c.collect)
	reg.add(h.collect)
	reg.add(hv.collect)
	var text bytes.Buffer
	if _, err := reg.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	got := parse(t, text.Bytes())
	// Label names in name order, as the Go client writes them (people grep).
	if want := `test_things_total{code="y",kind="plain"} 1.099511627776e+12`; !strings.Contains(text.String(), want) {
		t.Errorf("no line %s in\n%s", want, text.String())
	}

	f := got["test_things_total"]
	if f.GetType() != dto.MetricType_COUNTER || f.GetHelp() != "Things, with a back\\slash and a\nline break." {
		t.Errorf("test_things_total: type %v, help %q", f.GetType(), f.GetHelp())
	}
	values := map[string]float64{}
	for _, m := range f.GetMetric() {
		values[label(m, "kind")+"|"+label(m, "code")] = m.GetCounter().GetValue()
	}
	if values[odd+"|x"] != 3 || values["plain|y"] != 1<<40 || len(values) != 2 {
		t.Errorf("test_things_total read back as %v", values)
	}

	hist := got["test_seconds"].GetMetric()[0].GetHistogram()
	var cum []uint64
	for _, b := range hist.GetBucket() {
		cum = append(cum, b.GetCumulativeCount())
	}
	// 0.1 and 0.5 are at most 0.5; 0.7 and 1 at most 1; none in (1, 2];
	// 5 and 10 only under +Inf.
	if want := []uint64{2, 4, 4, 6}; !slices.Equal(cum, want) {
		t.Errorf("cumulative buckets %v, want %v", cum, want)
	}
	if hist.GetSampleCount() != 6 || hist.GetSampleSum() != 17.3 {
		t.Errorf("count %d, sum %v; want 6, 17.3", hist.GetSampleCount(), hist.GetSampleSum())
	}
	vm := got["test_vec_seconds"].GetMetric()
	if len(vm) != 1 || label(vm[0], "route") != "GET /v1/tasks/{id}" || vm[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("test_vec_seconds: %v", vm)
	}
}

// TestFamiliesComeOnceInNameOrder: each family is written whole, once,
// and families are in name order, however they were added.
func TestFamiliesComeOnceInNameOrder(t *testing.T) {
	var reg Registry
	for _, name := range []string{"zeta_total", "alpha_total", "mid_total"} {
		c := newCounterVec(name, "A counter.", "k")
		c.with("a").Add(1)
		c.with("b").Add(2)
		reg.add(c.collect)
	}
	reg.add(collectRuntime)
	var names []string
	for line := range strings.Lines(string(reg.appendTo(nil))) {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			names = append(names, strings.Fields(rest)[0])
		}
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("families in this order, want sorted and each once: %v", names)
	}
}

// TestAHistogramScrapedWhileObservedIsConsistent: scrapes taken while
// goroutines observe always parse, their buckets never decrease, and
// their count is the +Inf bucket's; the last scrape counts everything.
func TestAHistogramScrapedWhileObservedIsConsistent(t *testing.T) {
	var reg Registry
	h := &histogramFamily{"test_seconds", "Latency.", newHistogram(exponential(0.001, 2, 10))}
	reg.add(h.collect)
	const writers, each = 4, 5000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				h.observe(float64((w*each+i)%2000) / 1000)
			}
		})
	}
	check := func() uint64 {
		hist := parse(t, reg.appendTo(nil))["test_seconds"].GetMetric()[0].GetHistogram()
		prev := uint64(0)
		for _, b := range hist.GetBucket() {
			if b.GetCumulativeCount() < prev {
				t.Fatalf("bucket %v holds %d, below the one before it (%d)", b.GetUpperBound(), b.GetCumulativeCount(), prev)
			}
			prev = b.GetCumulativeCount()
		}
		if hist.GetSampleCount() < prev {
			t.Fatalf("count %d below the last bucket's %d", hist.GetSampleCount(), prev)
		}
		return hist.GetSampleCount()
	}
	for range 200 {
		check()
	}
	wg.Wait()
	if n := check(); n != writers*each {
		t.Errorf("count %d after every observation, want %d", n, writers*each)
	}
}

// TestRuntimeFamilies: the Go runtime's and the process's figures are
// there, under the Go client's names, with values that make sense.
func TestRuntimeFamilies(t *testing.T) {
	var reg Registry
	reg.add(collectRuntime)
	got := parse(t, reg.appendTo(nil))
	gauge := func(name string) float64 {
		f := got[name]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Errorf("no single series of %s", name)
			return math.NaN()
		}
		m := f.GetMetric()[0]
		if f.GetType() == dto.MetricType_COUNTER {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}
	positive := []string{"go_goroutines", "go_sched_gomaxprocs_threads", "go_memstats_alloc_bytes", "go_memstats_alloc_bytes_total",
		"go_memstats_sys_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_next_gc_bytes",
		"process_max_fds"}
	if runtime.GOOS == "linux" {
		positive = append(positive, "process_open_fds", "process_resident_memory_bytes", "process_virtual_memory_bytes", "go_threads")
	}
	for _, name := range positive {
		if v := gauge(name); !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if v := gauge("process_cpu_seconds_total"); !(v >= 0) || got["process_cpu_seconds_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("process_cpu_seconds_total = %v (%v)", v, got["process_cpu_seconds_total"].GetType())
	}
	if v := gauge("process_start_time_seconds"); v > float64(time.Now().Unix()+1) || v < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("process_start_time_seconds = %v, now is %d", v, time.Now().Unix())
	}
	if rss, statm := gauge("process_resident_memory_bytes"), residentFromStatm(t); runtime.GOOS == "linux" && (rss < statm/2 || rss > statm*2) {
		t.Errorf("process_resident_memory_bytes = %v, /proc/self/statm says %v", rss, statm)
	}
	if m := got["go_info"].GetMetric(); len(m) != 1 || label(m[0], "version") != runtime.Version() {
		t.Errorf("go_info: %v, want version %s", m, runtime.Version())
	}
	runtime.GC()
	gc := parse(t, reg.appendTo(nil))["go_gc_duration_seconds"]
	if s := gc.GetMetric()[0].GetSummary(); gc.GetType() != dto.MetricType_SUMMARY || s.GetSampleCount() == 0 || len(s.GetQuantile()) != 5 {
		t.Errorf("go_gc_duration_seconds after a GC: %v", gc)
	}
}

// residentFromStatm is the resident size /proc/self/statm gives, another
// file than the one the collector reads; 0 off Linux.
func residentFromStatm(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	pages, err := strconv.ParseFloat(strings.Fields(string(b))[1], 64)
	if err != nil {
		t.Fatalf("/proc/self/statm: %v", err)
	}
	return pages * float64(os.Getpagesize())
}

// TestTheAgentLinksNoPrometheusClient: the agent's binary holds neither
// the Prometheus Go client nor the protobuf runtime (see registry.go for
// why); only the tests use Prometheus' parser.
func TestTheAgentLinksNoPrometheusClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/edgeagent/agent/cmd/agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for pkg := range strings.Lines(string(out)) {
		if strings.HasPrefix(pkg, "github.com/prometheus/") || strings.HasPrefix(pkg, "google.golang.org/protobuf") {
			t.Errorf("the agent links %s", strings.TrimSpace(pkg))
		}
	}
}
