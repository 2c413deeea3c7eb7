package main

import (
	"encoding/json"
	"fmt"
	"log"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
)

// cpCreds are the tokens the load uses: the registration secret (agents
// register with it) and an operator token (submitters and readers).
type cpCreds struct{ secret, operator string }

// claimed is a task granted by a claim, as the load needs it.
type claimed struct {
	Task struct {
		ID string `json:"id"`
	} `json:"task"`
	Lease struct {
		ID string `json:"id"`
	} `json:"lease"`
}

type claimAnswer struct {
	Tasks  []claimed `json:"tasks"`
	WaitMS int64     `json:"wait_ms"`
}

type eventsAnswer struct {
	Results []api.EventResult `json:"results"`
}

// taskEvents are what an agent sends for a task that completes at its
// first attempt, in the batches its sender would make of them as the task
// goes: the executor starting, the attempt and the turn; progress and a
// log line; the attempt's end, the phase completed and the completion.
// seq makes the keys the agent's outbox would make (task:kind:time:seq).
func taskEvents(c claimed, seq *uint64, started time.Time) [3][]api.Event {
	now := time.Now().UTC()
	ev := func(kind state.EventKind, payload any) api.Event {
		*seq++
		b, _ := json.Marshal(payload)
		key := c.Task.ID + ":" + string(kind) + ":" + now.Format(time.RFC3339Nano) + ":" + strconv.FormatUint(*seq, 10)
		return api.Event{Key: key, Kind: kind, TaskID: c.Task.ID, Attempt: 1, LeaseID: c.Lease.ID, CreatedAt: now, Payload: b}
	}
	a := state.Attempt{AttemptID: c.Task.ID + "-a1", Number: 1, Model: "bench-model", Status: state.AttemptRunning, StartedAt: started}
	done := a
	code := 0
	done.Status, done.CompletedAt, done.ExitCode = state.AttemptCompleted, now, &code
	return [3][]api.Event{
		{
			ev(state.EventPhase, state.PhaseEvent{Phase: state.PhaseExecutorStarting}),
			ev(state.EventAttempt, a),
			ev(state.EventPhase, state.PhaseEvent{Phase: state.PhaseTurnStarted}),
		},
		{
			ev(state.EventProgress, state.Progress{Message: "working through the benchmark task", Percent: 50, Step: "work"}),
			ev(state.EventLog, state.LogEvent{Stream: state.LogStdout, Lines: []string{"reading the task", "making the change", "running the checks"}}),
		},
		{
			ev(state.EventAttempt, done),
			ev(state.EventPhase, state.PhaseEvent{Phase: state.PhaseCompleted}),
			ev(state.EventComplete, state.CompleteEvent{Status: state.PhaseCompleted, Summary: "done: the benchmark task", Attempts: []state.Attempt{done}}),
		},
	}
}

// sendEvents posts one batch and counts what was not accepted.
func (l *cpLoad) sendEvents(k cpKind, agentID, token string, evs []api.Event) (completed int, err error) {
	var ans eventsAnswer
	path := "/v1/events"
	if slices.ContainsFunc(evs, func(ev api.Event) bool { return ev.Kind == state.EventComplete }) {
		path += "?" + api.EndsTaskQuery + "=1" // as the agent's client says a batch ends a task
	}
	if _, err := l.c.call(k, "POST", path, token, api.EventsRequest{AgentID: agentID, Events: evs}, &ans); err != nil {
		return 0, err
	}
	for i, r := range ans.Results {
		if r.Status == api.StatusDuplicate && i < len(evs) && evs[i].Kind == state.EventComplete {
			completed++ // a batch sent again whose first try was taken
		} else if r.Status != api.StatusAccepted && r.Status != api.StatusDuplicate {
			l.rejected.Add(1)
			s := fmt.Sprintf("event %s: %s %s", r.Key, r.Status, r.Reason)
			l.lastReject.Store(&s)
		} else if i < len(evs) && evs[i].Kind == state.EventComplete {
			completed++
		}
	}
	return completed, nil
}

// cpLoad is one run's load: its client, credentials and counters.
type cpLoad struct {
	c      *cpClient
	creds  cpCreds
	prefix string // of agent ids, unique to the run
	log    *log.Logger

	submitted, completed, rejected atomic.Int64
	lastReject                     atomic.Pointer[string]

	doneMu sync.Mutex
	done   []string // recently completed tasks, for the readers
	doneAt int
}

func (l *cpLoad) register(k cpKind, id string) (string, error) {
	var r api.RegisterResponse
	_, err := l.c.call(k, "POST", "/v1/agents/register", l.creds.secret, api.RegisterRequest{AgentID: id}, &r)
	return r.Token, err
}

func (l *cpLoad) submit(k cpKind, n int) (string, error) {
	var t struct {
		ID string `json:"id"`
	}
	_, err := l.c.call(k, "POST", "/v1/tasks", l.creds.operator, api.CreateTaskRequest{Title: "load " + strconv.Itoa(n),
		Prompt: "A task of the control plane load benchmark: " + strings.Repeat("do the thing, check it, say what was done. ", 4)}, &t)
	return t.ID, err
}

