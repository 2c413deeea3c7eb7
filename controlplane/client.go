package controlplane

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
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/state"
)

// ClientOptions tune a Client. Zero fields take the defaults their comments
// give.
type ClientOptions struct {
	// Timeout bounds one HTTP request. Default 30 s.
	Timeout time.Duration
	// Insecure allows http:// to a host that is not loopback.
	Insecure bool
	// Tries is how many times a request that is safe to repeat (events,
	// heartbeats, reads) is tried on a transient failure, with exponential
	// backoff and jitter from 200 ms. Default 3. Claims and task creation
	// are tried once: repeating them could claim or create twice.
	Tries uint
	// UserAgent is sent with every request.
	UserAgent string
	// AgentID, when set, makes this an agent's client: the agent
	// endpoints (heartbeat, claim, release, events) go with the agent's own
	// token, AgentToken, registered with the registration secret (the
	// client's token) when there is none yet, or when the control plane no
	// longer knows it (an operator revoked it, or the control plane lost
	// its registry). The control plane refuses (409) to register an id
	// that another token holds.
	// SaveAgentToken keeps a new one (the agent writes it to its data
	// directory).
	AgentID        string
	AgentToken     string
	SaveAgentToken func(token string) error
	// Moved, if set, is told when the client moves from one control plane
	// replica to the next (see NewClient): the addresses, no secret.
	Moved func(from, to string, why error)
}

// Client talks to a control plane. It never puts its token in an error or
// a log.
type Client struct {
	// bases are the replicas' addresses; cur is the one the client talks
	// to, until it fails (see NewClient).
	bases []*url.URL
	cur   atomic.Int32
	token string // a person's token, or an agent's registration secret
	http  *http.Client
	opts  ClientOptions

	regMu    sync.Mutex // one registration at a time
	agentMu  sync.Mutex
	agentTok string
}

// errRedirect: the control plane answered with a redirect, which the
// client refuses to follow (it would carry the token along).
var errRedirect = errors.New("the control plane redirected")

// ErrUnauthorized: the control plane refused the token.
var ErrUnauthorized = errors.New("the control plane refused the token (401 Unauthorized)")

// errNotEnrolled: the control plane refused to register the agent: its
// id is held by another token (409), or the token given is not the
// registration secret (403). Trying again does not help; a person must act.
var errNotEnrolled = errors.New("the control plane refused to register this agent")

// Refused reports whether err says the control plane will not take this
// client's credentials, now or later: an agent stops on it.
func Refused(err error) bool {
	return errors.Is(err, ErrUnauthorized) || errors.Is(err, errNotEnrolled)
}

// APIError is an answer other than 2xx.
type APIError struct {
	Status  int
	Message string
	// RetryAfter is the wait a 429 or 503 answer asked for (its
	// Retry-After), 0 when none: the control plane shed the request
	// and did nothing of it.
	RetryAfter time.Duration
}

// maxRetryAfter bounds the wait a Retry-After may ask of the client.
const maxRetryAfter = time.Minute

// retryAfterOf reads a Retry-After header: seconds, or an HTTP date.
func retryAfterOf(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// Shed reports whether err is the control plane shedding the request
// (429 or 503 with Retry-After: it did nothing of it), and how long to
// wait before sending it again: what it asked, plus up to half as much
// again at random, so that the agents it shed do not all come back at
// the same moment.
func Shed(err error) (time.Duration, bool) {
	var ae *APIError
	if !errors.As(err, &ae) || ae.RetryAfter <= 0 || (ae.Status != http.StatusTooManyRequests && ae.Status != http.StatusServiceUnavailable) {
		return 0, false
	}
	return ae.RetryAfter + rand.N(ae.RetryAfter/2+1), true
}

func (e *APIError) Error() string {
	return fmt.Sprintf("control plane answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Unwrap makes errors.Is(err, ErrUnauthorized) true for a 401.
func (e *APIError) Unwrap() error {
	if e.Status == http.StatusUnauthorized {
		return ErrUnauthorized
	}
	return nil
}

// statusOf is the status of an APIError, else 0.
func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// Transient reports whether a request that failed with err may succeed
// later: network failures, timeouts, 429 and 5xx answers.
func Transient(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusTooManyRequests || ae.Status >= 500
	}
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errRedirect)
}

// CheckURL validates a control plane URL and returns it normalized: http
// or https (https unless the host is loopback or insecure is set), no user
// or password (the token is the credential), no query or fragment. An
// error never repeats a password.
func CheckURL(raw string, insecure bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("control plane URL %q: want http(s)://host[:port]", redactRaw(raw))
	}
	switch {
	case u.User != nil:
		return nil, fmt.Errorf("control plane URL %s holds a user or password; remove it: the token (--token-file or AGENT_TOKEN) is the credential", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("control plane URL %s has a query or fragment; give only scheme, host, port and path", u.Redacted())
	case u.Scheme == "http" && !insecure && !loopback(u.Hostname()):
		return nil, fmt.Errorf("control plane URL %s is not https and %s is not loopback; use https, or --insecure on a network you trust", u.Redacted(), u.Hostname())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// redactRaw hides what may be a password in a URL that does not parse.
func redactRaw(raw string) string {
	if i := strings.Index(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "//"); j >= 0 && j < i {
			return raw[:j+2] + "xxxxx" + raw[i:]
		}
		return "xxxxx" + raw[i:]
	}
	return raw
}

// RedactURL hides a password written into a URL, or into each of a
// comma-separated list of them (control plane replicas), for a message
// or a log line.
func RedactURL(raw string) string {
	if strings.Contains(raw, ",") {
		parts := strings.Split(raw, ",")
		for i, p := range parts {
			parts[i] = RedactURL(p)
		}
		return strings.Join(parts, ",")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)" // which may hold a password
	}
	if u.User == nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	}
	return u.String()
}

