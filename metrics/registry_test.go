package metrics

import (
	"bytes"
	"maps"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// goroutines observe always parse, and each is of one set of
// observations: every observation is 1, so the sum is the count.
func TestAHistogramScrapedWhileObservedIsConsistent(t *testing.T) {
	var reg Registry
	h := &histogramFamily{"test_seconds", "Latency.", newHistogram([]float64{0.5, 2})}
	reg.add(h.collect)
	var stop atomic.Bool
	var observed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				h.observe(1)
				observed.Add(1)
			}
		})
	}
	scrape := func() uint64 {
		hist := parse(t, reg.appendTo(nil))["test_seconds"].GetMetric()[0].GetHistogram()
		if float64(hist.GetSampleCount()) != hist.GetSampleSum() {
			t.Fatalf("one scrape says count %d, sum %v", hist.GetSampleCount(), hist.GetSampleSum())
		}
		return hist.GetSampleCount()
	}
	// The scrapes start once observations have: they overlap them
	// however fast or slow the machine.
	for observed.Load() == 0 {
		runtime.Gosched()
	}
	for range 2000 {
		scrape()
	}
	stop.Store(true)
	wg.Wait()
	if n := scrape(); n != uint64(observed.Load()) {
		t.Errorf("count %d after every observation, want %d", n, observed.Load())
	}
}

// TestLabelValuesThatAreNotUTF8: Prometheus refuses a whole scrape over
// one label value that is not UTF-8, so its bad bytes are replaced; and
// two sets of values never share a series.
func TestLabelValuesThatAreNotUTF8(t *testing.T) {
	var reg Registry
	c := newCounterVec("test_total", "A counter.", "a", "b")
	c.with("bad\xffvalue", "x").Add(1)
	c.with("x\xff", "y").Add(2)
	c.with("x", "\xffy").Add(3)
	reg.add(c.collect)
	got := parse(t, reg.appendTo(nil))["test_total"].GetMetric()
	values := map[string]float64{}
	for _, m := range got {
		values[label(m, "a")+"|"+label(m, "b")] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"bad\uFFFDvalue|x": 1, "x\uFFFD|y": 2, "x|\uFFFDy": 3}
	if !maps.Equal(values, want) {
		t.Errorf("series %v, want %v", values, want)
	}
}

// TestRuntimeFamilies: the Go runtime's and the process's figures are
// there, under the Go client's names, with values that make sense.
func TestRuntimeFamilies(t *testing.T) {
	var reg Registry
	reg.add(collectRuntime)
	got := parse(t, reg.appendTo(nil))
	value := func(name string) float64 {
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
	// Every family the Go client's default Go and process collectors
	// export (but process_network_*), and with a value above 0 where one
	// must be.
	positive := []string{"go_goroutines", "go_threads", "go_sched_gomaxprocs_threads", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes",
		"go_memstats_alloc_bytes", "go_memstats_alloc_bytes_total", "go_memstats_buck_hash_sys_bytes", "go_memstats_frees_total",
		"go_memstats_gc_sys_bytes", "go_memstats_heap_alloc_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_inuse_bytes",
		"go_memstats_heap_objects", "go_memstats_heap_sys_bytes", "go_memstats_mallocs_total", "go_memstats_mcache_inuse_bytes",
		"go_memstats_mcache_sys_bytes", "go_memstats_mspan_inuse_bytes", "go_memstats_mspan_sys_bytes", "go_memstats_next_gc_bytes",
		"go_memstats_other_sys_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_stack_sys_bytes", "go_memstats_sys_bytes",
		"process_cpu_seconds_total", "process_max_fds", "process_virtual_memory_max_bytes", "process_open_fds", "process_start_time_seconds"}
	if runtime.GOOS == "linux" {
		positive = append(positive, "process_resident_memory_bytes", "process_virtual_memory_bytes")
	}
	for _, name := range positive {
		if v := value(name); !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	for _, name := range []string{"process_cpu_seconds_total", "go_memstats_alloc_bytes_total", "go_memstats_mallocs_total", "go_memstats_frees_total"} {
		if typ := got[name].GetType(); typ != dto.MetricType_COUNTER {
			t.Errorf("%s is a %v, want a counter", name, typ)
		}
	}
	if v := value("go_gc_gogc_percent"); os.Getenv("GOGC") == "" && v != 100 {
		t.Errorf("go_gc_gogc_percent = %v with GOGC unset, want 100", v)
	}
	// /proc/self/stat counts in ticks of 10 ms; the test binary started
	// before this test, and within the hour.
	if v, now := value("process_start_time_seconds"), float64(time.Now().UnixNano())/1e9; v > now+0.02 || v < now-3600 {
		t.Errorf("process_start_time_seconds = %v, now is %v", v, now)
	} else if init := float64(started.UnixNano()) / 1e9; runtime.GOOS == "linux" && (v > init+0.02 || v < init-60) {
		t.Errorf("process_start_time_seconds = %v from /proc, the package's initialisation was at %v", v, init)
	}
	if rss, statm := value("process_resident_memory_bytes"), residentFromStatm(t); runtime.GOOS == "linux" && (rss < statm/2 || rss > statm*2) {
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