func (l *cpLoad) noteDone(id string) {
	l.doneMu.Lock()
	defer l.doneMu.Unlock()
	if len(l.done) < 1024 {
		l.done = append(l.done, id)
		return
	}
	l.done[l.doneAt] = id
	l.doneAt = (l.doneAt + 1) % len(l.done)
}

func (l *cpLoad) someDone() string {
	l.doneMu.Lock()
	defer l.doneMu.Unlock()
	if len(l.done) == 0 {
		return ""
	}
	return l.done[rand.IntN(len(l.done))]
}

// fill stores n completed tasks through the API, as fast as it takes
// them: workers, each a registered agent, submit up to 50 tasks (a
// claim's most), claim them and send all their events in one batch.
func (l *cpLoad) fill(n, workers int) error {
	if n <= 0 {
		return nil
	}
	var (
		next, done atomic.Int64
		wg         sync.WaitGroup
		first      atomic.Pointer[error]
	)
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				d := done.Load()
				l.log.Printf("cpload: fill: %d of %d tasks stored (%.0f/s)", d, n, float64(d)/time.Since(start).Seconds())
			}
		}
	}()
	defer close(stop)
	for w := range workers {
		wg.Go(func() {
			fail := func(err error) { first.CompareAndSwap(nil, &err) }
			id := fmt.Sprintf("%s-fill-%d", l.prefix, w)
			tok, err := l.register(nKinds, id)
			if err != nil {
				fail(err)
				return
			}
			var seq uint64
			for first.Load() == nil {
				k := 0
				for ; k < 50; k++ {
					i := next.Add(1)
					if i > int64(n) {
						break
					}
					if _, err := l.submit(nKinds, int(i)); err != nil {
						fail(err)
						return
					}
				}
				var ans claimAnswer
				if _, err := l.c.call(nKinds, "POST", "/v1/tasks/claim", tok, api.ClaimRequest{AgentID: id, Max: 50, HealthGrade: health.Available}, &ans); err != nil {
					fail(err)
					return
				}
				if len(ans.Tasks) == 0 && k == 0 {
					return // nothing left to submit, nothing left to claim
				}
				var batch []api.Event
				now := time.Now()
				for _, c := range ans.Tasks {
					for _, b := range taskEvents(c, &seq, now) {
						batch = append(batch, b...)
					}
				}
				if len(batch) == 0 {
					continue
				}
				got, err := l.sendEvents(nKinds, id, tok, batch)
				if err != nil {
					fail(err)
					return
				}
				done.Add(int64(got))
				for _, c := range ans.Tasks {
					l.noteDone(c.Task.ID)
				}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	if d := done.Load(); d != int64(n) {
		return fmt.Errorf("fill: %d of %d tasks completed (%d events not accepted: %s)", d, n, l.rejected.Load(), l.lastRejected())
	}
	l.log.Printf("cpload: fill: %d tasks stored in %.1f s (%.0f/s)", n, time.Since(start).Seconds(), float64(n)/time.Since(start).Seconds())
	return nil
}

func (l *cpLoad) lastRejected() string {
	if p := l.lastReject.Load(); p != nil {
		return *p
	}
	return "none"
}

// loadShape is what the measured window runs.
type loadShape struct {
	agents    int
	heartbeat time.Duration
	claimWait time.Duration
	taskTime  time.Duration
	rate      float64    // tasks submitted per second
	readRate  float64    // list pages and events pages per second, each
	shapes    [][]string // a task's batches, captured; nil: taskEvents
}

// run runs the simulated agents, submitters and readers until stop is
// closed, and returns once every request they started has ended.
func (l *cpLoad) run(sh loadShape, stop chan struct{}) {
	var wg sync.WaitGroup
	for i := range sh.agents {
		offset := time.Duration(i) * sh.heartbeat / time.Duration(sh.agents)
		wg.Go(func() { l.agent(fmt.Sprintf("%s-%d", l.prefix, i), offset, sh, stop) })
	}
	if sh.rate > 0 {
		wg.Go(func() {
			every := time.Duration(float64(time.Second) / sh.rate)
			tick := time.NewTicker(every)
			defer tick.Stop()
			var subs sync.WaitGroup
			defer subs.Wait()
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				// Open loop: a slow answer does not slow the rate.
				subs.Go(func() {
					if _, err := l.submit(kSubmit, n); err == nil {
						l.submitted.Add(1)
					}
				})
			}
		})
	}
	if sh.readRate > 0 {
		every := time.Duration(float64(time.Second) / sh.readRate)
		wg.Go(func() { // pages through the list of tasks, oldest first
			after := ""
			each(every, stop, func() {
				q := "/v1/tasks?limit=100"
				if after != "" {
					q += "&after=" + after
				}
				var page []json.RawMessage
				next, err := l.c.call(kList, "GET", q, l.creds.operator, nil, &page)
				if err == nil {
					after = next
				}
			})
		})
		wg.Go(func() { // the events of a task that completed lately
			each(every, stop, func() {
				if id := l.someDone(); id != "" {
					var page []json.RawMessage
					l.c.call(kEventsPage, "GET", "/v1/tasks/"+id+"/events?limit=500", l.creds.operator, nil, &page)
				}
			})
		})
	}
	wg.Wait()
}

// each calls fn every interval until stop is closed.
func each(every time.Duration, stop chan struct{}, fn func()) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			fn()
		}
	}
}

