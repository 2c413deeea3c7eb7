package notify

import "sync"

// Result is how a try ended, as Counts counts it.
type Result string

// The results.
const (
	// Delivered: the target answered 2xx.
	Delivered Result = "delivered"
	// Failed: the try failed, and the record is tried again later.
	Failed Result = "failed"
	// GivenUp: the try failed and the record was older than MaxAge: it
	// was removed undelivered.
	GivenUp Result = "given_up"
	// Dropped: the record's target is no longer configured.
	Dropped Result = "dropped"
	// Folded: a rate limit held the record back, and folded it into one
	// sent when its window ends (gate.go).
	Folded Result = "folded"
)

// Results lists every result.
var Results = []Result{Delivered, Failed, GivenUp, Dropped, Folded}

// Counts counts the tries since the start by target and result, for
// metrics. It is safe for concurrent use.
type Counts struct {
	mu sync.Mutex
	m  map[string]map[Result]uint64
}

// NewCounts counts for targets: each has every result, 0 until counted,
// so that a metric exists before its first try.
func NewCounts(targets []Target) *Counts {
	c := &Counts{m: map[string]map[Result]uint64{}}
	for _, t := range targets {
		c.m[t.Name] = map[Result]uint64{}
	}
	return c
}

func (c *Counts) add(target string, r Result) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]map[Result]uint64{}
	}
	if c.m[target] == nil {
		c.m[target] = map[Result]uint64{}
	}
	c.m[target][r]++
}

// ByTarget is a copy of the counts: by target, by result, each result
// present.
func (c *Counts) ByTarget() map[string]map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]uint64, len(c.m))
	for t, byResult := range c.m {
		out[t] = make(map[string]uint64, len(Results))
		for _, r := range Results {
			out[t][string(r)] = byResult[r]
		}
	}
	return out
}