// refuseRedirect refuses a redirect: the token must not follow it to
// another place (another host, or from https to http).
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("%w to %s://%s%s; the agent does not follow redirects with its token: use the final URL",
		errRedirect, req.URL.Scheme, req.URL.Host, req.URL.Path)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewClient returns a client for the control plane at rawURL: one URL,
// or several replicas' separated by commas (URL1,URL2). With several, the
// client talks to the first until it fails to answer (a connection
// error, a timeout, a 5xx), then moves to the next and stays there while
// it answers: sticky, so that an agent's heartbeats, claims and events go
// to one replica at a time. A request safe to repeat is tried at the next
// replicas at once; one that is not (a claim, a task's creation) fails,
// and the caller's next request goes to the next replica (an agent asks
// for its claim again under the same request id).
func NewClient(rawURL, token string, opts ClientOptions) (*Client, error) {
	bases, err := CheckURLs(rawURL, opts.Insecure)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("no control plane token: give --token-file or set AGENT_TOKEN")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Tries == 0 {
		opts.Tries = 3
	}
	return &Client{bases: bases, token: strings.TrimSpace(token), http: &http.Client{Timeout: opts.Timeout, CheckRedirect: refuseRedirect}, opts: opts,
		agentTok: strings.TrimSpace(opts.AgentToken)}, nil
}

// CheckURLs is CheckURL of each of a comma-separated list of control
// plane URLs (the replicas'), which must not repeat one.
func CheckURLs(raw string, insecure bool) ([]*url.URL, error) {
	var bases []*url.URL
	seen := map[string]bool{}
	for _, one := range strings.Split(raw, ",") {
		one = strings.TrimSpace(one)
		if one == "" && strings.Contains(raw, ",") {
			return nil, fmt.Errorf("control plane URLs %q: an empty one between commas", redactRaw(raw))
		}
		u, err := CheckURL(one, insecure)
		if err != nil {
			return nil, err
		}
		if seen[u.String()] {
			return nil, fmt.Errorf("control plane URL %s is given twice", u.Redacted())
		}
		seen[u.String()] = true
		bases = append(bases, u)
	}
	return bases, nil
}

// URL is the address of the control plane replica the client talks to
// now (it holds no secret).
func (c *Client) URL() string { return c.bases[c.cur.Load()].Redacted() }

// URLs are the addresses of every replica the client may talk to, in the
// order it tries them.
func (c *Client) URLs() []string {
	out := make([]string, len(c.bases))
	for i, b := range c.bases {
		out[i] = b.Redacted()
	}
	return out
}

// failsOver reports whether a request that failed with err is to be
// taken to another replica: the replica did not answer, or answered 5xx.
// A 429 is an answer (the replica is busy, and says when to come back),
// and a 4xx is the request's fault, wherever it goes.
func failsOver(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, errRedirect) {
		return false
	}
	if _, shed := Shed(err); shed {
		// The replica answered: it asks for a wait (admission
		// control), which the caller keeps, at the same replica.
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500
	}
	return true
}

