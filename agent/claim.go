package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"
)

// claimer asks for work while there is room, the executor is not
// unavailable and the agent is not stopping. Its claims are long polls
// (wait_ms): the control plane holds one until a task is claimable for
// the agent, so an idle agent has one claim waiting and starts a task as
// soon as it is submitted. After an answer it asks again at once, while
// there is room; with no room it waits for a task to end. A control plane
// that does not hold claims (it does not echo wait_ms) is asked when a
// heartbeat got through or a task ended, as before long polls.
//
// A claim also lists the tasks the agent runs (those no order stopped
// yet): it is the channel their cancels come on, answered as soon as one
// is to stop, so a cancel reaches a running task at once rather than at
// the next heartbeat. With no room (or the executor unavailable) the
// agent still holds one for that alone (Max 0), and withdraws it, to ask
// again, when room comes or what it runs changes.
//
// Each claim carries an id; a claim whose answer did not come (the control
// plane may have granted it) is asked again with the same id, which gets
// the same grant, before anything else is claimed. What a grant holds is
// weighed against the room there is when it is answered, not when it was
// asked: a grant larger than that, one that came while the agent began to
// stop or its executor became unavailable, or a task that cannot be
// saved, is released back to the queue. It fails only when the control
// plane refuses the agent.
type claimer struct {
	client  *controlplane.Client
	agentID string
	store   *state.Store
	health  *health.Tracker
	held    *holdback
	link    *link
	log     *slog.Logger
	// room is how many more tasks the agent may run now, and whether it
	// is stopping; running reports a task it runs; start runs a task
	// claimed and saved.
	room    func() (free int, stopping bool)
	running func(taskID string) bool
	start   func(t *state.Task, taskToken string)
	// watched lists the tasks a claim asks to hear the orders of (those
	// running that no order stopped yet); obey carries the orders out.
	watched func() []string
	obey    func(api.ClaimResponse)
	kick    <-chan struct{}
	// repos are the names of the repositories the agent serves: the
	// control plane grants a task that names a repository only to an
	// agent whose claim lists it.
	repos []string
	// offer is what the agent advertises for routing by capability (its
	// executor kind, models, OS and arch) and labels: a task with
	// requirements goes only to an agent whose claim has them.
	offer  func() api.Capabilities
	labels map[string]string
	// stop is closed when the agent begins to stop: a claim waiting at the
	// control plane is withdrawn rather than granted work the agent would
	// hand back.
	stop  <-chan struct{}
	alive atomic.Int64 // when it last went round, for the watchdog
}

func (c *claimer) Run(ctx context.Context) error {
	tick := time.NewTicker(loopTick)
	defer tick.Stop()
	claimID := "" // a claim whose answer did not come
	lastBlocked := ""
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	again := false // the control plane holds claims: ask again at once
	for {
		c.alive.Store(time.Now().UnixNano())
		if !again {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				continue
			case <-c.kick:
			case <-retry.C:
			}
		}
		again = false
		free, stopping := c.room()
		grade := c.health.Grade()
		var watched []string
		if c.watched != nil {
			watched = c.watched()
		}
		why := claimBlocked(free, stopping, c.link.Reached(), grade, c.held.status().Failing)
		if why != "" && (len(watched) == 0 || stopping || !c.link.Reached()) {
			if why != lastBlocked {
				c.log.Debug("not claiming", "why", why)
			}
			lastBlocked = why
			continue
		}
		if why != "" {
			free = 0 // held for the running tasks' orders alone
		}
		lastBlocked = ""
		if claimID == "" {
			claimID = newClaimID()
		}
		asked := time.Now()
		resp, err := c.ask(ctx, api.ClaimRequest{AgentID: c.agentID, Max: free, HealthGrade: grade, RequestID: claimID, Repos: c.repos, WaitMS: claimWait.Milliseconds(),
			Capabilities: c.offer(), Labels: c.labels, Running: watched})
		if errors.Is(err, errWithdrawn) {
			c.log.Debug("claim withdrawn: the agent is stopping", "claim", claimID)
			continue
		}
		if errors.Is(err, errRestated) {
			// Room came, or what it runs changed: asked again at once,
			// with the same id (a grant that crossed the withdrawal is
			// found again).
			again = true
			continue
		}
		if err != nil {
			if controlplane.Refused(err) {
				return err
			}
			// The control plane may have granted it: ask again soon, not
			// only at the next heartbeat; a control plane that shed it
			// (busy) said when.
			wait := claimRetry
			if shed, ok := controlplane.Shed(err); ok {
				wait = max(wait, shed)
			}
			if ctx.Err() == nil {
				c.log.Warn("claim failed; it is asked again with the same id", "claim", claimID, "err", err, "retry_in", wait.Round(time.Millisecond))
			}
			retry.Reset(wait)
			continue
		}
		c.log.Debug("claim answered", "claim", claimID, "asked", free, "granted", len(resp.Tasks), "orders", len(resp.CancelOrders)+len(resp.Stop), "health", grade, "waited", time.Since(asked).Round(time.Millisecond))
		claimID = ""
		ordered := len(resp.CancelOrders)+len(resp.Stop) > 0
		if ordered && c.obey != nil {
			c.obey(resp)
		}
		released := c.take(ctx, resp.Tasks)
		// Held by a control plane that long-polls: ask again at once. Not
		// after releasing a task (it would come straight back), nor after
		// an empty answer that came before half its wait (a control plane
		// that answers at once would be asked in a loop); after orders, at
		// once (the tasks they stop are not listed again).
		held := time.Duration(resp.WaitMS) * time.Millisecond
		again = resp.WaitMS > 0 && released == 0 && (len(resp.Tasks) > 0 || ordered || time.Since(asked) >= held/2)
	}
}

