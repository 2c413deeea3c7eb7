package agent

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/metrics"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/state"
)

// observer is told what the agent does that its metrics count between
// scrapes; what can be read at scrape time (the outbox's figures, the
// tasks, the health grade) is read then instead. metrics.Agent is the one
// implementation; without --metrics-addr there is none and nothing is
// counted.
type observer interface {
	// Sent counts n records a delivery try made result of.
	Sent(result metrics.SendResult, n int)
	// Attempt is told of every attempt report; it counts the final ones.
	Attempt(a state.Attempt)
	// Tokens is told of every attempt report, with the executor that
	// ran it; it counts the tokens of the final ones.
	Tokens(executor string, a state.Attempt)
	// Heartbeat observes a heartbeat's round trip.
	Heartbeat(took time.Duration, ok bool)
}

// agentMetrics is the agent's side of its metrics: what they read and
// where they are served.
type agentMetrics struct {
	m    *metrics.Agent
	addr atomic.Pointer[string] // where they are served, once they are
}

// setupMetrics prepares the metrics when MetricsAddr is set: a bad address
// is a configuration error now, and the outbox reports its commits to
// them. Nothing listens until Run.
func (a *Agent) setupMetrics() error {
	a.obs = noObserver{}
	if a.cfg.MetricsAddr == "" {
		return nil
	}
	if _, err := metrics.ResolveAddr(a.cfg.MetricsAddr); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	m := metrics.NewAgent(metrics.AgentSources{
		Outbox: func() outbox.Stats { return a.outbox.Stats() },
		Tasks:  func() ([]*state.Task, error) { return a.store.LoadAll() },
		Grade:  a.health.Grade,
		Workspaces: func() (metrics.WorkspaceFigures, bool) {
			u := a.usage.Load()
			if u == nil {
				return metrics.WorkspaceFigures{}, false
			}
			return metrics.WorkspaceFigures{Clean: u.Count - u.Kept, Kept: u.Kept, Bytes: u.Bytes}, true
		},
	})
	a.metrics = &agentMetrics{m: m}
	a.obs = m
	if prev := a.cfg.Outbox.OnCommit; prev != nil {
		a.cfg.Outbox.OnCommit = func(records int, bytes int64, sync time.Duration) {
			prev(records, bytes, sync)
			m.Committed(records, bytes, sync)
		}
	} else {
		a.cfg.Outbox.OnCommit = m.Committed
	}
	return nil
}

// serveMetrics starts serving the metrics, once the outbox and the task
// store they read are open. The returned function stops the server; Run
// calls it before it returns.
func (a *Agent) serveMetrics() (stop func(), err error) {
	if a.metrics == nil {
		return func() {}, nil
	}
	srv, err := metrics.Listen(a.cfg.MetricsAddr, a.metrics.m.Registry())
	if err != nil {
		return nil, err
	}
	addr := srv.Addr()
	a.metrics.addr.Store(&addr)
	a.log.Info("serving metrics", "url", "http://"+addr+"/metrics")
	return func() { srv.Close() }, nil
}

// MetricsAddr is the address the agent serves its metrics on (with the
// port it got, when MetricsAddr asked for port 0), once Run serves them;
// "" before that, or without Config.MetricsAddr.
func (a *Agent) MetricsAddr() string {
	if a.metrics == nil {
		return ""
	}
	if p := a.metrics.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// noObserver counts nothing: metrics are off.
type noObserver struct{}

func (noObserver) Sent(metrics.SendResult, int)  {}
func (noObserver) Attempt(state.Attempt)         {}
func (noObserver) Tokens(string, state.Attempt)  {}
func (noObserver) Heartbeat(time.Duration, bool) {}

// countResults counts what the control plane answered for the records of
// a batch: one call per kind of answer, not one per record.
func (s *sender) countResults(results []api.EventResult) {
	var sent, dup, dead int
	for _, res := range results {
		switch res.Status {
		case api.StatusAccepted:
			sent++
		case api.StatusDuplicate:
			dup++
		default:
			dead++
		}
	}
	s.count(metrics.SendSent, sent)
	s.count(metrics.SendDuplicate, dup)
	s.count(metrics.SendDead, dead)
}

// count counts n records a delivery try made result of; none, no call.
func (s *sender) count(result metrics.SendResult, n int) {
	if n > 0 {
		s.obs.Sent(result, n)
	}
}