// atReplicas does one request at the replica the client talks to; when
// that one fails over (failsOver), the client moves to the next, and a
// request safe to repeat is tried there at once, and so on round the
// replicas once.
func (c *Client) atReplicas(ctx context.Context, token, method, path string, body []byte, out any, repeatable bool) error {
	i := c.cur.Load()
	err := c.once(ctx, c.bases[i], token, method, path, body, out)
	for tried := 1; tried < len(c.bases) && failsOver(ctx, err); tried++ {
		next := (i + 1) % int32(len(c.bases))
		if c.cur.CompareAndSwap(i, next) && c.opts.Moved != nil {
			c.opts.Moved(c.bases[i].Redacted(), c.bases[next].Redacted(), err)
		}
		if !repeatable {
			return err
		}
		i = c.cur.Load()
		err = c.once(ctx, c.bases[i], token, method, path, body, out)
	}
	return err
}

// Heartbeat reports the agent and learns what to cancel.
func (c *Client) Heartbeat(ctx context.Context, req api.HeartbeatRequest) (api.HeartbeatResponse, error) {
	var out api.HeartbeatResponse
	return out, c.agentCall(ctx, http.MethodPost, "/v1/agents/heartbeat", req, &out, true)
}

// Claim asks for up to req.Max tasks. It is tried once. A wait
// (req.WaitMS) is kept to two thirds of the client's timeout, so the
// control plane answers a long poll before the client gives up on it.
func (c *Client) Claim(ctx context.Context, req api.ClaimRequest) (api.ClaimResponse, error) {
	if most := (c.http.Timeout * 2 / 3).Milliseconds(); req.WaitMS > most {
		req.WaitMS = most
	}
	var out api.ClaimResponse
	return out, c.agentCall(ctx, http.MethodPost, "/v1/tasks/claim", req, &out, false)
}

// Release gives claimed tasks back to the queue. It is safe to repeat.
func (c *Client) Release(ctx context.Context, agentID string, taskIDs []string) error {
	var out struct{}
	return c.agentCall(ctx, http.MethodPost, "/v1/tasks/release", api.ReleaseRequest{AgentID: agentID, TaskIDs: taskIDs}, &out, true)
}

// SendEvents sends one batch of events, POST /v1/events, and returns one
// result per event, in order. The batch is the caller's to make within the
// API's limits (api.MaxEventsPerBatch events, about api.MaxBatchBytes): the
// agent's sender takes its pending records from the outbox so, and no
// second layer cuts them again here. More events than the limit are
// refused before anything is sent.
func (c *Client) SendEvents(ctx context.Context, agentID string, events []api.Event) ([]api.EventResult, error) {
	resp, err := c.PostEvents(ctx, agentID, events)
	return resp.Results, err
}

// PostEvents is SendEvents, answering the control plane's whole answer:
// the results, and the tasks of the batch it tells the agent to stop
// (api.EventsResponse.Stop).
func (c *Client) PostEvents(ctx context.Context, agentID string, events []api.Event) (api.EventsResponse, error) {
	if len(events) > api.MaxEventsPerBatch {
		return api.EventsResponse{}, fmt.Errorf("%d events in one batch; the limit is %d", len(events), api.MaxEventsPerBatch)
	}
	if len(events) == 0 {
		return api.EventsResponse{}, nil
	}
	body, err := encodeEvents(agentID, events)
	if err != nil {
		return api.EventsResponse{}, err
	}
	path := "/v1/events"
	if slices.ContainsFunc(events, func(ev api.Event) bool { return ev.Kind == state.EventComplete }) {
		// Past its bound, the control plane admits a batch that ends a
		// task ahead of the others: it frees work, where they add to it.
		path += "?" + api.EndsTaskQuery + "=1"
	}
	var out api.EventsResponse
	if err := c.agentCall(ctx, http.MethodPost, path, body, &out, true); err != nil {
		return api.EventsResponse{}, err
	}
	if len(out.Results) != len(events) {
		return api.EventsResponse{}, fmt.Errorf("control plane answered %d results for %d events", len(out.Results), len(events))
	}
	return out, nil
}

// preEncoded is a request body already encoded as JSON; callWith sends it
// as it is.
type preEncoded []byte

