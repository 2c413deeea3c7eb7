package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// cpKind is a kind of request the load makes, one row of its table.
type cpKind int

// The kinds of request, in the table's order.
const (
	kRegister cpKind = iota
	kHeartbeat
	kClaim
	kEvents
	kSubmit
	kList
	kEventsPage
	nKinds
)

var cpKindNames = [nKinds]string{"register", "heartbeat", "claim", "events", "submit", "list", "events-page"}

func (k cpKind) String() string { return cpKindNames[k] }

// recorder keeps every request's latency and outcome, by kind, while on.
// A request that ends after the recorder is switched off is not counted,
// nor is one of the fill (which uses no recorder).
type recorder struct {
	on      atomic.Bool
	mu      [nKinds]sync.Mutex
	lat     [nKinds][]time.Duration
	errs    [nKinds]atomic.Int64
	tooMany [nKinds]atomic.Int64
	// shed: 503 answers with Retry-After (the control plane's admission
	// control: answered at once, nothing done), apart from errors.
	shed [nKinds]atomic.Int64
	// lastErr keeps one error of each kind, to say what went wrong.
	lastErr [nKinds]atomic.Pointer[string]
}

func (r *recorder) add(k cpKind, d time.Duration, status int, retryAfter bool, err error) {
	if r == nil || k >= nKinds || !r.on.Load() {
		return
	}
	switch {
	case status == http.StatusTooManyRequests:
		r.tooMany[k].Add(1)
	case status == http.StatusServiceUnavailable && retryAfter:
		r.shed[k].Add(1)
	case err != nil:
		r.errs[k].Add(1)
		s := err.Error()
		r.lastErr[k].Store(&s)
	}
	r.mu[k].Lock()
	r.lat[k] = append(r.lat[k], d)
	r.mu[k].Unlock()
}

// reset returns the rows recorded so far and starts again from nothing.
func (r *recorder) reset() []cpKindRow {
	rows := r.rows()
	for k := range nKinds {
		r.mu[k].Lock()
		r.lat[k] = nil
		r.errs[k].Store(0)
		r.tooMany[k].Store(0)
		r.shed[k].Store(0)
		r.lastErr[k].Store(nil)
		r.mu[k].Unlock()
	}
	return rows
}

// requests is the number of requests recorded, of every kind.
func (r *recorder) requests() int {
	n := 0
	for k := range nKinds {
		r.mu[k].Lock()
		n += len(r.lat[k])
		r.mu[k].Unlock()
	}
	return n
}

// rows summarizes the recorded requests, one row per kind that made any.
func (r *recorder) rows() []cpKindRow {
	var out []cpKindRow
	for k := range nKinds {
		r.mu[k].Lock()
		lat := slices.Clone(r.lat[k])
		r.mu[k].Unlock()
		row := cpKindRow{Kind: k.String(), Count: len(lat), Errors: int(r.errs[k].Load()), TooMany: int(r.tooMany[k].Load()), Shed: int(r.shed[k].Load())}
		if p := r.lastErr[k].Load(); p != nil {
			row.LastError = firstLine(*p)
		}
		if len(lat) > 0 {
			slices.Sort(lat)
			row.P50MS = ms(quantile(lat, 0.50))
			row.P99MS = ms(quantile(lat, 0.99))
			row.MaxMS = ms(lat[len(lat)-1])
		}
		out = append(out, row)
	}
	return out
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted)) + 0.5)
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpClient makes the load's requests: one transport for every simulated
// agent, submitter and reader, with an idle connection kept for each (a
// real agent keeps its own), and pooled buffers, so that the figures are
// the server's and not the client's.
type cpClient struct {
	base string
	// bases, when set, are several replicas' addresses: each request goes
	// to the next (-cp-balance client).
	bases []string
	next  atomic.Uint64
	hc    *http.Client
	rec   *recorder
	// ctx ends the requests in flight when the window ends (a long poll
	// would hold it open for its whole wait); a request it cuts is not
	// counted.
	ctx context.Context
}

// maxClientConns caps the load's connections to the control plane (or
// the proxy): 10,000 agents with a heartbeat and a claim or a batch each
// in flight would hold 20,000.
const maxClientConns = 8000

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func newCPClient(base string, conns int) *cpClient {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 64,
		MaxIdleConnsPerHost: conns + 64,
		// Within this machine's open files limit (20,000, which a
		// process here may not raise), with the proxy's and the control
		// plane's ends: a request past it waits for a connection, its
		// time counted.
		MaxConnsPerHost:    maxClientConns,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
	}
	// A request's timeout is the agent's own (its client's default, 30 s):
	// a request the control plane holds longer ends as the agent's would.
	return &cpClient{base: base, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, ctx: context.Background()}
}

func (c *cpClient) close() { c.hc.CloseIdleConnections() }

// errStatus is an answer other than 2xx; retryAfter its Retry-After
// (seconds), 0 when none.
type errStatus struct {
	status     int
	body       string
	retryAfter time.Duration
}

// shedWait is how long a request the control plane shed waits before it
// is sent again, as the agent waits: its Retry-After and up to half as
// much again at random; ok is false when err is not a shed.
func shedWait(err error) (time.Duration, bool) {
	var es *errStatus
	if !errors.As(err, &es) || es.retryAfter <= 0 || (es.status != http.StatusServiceUnavailable && es.status != http.StatusTooManyRequests) {
		return 0, false
	}
	return es.retryAfter + rand.N(es.retryAfter/2+1), true
}

func (e *errStatus) Error() string { return fmt.Sprintf("answered %d: %s", e.status, e.body) }

// call sends one request, in (JSON-encoded unless it is []byte) as its
// body, decodes a 2xx answer into out when out is not nil, and records
// the request under kind k (its time: from sending to the answer's last
// byte). It returns the answer's Next-After header too.
func (c *cpClient) call(k cpKind, method, path, token string, in, out any) (next string, err error) {
	var body io.Reader
	var enc *bytes.Buffer
	if in != nil {
		enc = bufPool.Get().(*bytes.Buffer)
		enc.Reset()
		defer bufPool.Put(enc)
		if b, ok := in.([]byte); ok {
			enc.Write(b)
		} else if err := json.NewEncoder(enc).Encode(in); err != nil {
			return "", err
		}
		body = bytes.NewReader(enc.Bytes())
	}
	base := c.base
	if len(c.bases) > 0 {
		base = c.bases[c.next.Add(1)%uint64(len(c.bases))]
	}
	req, err := http.NewRequestWithContext(c.ctx, method, base+path, body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	ans := bufPool.Get().(*bytes.Buffer)
	ans.Reset()
	defer bufPool.Put(ans)
	start := time.Now()
	resp, err := c.hc.Do(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
		_, err = ans.ReadFrom(resp.Body)
		resp.Body.Close()
		next = resp.Header.Get("Next-After")
		if err == nil && status/100 != 2 {
			es := &errStatus{status: status, body: firstLine(string(bytes.TrimSpace(ans.Bytes())))}
			if n, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && n > 0 {
				es.retryAfter = time.Duration(n) * time.Second
			}
			err = es
		}
	}
	if err == nil || c.ctx.Err() == nil {
		_, shed := shedWait(err)
		c.rec.add(k, time.Since(start), status, shed, err)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	if out != nil {
		if err := json.Unmarshal(ans.Bytes(), out); err != nil {
			return "", fmt.Errorf("%s %s: bad answer: %w", method, path, err)
		}
	}
	return next, nil
}