// sleep waits d, or until stop is closed: false then.
func sleep(d time.Duration, stop chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// agent is one simulated agent: it registers at its offset in the
// heartbeat interval, heartbeats every interval from then on, and claims
// after each heartbeat and each task's end (with a claim wait, long polls
// asked again at once as the agent asks them, see agent/claim.go),
// running each task it is granted: three batches of events over the task
// time.
func (l *cpLoad) agent(id string, offset time.Duration, sh loadShape, stop chan struct{}) {
	if !sleep(offset, stop) {
		return
	}
	var tok string
	for {
		var err error
		if tok, err = l.register(kRegister, id); err == nil {
			break
		}
		if !sleep(sh.heartbeat, stop) {
			return
		}
	}
	started := time.Now().UTC()
	var running atomic.Pointer[claimed]
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { l.work(id, tok, sh, stop, wake, &running) })
	tick := time.NewTicker(sh.heartbeat)
	defer tick.Stop()
	for {
		req := api.HeartbeatRequest{AgentID: id, Hostname: id + ".bench", Version: "bench", StartedAt: started,
			Health:   api.Health{Executor: "sample", Grade: health.Available, Since: started, RecentErrors: []api.HealthProblem{}},
			Capacity: api.Capacity{Max: 1}, Running: []api.RunningTask{}}
		if c := running.Load(); c != nil {
			req.Capacity.Running = 1
			req.Running = append(req.Running, api.RunningTask{TaskID: c.Task.ID, Attempt: 1, Phase: state.PhaseTurnStarted, LastProgressAt: time.Now().UTC()})
		}
		var ans api.HeartbeatResponse
		if _, err := l.c.call(kHeartbeat, "POST", "/v1/agents/heartbeat", tok, req, &ans); err == nil {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// work is an agent's claim loop and its one task slot.
func (l *cpLoad) work(id, tok string, sh loadShape, stop, wake chan struct{}, running *atomic.Pointer[claimed]) {
	var seq uint64
	for n := 0; ; n++ {
		// As the agent does: the first claim once a heartbeat got
		// through, then one after each heartbeat while idle.
		select {
		case <-stop:
			return
		case <-wake:
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			var ans claimAnswer
			req := api.ClaimRequest{AgentID: id, Max: 1, HealthGrade: health.Available, RequestID: id + "-" + strconv.Itoa(n), WaitMS: sh.claimWait.Milliseconds()}
			n++
			asked := time.Now()
			if _, err := l.c.call(kClaim, "POST", "/v1/tasks/claim", tok, req, &ans); err != nil || len(ans.Tasks) == 0 {
				// As the agent does: a failed claim is asked again a
				// second later, or after the wait a shed one was told.
				wait := time.Second
				if d, ok := shedWait(err); ok {
					wait = max(wait, d)
				}
				if err != nil && !sleep(wait, stop) {
					return
				}
				// As the agent does: a long poll is asked again at once
				// only when it was held half its wait at least; else (or
				// with no long polls) at the next heartbeat.
				if err != nil || ans.WaitMS == 0 || time.Since(asked) < time.Duration(ans.WaitMS)*time.Millisecond/2 {
					break
				}
				continue
			}
			c := ans.Tasks[0]
			running.Store(&c)
			var batches [][]api.Event
			if sh.shapes != nil {
				batches = shapedEvents(c, &seq, time.Now().UTC(), sh.shapes)
			} else {
				b := taskEvents(c, &seq, time.Now().UTC())
				batches = b[:]
			}
			for i, b := range batches {
				if i > 0 && !sleep(sh.taskTime/time.Duration(len(batches)-1), stop) {
					return
				}
				// As the outbox does: a batch that failed is sent again
				// (the same keys), after the wait a shed one was told, or
				// a second.
				got, err := l.sendEvents(kEvents, id, tok, b)
				for err != nil {
					wait := time.Second
					if d, ok := shedWait(err); ok {
						wait = d
					}
					if !sleep(wait, stop) {
						return
					}
					got, err = l.sendEvents(kEvents, id, tok, b)
				}
				if got > 0 && l.c.rec.on.Load() {
					l.completed.Add(int64(got))
				}
				if got > 0 {
					l.noteDone(c.Task.ID)
				}
			}
			running.Store(nil)
		}
	}
}