// encodeEvents encodes an EventsRequest by hand, each payload copied as
// it is: encoding/json would scan and copy every json.RawMessage again
// (to compact it), and a payload here was checked when the outbox took
// it and again when it was read back. A payload that is not JSON fails
// the call before anything is sent.
func encodeEvents(agentID string, events []api.Event) (preEncoded, error) {
	size := 64
	for _, e := range events {
		size += len(e.Payload) + len(e.Key) + len(e.TaskID) + len(e.LeaseID) + 160
	}
	b := make([]byte, 0, size)
	b = append(b, `{"agent_id":`...)
	b = appendString(b, agentID)
	b = append(b, `,"events":[`...)
	for i, e := range events {
		if len(e.Payload) == 0 {
			return nil, fmt.Errorf("event %s: empty payload", e.Key)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendString(b, e.Key)
		b = append(b, `,"kind":`...)
		b = appendString(b, string(e.Kind))
		b = append(b, `,"task_id":`...)
		b = appendString(b, e.TaskID)
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(e.Attempt), 10)
		b = append(b, `,"lease_id":`...)
		b = appendString(b, e.LeaseID)
		b = append(b, `,"created_at":`...)
		ts, err := e.CreatedAt.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.Key, err)
		}
		b = append(b, ts...)
		b = append(b, `,"payload":`...)
		b = append(b, e.Payload...)
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// appendString appends s as a JSON string: as it is when it needs no
// escaping (ids, keys, kinds), through encoding/json otherwise.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// CreateTask enqueues a task. It is tried once.
func (c *Client) CreateTask(ctx context.Context, req api.CreateTaskRequest) (api.TaskView, error) {
	var out api.TaskView
	return out, c.call(ctx, http.MethodPost, "/v1/tasks", req, &out, false)
}

// Tasks lists every task, oldest first, asking for one page after
// another.
func (c *Client) Tasks(ctx context.Context) ([]api.TaskView, error) {
	return allPages(ctx, func(after string) ([]api.TaskView, string, error) { return c.TasksPage(ctx, after, api.MaxTasksPage) })
}

// TasksPage lists up to limit tasks after the task named after ("": from
// the first), and the cursor of the next page ("" on the last).
func (c *Client) TasksPage(ctx context.Context, after string, limit int) ([]api.TaskView, string, error) {
	return c.TasksWhere(ctx, api.TaskFilter{}, after, limit)
}

// TasksWhere lists up to limit of the tasks f selects after the task named
// after ("": from the first), and the cursor of the next page ("" on the
// last).
func (c *Client) TasksWhere(ctx context.Context, f api.TaskFilter, after string, limit int) ([]api.TaskView, string, error) {
	return c.TasksIn(ctx, api.OrderOldest, f, after, limit)
}

// TasksIn is TasksWhere in order o: a page of the tasks f selects after
// the task named after, oldest or newest first.
func (c *Client) TasksIn(ctx context.Context, o api.TaskOrder, f api.TaskFilter, after string, limit int) ([]api.TaskView, string, error) {
	q := f.Values()
	if o != "" && o != api.OrderOldest {
		q.Set("order", string(o)) // the default unsaid: a control plane from before orders takes it
	}
	q.Set("limit", strconv.Itoa(limit))
	if after != "" {
		q.Set("after", after)
	}
	var p page[api.TaskView]
	err := c.call(ctx, http.MethodGet, "/v1/tasks?"+q.Encode(), nil, &p, true)
	if err == nil && f != (api.TaskFilter{}) {
		// A control plane from before filters answers every task: the
		// filter is kept here too.
		p.items = slices.DeleteFunc(p.items, func(v api.TaskView) bool { return !f.Match(v.Task()) })
	}
	return p.items, p.next, err
}

// Task returns one task.
func (c *Client) Task(ctx context.Context, id string) (api.TaskView, error) {
	var out api.TaskView
	return out, c.call(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), nil, &out, true)
}

// TaskEvents returns the events stored for a task, in order, asking for
// one page after another.
func (c *Client) TaskEvents(ctx context.Context, id string) ([]api.StoredEvent, error) {
	return allPages(ctx, func(after string) ([]api.StoredEvent, string, error) {
		return c.TaskEventsPage(ctx, id, after, api.MaxEventsPage)
	})
}

// TaskEventsPage returns up to limit of a task's events after the one
// numbered after ("": from the first), and the cursor of the next page
// ("" on the last).
func (c *Client) TaskEventsPage(ctx context.Context, id, after string, limit int) ([]api.StoredEvent, string, error) {
	var p page[api.StoredEvent]
	err := c.call(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/events?"+pageQuery(after, limit), nil, &p, true)
	return p.items, p.next, err
}

// page is one page of a list: its items, and the cursor of the next page
// from the answer's NextAfterHeader. A control plane from before pages
// answers the whole list, with no cursor.
type page[T any] struct {
	items []T
	next  string
}

func (p *page[T]) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &p.items) }