// ask sends a claim and waits for its answer, going round for the
// service watchdog meanwhile: a long poll is the loop waiting for work,
// not stuck (the client's timeout bounds it).
func (c *claimer) ask(ctx context.Context, req api.ClaimRequest) (api.ClaimResponse, error) {
	type answer struct {
		resp api.ClaimResponse
		err  error
	}
	ctx, withdraw := context.WithCancel(ctx)
	defer withdraw()
	done := make(chan answer, 1)
	go func() {
		resp, err := c.client.Claim(ctx, req)
		done <- answer{resp, err}
	}()
	tick := time.NewTicker(loopTick)
	defer tick.Stop()
	stop, kick := c.stop, c.kick
	var withdrawn error
	for {
		select {
		case a := <-done:
			if withdrawn != nil && a.err != nil {
				return a.resp, withdrawn
			}
			return a.resp, a.err
		case <-tick.C:
			c.alive.Store(time.Now().UnixNano())
		case <-stop:
			stop, kick, withdrawn = nil, nil, errWithdrawn
			withdraw()
		case <-kick:
			// A task ended, or a heartbeat got through: a claim that no
			// longer says what the agent has room for, or runs, is asked
			// again.
			if c.stale(req) {
				stop, kick, withdrawn = nil, nil, errRestated
				withdraw()
			}
		}
	}
}

// stale reports whether req no longer says what the agent has room for,
// or the tasks it runs.
func (c *claimer) stale(req api.ClaimRequest) bool {
	free, _ := c.room()
	if req.Max <= 0 && free > 0 {
		return true
	}
	return c.watched != nil && !slices.Equal(c.watched(), req.Running)
}

// errWithdrawn is a claim the agent withdrew because it began to stop;
// errRestated one it withdrew to ask again as things are now.
var (
	errWithdrawn = errors.New("claim withdrawn: the agent is stopping")
	errRestated  = errors.New("claim withdrawn: asked again as things are now")
)

// take starts the tasks granted that there is room for now, and releases
// the others; it returns how many it released. The room is the room at
// the answer: a long poll may be answered after the agent began to stop
// or its executor became unavailable.
func (c *claimer) take(ctx context.Context, granted []api.Claimed) (released int) {
	free, stopping := c.room()
	unavailable := c.health.Grade() == health.Unavailable
	if stopping || unavailable {
		free = 0
	}
	var release []string
	for i, g := range granted {
		t := g.Task
		lease := g.Lease
		t.Lease = &lease
		if i >= free || c.running(t.ID) {
			release = append(release, t.ID)
			continue
		}
		if err := c.store.Save(&t); err != nil {
			c.log.Error("save claimed task; releasing it", "task", t.ID, "err", err)
			release = append(release, t.ID)
			continue
		}
		c.log.Info("task claimed", "task", t.ID, "title", t.Title)
		c.start(&t, g.TaskToken)
	}
	switch {
	case len(release) == 0:
	case stopping:
		// A grant that crossed the stop: expected, and handed back.
		c.log.Info("releasing tasks claimed while the agent began to stop", "tasks", release)
	case unavailable:
		c.log.Warn("releasing claimed tasks: the executor became unavailable while the claim waited", "tasks", release)
	default:
		c.log.Warn("releasing claimed tasks this agent will not run", "tasks", release)
	}
	if len(release) > 0 {
		if err := c.client.Release(ctx, c.agentID, release); err != nil && ctx.Err() == nil {
			c.log.Warn("release failed; the control plane requeues them when they stay out of heartbeats", "err", err)
		}
	}
	return len(release)
}

// repoNames are the names of repos, as claims and heartbeats announce
// them.
func repoNames(repos []workspace.Repo) []string {
	if len(repos) == 0 {
		return nil
	}
	names := make([]string, len(repos))
	for i, r := range repos {
		names[i] = r.Name
	}
	return names
}

// claimBlocked says why the agent claims nothing now, or "".
func claimBlocked(free int, stopping, reached bool, grade health.Grade, diskFailing string) string {
	switch {
	case stopping:
		return "draining"
	case free <= 0:
		return "no room: every slot runs a task"
	case !reached:
		return "the control plane is unreachable"
	case grade == health.Unavailable:
		return "the executor is unavailable"
	case diskFailing != "":
		// A failing disk could not keep what a task reports.
		return "writes fail: " + diskFailing
	}
	return ""
}

// claimRetry is the wait before a claim whose answer did not come is asked
// again.
const claimRetry = time.Second

// claimWait is how long a claim asks the control plane to hold it when
// there is no work: the most a control plane holds one (the client keeps
// it under its own timeout too).
const claimWait = api.MaxClaimWait

// newClaimID makes a claim's id.
func newClaimID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "claim-" + hex.EncodeToString(b)
}
