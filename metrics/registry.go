package metrics

import (
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// The exposition is written here, in the Prometheus text format (0.0.4),
// rather than by the Prometheus Go client: the client and the protobuf
// runtime it links cost the idle agent about 2 MB of resident memory
// (their code and tables, touched by their package initialisers whether
// or not metrics are on), a sixth of its footprint. What the agent needs
// is small: counters and histograms with fixed label sets, gauges read at
// scrape time, and the runtime's and the process's figures. The tests
// parse every scrape with Prometheus' own parser.

// Registry is one process's metrics: it writes every family at each
// scrape, in name order, each with its HELP and TYPE lines.
type Registry struct {
	collectors []func(*scrape)
}

// add has collect write its families at each scrape.
func (r *Registry) add(collect func(*scrape)) { r.collectors = append(r.collectors, collect) }

// contentType is the text format's media type.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeHTTP answers a scrape.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", contentType)
	r.WriteTo(w) // a client gone is not this server's concern
}

// WriteTo writes a scrape to w.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r.appendTo(nil))
	return int64(n), err
}

// appendTo appends a scrape to b.
func (r *Registry) appendTo(b []byte) []byte {
	var s scrape
	for _, collect := range r.collectors {
		collect(&s)
	}
	slices.SortStableFunc(s.families, func(x, y *family) int { return strings.Compare(x.name, y.name) })
	for _, f := range s.families {
		b = append(b, f.text...)
	}
	return b
}

// scrape is one exposition being written: families, each complete.
type scrape struct {
	families []*family
}

// family is one family's text: HELP, TYPE and its samples.
type family struct {
	name string
	text []byte
}

// family starts a family; the samples that follow are its own.
func (s *scrape) family(name, typ, help string) {
	b := append([]byte("# HELP "), name...)
	b = append(b, ' ')
	b = appendEscaped(b, help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	b = append(b, '\n')
	s.families = append(s.families, &family{name: name, text: b})
}

// single writes a family of one sample without labels.
func (s *scrape) single(name, typ, help string, v float64) {
	s.family(name, typ, help)
	s.sample("", v)
}

// sample writes a sample of the family last started: its name and suffix
// (_bucket, _sum, _count or none), its labels as name, value pairs, and v.
func (s *scrape) sample(suffix string, v float64, labels ...string) {
	f := s.families[len(s.families)-1]
	b := append(f.text, f.name...)
	b = append(b, suffix...)
	if len(labels) > 0 {
		b = append(b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, labels[i]...)
			b = append(b, `="`...)
			b = appendEscaped(b, labels[i+1], true)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	f.text = append(b, '\n')
}

// appendEscaped appends s escaped as the text format wants: a backslash
// and a line feed always (HELP text), a double quote too in a label value.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat appends v as the text format writes numbers.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// vec holds a family's series by their label values, made on first use.
// Series are few (every label takes its values from a closed set), so a
// mutex and a map are all it needs.
type vec[S any] struct {
	labels    []string
	byName    []int // labels' indices in name order
	newSeries func() *S
	mu        sync.Mutex
	series    map[string]*seriesOf[S]
}

type seriesOf[S any] struct {
	values []string
	s      *S
}

func newVec[S any](labels []string, newSeries func() *S) *vec[S] {
	byName := make([]int, len(labels))
	for i := range byName {
		byName[i] = i
	}
	slices.SortFunc(byName, func(i, j int) int { return strings.Compare(labels[i], labels[j]) })
	return &vec[S]{labels: labels, byName: byName, newSeries: newSeries, series: map[string]*seriesOf[S]{}}
}

// with is the series of these label values, one per label. A value that
// is not UTF-8 has its bad bytes replaced (U+FFFD): Prometheus refuses a
// whole scrape over one such value. So no value holds the byte 0xff, and
// it can join them into a key.
func (v *vec[S]) with(values ...string) *S {
	for i, val := range values {
		if !utf8.ValidString(val) {
			values = slices.Clone(values)
			values[i] = strings.ToValidUTF8(val, "\uFFFD")
		}
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	se := v.series[key]
	if se == nil {
		se = &seriesOf[S]{values: slices.Clone(values), s: v.newSeries()}
		v.series[key] = se
	}
	return se.s
}

// each calls f for every series in the order of their label values, with
// the labels as name, value pairs in name order (as the Go client writes
// them).
func (v *vec[S]) each(f func(labels []string, s *S)) {
	v.mu.Lock()
	all := make([]*seriesOf[S], 0, len(v.series))
	for _, se := range v.series {
		all = append(all, se)
	}
	v.mu.Unlock()
	slices.SortFunc(all, func(x, y *seriesOf[S]) int { return slices.Compare(x.values, y.values) })
	for _, se := range all {
		labels := make([]string, 0, 2*len(v.labels))
		for _, i := range v.byName {
			labels = append(labels, v.labels[i], se.values[i])
		}
		f(labels, se.s)
	}
}

// counterVec is a counter family with labels.
type counterVec struct {
	name, help string
	*vec[atomic.Uint64]
}

func newCounterVec(name, help string, labels ...string) *counterVec {
	return &counterVec{name, help, newVec(labels, func() *atomic.Uint64 { return new(atomic.Uint64) })}
}

func (c *counterVec) collect(s *scrape) {
	s.family(c.name, "counter", c.help)
	c.each(func(labels []string, n *atomic.Uint64) { s.sample("", float64(n.Load()), labels...) })
}

// histogram counts observations into buckets by upper bound. A mutex
// keeps each scrape's buckets, sum and count of the same observations;
// observations are a few thousand a second at most (group commits,
// requests), so it is never contended for long.
type histogram struct {
	bounds []float64 // upper bounds, ascending; +Inf is implied
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf's
	sum    float64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// observe counts v in the first bucket whose bound is at least v.
func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.mu.Unlock()
}

// write writes the histogram's samples with labels.
func (h *histogram) write(s *scrape, labels []string) {
	h.mu.Lock()
	counts, sum := slices.Clone(h.counts), h.sum
	h.mu.Unlock()
	withLE := append(slices.Clip(labels), "le", "")
	var cum uint64
	for i, n := range counts {
		cum += n
		withLE[len(withLE)-1] = "+Inf"
		if i < len(h.bounds) {
			withLE[len(withLE)-1] = strconv.FormatFloat(h.bounds[i], 'g', -1, 64)
		}
		s.sample("_bucket", float64(cum), withLE...)
	}
	s.sample("_sum", sum, labels...)
	s.sample("_count", float64(cum), labels...)
}

// histogramFamily is a histogram family without labels.
type histogramFamily struct {
	name, help string
	*histogram
}

func (h *histogramFamily) collect(s *scrape) {
	s.family(h.name, "histogram", h.help)
	h.write(s, nil)
}

// histogramVec is a histogram family with labels.
type histogramVec struct {
	name, help string
	*vec[histogram]
}

func newHistogramVec(name, help string, bounds []float64, labels ...string) *histogramVec {
	return &histogramVec{name, help, newVec(labels, func() *histogram { return newHistogram(bounds) })}
}

func (h *histogramVec) collect(s *scrape) {
	s.family(h.name, "histogram", h.help)
	h.each(func(labels []string, hist *histogram) { hist.write(s, labels) })
}

// exponential is n bucket bounds from start, each factor times the last.
func exponential(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}