func (p *page[T]) setNext(h http.Header) { p.next = h.Get(api.NextAfterHeader) }

func pageQuery(after string, limit int) string {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("after", after)
	}
	return q.Encode()
}

// allPages asks for one page after another until the last; an error
// loses the pages before it.
func allPages[T any](ctx context.Context, next func(after string) ([]T, string, error)) ([]T, error) {
	all, after := []T{}, ""
	for {
		items, cursor, err := next(after)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if cursor == "" || cursor == after || ctx.Err() != nil {
			return all, ctx.Err()
		}
		after = cursor
	}
}

// TaskDiff returns a task's last diff: what its work on its repository
// came to at the end of its last attempt that reported one.
func (c *Client) TaskDiff(ctx context.Context, id string) (api.Diff, error) {
	var out api.Diff
	return out, c.call(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/diff", nil, &out, true)
}

// CancelTask asks for a task to be cancelled.
func (c *Client) CancelTask(ctx context.Context, id string) (api.TaskView, error) {
	var out api.TaskView
	return out, c.call(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/cancel", nil, &out, true)
}

// Subtasks: CreateSubtask submits a subtask of task parent (with its
// task token, or a person's), under the control plane's delegation
// rules. It is tried once, like CreateTask.
func (c *Client) CreateSubtask(ctx context.Context, parent string, req api.CreateTaskRequest) (api.TaskView, error) {
	var out api.TaskView
	return out, c.call(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(parent)+"/subtasks", req, &out, false)
}

// Subtasks lists task parent's subtasks, in the order it submitted them.
func (c *Client) Subtasks(ctx context.Context, parent string) ([]api.TaskView, error) {
	var out []api.TaskView
	return out, c.call(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(parent)+"/subtasks", nil, &out, true)
}

// RetryTask asks for a new attempt of a recoverable_failed task (a
// person decided). It is tried once: a second try after a lost answer
// would find the task queued and say so.
func (c *Client) RetryTask(ctx context.Context, id string) (api.TaskView, error) {
	var out api.TaskView
	return out, c.call(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/retry", nil, &out, false)
}

// ContinueTask asks that a task that ended without completing continue
// its latest session, on the agent that keeps it (a person decided). It is
// tried once, like RetryTask.
func (c *Client) ContinueTask(ctx context.Context, id string) (api.TaskView, error) {
	var out api.TaskView
	return out, c.call(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/continue", nil, &out, false)
}

// BudgetTask raises the budget of a task parked at it (a person
// decided); its session continues. It is tried once, like RetryTask.
func (c *Client) BudgetTask(ctx context.Context, id string, req api.BudgetRequest) (api.TaskView, error) {
	var out api.TaskView
	return out, c.call(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/budget", req, &out, false)
}

// Reply answers a task's approval request; requestID may be empty for
// the request the task awaits now.
func (c *Client) Reply(ctx context.Context, taskID, requestID string, decision api.Decision) (api.TaskView, error) {
	var v api.TaskView
	err := c.call(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(taskID)+"/reply", api.ReplyRequest{RequestID: requestID, Decision: decision}, &v, true)
	return v, err
}

// Agents lists the agents the control plane has heard from, by id, asking
// for one page after another.
func (c *Client) Agents(ctx context.Context) ([]api.AgentView, error) {
	return allPages(ctx, func(after string) ([]api.AgentView, string, error) {
		return c.AgentsPage(ctx, after, api.MaxAgentsPage)
	})
}

// AgentsPage lists up to limit agents after the one named after ("": from
// the first), and the cursor of the next page ("" on the last).
func (c *Client) AgentsPage(ctx context.Context, after string, limit int) ([]api.AgentView, string, error) {
	var p page[api.AgentView]
	err := c.call(ctx, http.MethodGet, "/v1/agents?"+pageQuery(after, limit), nil, &p, true)
	return p.items, p.next, err
}

// WhoAmI says whose the client's token is.
func (c *Client) WhoAmI(ctx context.Context) (api.WhoAmI, error) {
	var out api.WhoAmI
	return out, c.call(ctx, http.MethodGet, "/v1/whoami", nil, &out, true)
}

// LabelAgent grants agent id labels and takes labels back (an
// operator's request); it returns the labels the agent holds then.
func (c *Client) LabelAgent(ctx context.Context, id string, req api.LabelsRequest) (api.LabelsResponse, error) {
	var out api.LabelsResponse
	return out, c.call(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(id)+"/labels", req, &out, true)
}

// RevokeAgent forgets an agent's token (an operator's request): the agent
// is refused from then on, and its id can be registered again.
func (c *Client) RevokeAgent(ctx context.Context, id string) (api.RevokeResponse, error) {
	var out api.RevokeResponse
	return out, c.call(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(id)+"/revoke", nil, &out, true)
}

// call does one request, retried with backoff when repeatable and the
// failure is transient.
func (c *Client) call(ctx context.Context, method, path string, in, out any, repeatable bool) error {
	return c.callWith(ctx, c.token, method, path, in, out, repeatable)
}

// agentCall calls an agent endpoint with the agent's own token. A token
// the control plane does not know (it lost its registry, or an operator
// revoked it) is registered again, once; when the id is held by another
// token, the control plane refuses and says how to free it.
func (c *Client) agentCall(ctx context.Context, method, path string, in, out any, repeatable bool) error {
	tok, err := c.agentToken(ctx, "")
	if err != nil {
		return err
	}
	err = c.callWith(ctx, tok, method, path, in, out, repeatable)
	if errors.Is(err, ErrUnauthorized) && c.opts.AgentID != "" {
		if tok, err = c.agentToken(ctx, tok); err != nil {
			return err
		}
		err = c.callWith(ctx, tok, method, path, in, out, repeatable)
	}
	return err
}

// agentToken returns the agent's token, registering for one when there is
// none or it is stale (the one that was refused).
func (c *Client) agentToken(ctx context.Context, stale string) (string, error) {
	if c.opts.AgentID == "" {
		return c.token, nil // a tool, not an agent: the control plane will say no
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	c.agentMu.Lock()
	tok := c.agentTok
	c.agentMu.Unlock()
	if tok != "" && tok != stale {
		return tok, nil
	}
	var resp api.RegisterResponse
	if err := c.callWith(ctx, c.token, http.MethodPost, "/v1/agents/register", api.RegisterRequest{AgentID: c.opts.AgentID}, &resp, true); err != nil {
		if s := statusOf(err); s == http.StatusConflict || s == http.StatusForbidden {
			return "", fmt.Errorf("register agent %s: %w: %w", c.opts.AgentID, errNotEnrolled, err)
		}
		return "", fmt.Errorf("register agent %s: %w", c.opts.AgentID, err)
	}
	if c.opts.SaveAgentToken != nil {
		if err := c.opts.SaveAgentToken(resp.Token); err != nil {
			return "", fmt.Errorf("keep the agent's token: %w", err)
		}
	}
	c.agentMu.Lock()
	c.agentTok = resp.Token
	c.agentMu.Unlock()
	return resp.Token, nil
}

func (c *Client) callWith(ctx context.Context, token, method, path string, in, out any, repeatable bool) error {
	var body []byte
	if p, ok := in.(preEncoded); ok {
		body = p
	} else if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	tries := uint(1)
	if repeatable {
		tries = c.opts.Tries
	}
	// A request the control plane shed (nothing of it done) is sent
	// again after the wait it asked, repeatable or not, as often as a
	// repeatable one is tried.
	for shed := uint(1); ; shed++ {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval = 200*time.Millisecond, 5*time.Second
		_, err := backoff.Retry(ctx, func() (struct{}, error) {
			err := c.atReplicas(ctx, token, method, path, body, out, repeatable)
			if _, ok := Shed(err); ok || err != nil && !Transient(err) {
				return struct{}{}, backoff.Permanent(err)
			}
			return struct{}{}, err
		}, backoff.WithBackOff(b), backoff.WithMaxTries(tries), backoff.WithMaxElapsedTime(0))
		wait, ok := Shed(err)
		if !ok || shed >= c.opts.Tries {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func (c *Client) once(ctx context.Context, base *url.URL, token, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.String()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if c.opts.UserAgent != "" {
		req.Header.Set("User-Agent", c.opts.UserAgent)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.requestError(ctx, err) // names the control plane, never the header
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(data))
		}
		ae := &APIError{Status: resp.StatusCode, Message: state.Ellipsize(eb.Error, 300)}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			ae.RetryAfter = retryAfterOf(resp.Header.Get("Retry-After"), time.Now())
		}
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: bad answer: %w", method, path, err)
		}
	}
	if p, ok := out.(interface{ setNext(http.Header) }); ok {
		p.setNext(resp.Header)
	}
	return nil
}
