package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/health"
	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/proc"
	"github.com/edgeagent/agent/internal/tmuxview"
	"github.com/edgeagent/agent/isolation"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner"
	"github.com/edgeagent/agent/state"
	"github.com/edgeagent/agent/workspace"

	"github.com/edgeagent/agent/internal/utc"
)

// Agent is the daemon. Make one with New and run it with Run.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	layout  datadir.Layout
	id      string
	host    string
	client  *controlplane.Client
	outbox  *outbox.Outbox
	sender  *sender
	store   *state.Store
	health  *health.Tracker
	replies *replies
	held    *holdback
	logs    *taskLogs     // the attempt logs being written, capped
	output  *outputBounds // what the attempts' output may take of the outbox and the disk
	started time.Time

	kickSend  chan struct{} // something was appended
	replay    chan struct{} // a heartbeat got through
	kickClaim chan struct{}
	aborted   chan struct{}
	abortOnce sync.Once
	tasks     sync.WaitGroup

	live atomic.Pointer[Live] // what Reconfigure may change

	running *runningTasks
	// starts bounds how many attempts start at once, across tasks.
	starts *runner.Starts

	link *link // what the heartbeat learned of the control plane

	conf isolation.Confinement // how attempts are confined
	// workspaces makes, resets and removes the clones of tasks
	// that name a repository (Config.Repos); usage is what they take, as
	// the last prune found.
	workspaces *workspace.Manager
	usage      atomic.Pointer[datadir.WorkspaceUsage]
	// delivery pushes a completed task's branch and opens its pull
	// request, as its repository's config asks.
	delivery *delivery
	metrics  *agentMetrics // nil without Config.MetricsAddr
	obs      observer      // counts for the metrics; noObserver without them

	view *tmuxview.View // the tmux view; nil without Config.Tmux
	// observers hear of every report the sink kept (reportObservers).
	observers []reportObserver
	// Subtasks: taskTokens are the task tokens of the tasks running, by
	// task id; in memory only, never logged.
	taskTokens sync.Map
}

// New checks the configuration and prepares an agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client, err := controlplane.NewClient(cfg.ControlPlane, cfg.Token, controlplane.ClientOptions{
		Insecure: cfg.Insecure, UserAgent: "agent/" + cfg.Version, Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	conf, err := cfg.confine()
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	a := &Agent{conf: conf,
		cfg: cfg, log: cfg.Logger, layout: datadir.Layout{Dir: cfg.DataDir}, host: host, client: client,
		health: health.NewTracker(cfg.Executor.Name(), health.Options{}), replies: newReplies(), held: newHoldback(), logs: newTaskLogs(cfg.TaskLogMaxBytes),
		kickSend: make(chan struct{}, 1), replay: make(chan struct{}, 1), kickClaim: make(chan struct{}, 1),
		aborted: make(chan struct{}), output: newOutputBounds(cfg.MaxAttemptOutput, cfg.DataDir, cfg.Logger),
		running: newRunningTasks(cfg.ParkKeepsSlot), link: &link{interval: cfg.HeartbeatInterval}, starts: runner.NewStarts(cfg.MaxStarts),
	}
	if a.workspaces, err = workspace.New(a.workDir(), cfg.Repos); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.CommitAuthor.Name != "" {
		a.workspaces.Author = cfg.CommitAuthor
	}
	// A push remote the repository does not have is a mistake in the
	// settings, said now rather than when a task completes.
	for _, r := range cfg.Repos {
		if r.Push != "" {
			if err := a.workspaces.CheckRemote(context.Background(), r.Name, r.Push); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrConfig, workspace.BadRepo(fmt.Errorf("repository %q: push = %q: %v", r.Name, r.Push, err)))
			}
		}
	}
	a.delivery = &delivery{m: a.workspaces, pulls: cfg.PullRequests, link: func(id string) string { return taskLink(a.link.PublicURL(), id) }}
	if conf.Runner != nil {
		// A repository a confined task may write is not the person's to
		// trust any more: its config and hooks run for them.
		if err := a.workspaces.CheckOutOfReach(conf.Runner.TaskWritable(), conf.Runner.Deny); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	a.health.SetIsolation(conf.Summary(), conf.Confined())
	a.live.Store(liveOf(cfg))
	if err := a.setupMetrics(); err != nil {
		return nil, err
	}
	return a, nil
}

// Isolation says how the agent confines its attempts, as it found at
// start.
func (a *Agent) Isolation() string { return a.conf.Line }

// Abort makes a running stop skip its waits: tasks are cancelled at once and
// the outbox is not flushed (its records stay on disk for the next start).
// The CLI calls it on a second signal.
func (a *Agent) Abort() { a.abortOnce.Do(func() { close(a.aborted) }) }

// Run runs the agent until ctx is done, then stops it gracefully. It
// returns an error when the agent cannot start (a locked or unusable data
// directory, an invalid configuration) or the control plane refuses its
// token.
func (a *Agent) Run(ctx context.Context) (err error) {
	if err := os.MkdirAll(a.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if err := datadir.CheckPrivate(a.cfg.DataDir); err != nil {
		return err
	}
	a.outbox, err = outbox.Open(a.layout.Outbox(), a.cfg.Outbox)
	if err != nil {
		return err
	}
	defer a.outbox.Close()
	if err := a.layout.WritePID(); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	defer a.layout.RemovePID()
	if a.id = a.cfg.AgentID; a.id == "" {
		if a.id, err = a.layout.LoadAgentID(); err != nil {
			return fmt.Errorf("agent id: %w", err)
		}
	}
	if a.store, err = state.OpenStore(a.layout.Tasks()); err != nil {
		return err
	}
	if a.client, err = agentClient(a.layout, a.cfg.ControlPlane, a.cfg.Token, a.cfg.Insecure, a.cfg.Version, a.id, a.log); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	a.sender = &sender{outbox: a.outbox, client: a.client, agentID: a.id, leaseOf: a.leaseOf, log: a.log, obs: a.obs, stop: a.stopTask, cancel: a.cancelTask}
	stopMetrics, err := a.serveMetrics()
	if err != nil {
		return err
	}
	defer stopMetrics()
	a.started = utc.Now()
	a.log.Info("agent starting", "version", a.cfg.Version, "agent_id", a.id, "data_dir", a.cfg.DataDir, "control_plane", a.client.URL(),
		"executor", runner.Describe(a.cfg.Executor), "max_concurrent", a.cfg.MaxConcurrent, "models", a.cfg.Models)
	if a.conf.Runner == nil {
		a.log.Warn("ATTEMPTS ARE NOT CONFINED: "+a.conf.Line, "isolation", "none")
	} else {
		a.log.Info("attempts are confined", "isolation", a.conf.Line)
	}
	if a.conf.Egress == nil {
		a.log.Warn("ATTEMPTS' NETWORK IS NOT CONFINED: "+a.conf.EgressLine, "egress", "open")
	} else {
		a.log.Info("attempts' network is confined", "egress", a.conf.EgressLine)
	}
	switch {
	case a.conf.UserWarn:
		a.log.Warn("ATTEMPTS RUN AS ROOT: "+a.conf.UserLine, "task_user", "root")
	case a.conf.UserLine != "":
		a.log.Info("attempts' user", "task_user", a.conf.UserLine)
	}
	if err := a.conf.TaskUser.Prepare(a.workDir(), a.cfg.DataDir); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if st := a.outbox.Stats(); st.Pending > 0 || st.Quarantined > 0 || st.TornBytes > 0 {
		a.log.Info("outbox recovered", "pending", st.Pending, "dead", st.Dead, "quarantined", st.Quarantined, "torn_bytes", st.TornBytes)
	}
	// An executor that cannot start claims nothing: better said now than
	// learned by failing a task.
	if err := a.cfg.Executor.Probe(ctx); err != nil {
		a.health.Observe(health.StartFailure, err.Error())
		a.log.Error("the executor cannot start; claiming nothing until a probe finds it", "err", err)
	}
	// The tmux view, before any task runs; closed (its session killed)
	// once they have all stopped.
	if a.cfg.Tmux != nil {
		o := *a.cfg.Tmux
		if o.Logger == nil {
			o.Logger = a.log
		}
		a.view = tmuxview.Start(o)
		defer a.view.Close()
	}
	a.observers = a.reportObservers()
	// The attempts a previous life left running under their keepers are
	// taken up where they are; whatever else it left running is ended
	// before anything runs again.
	kept := a.attachKeepers()
	resume := a.reconcile(kept)
	var spared []string
	for _, t := range resume {
		if t.attached != nil {
			spared = append(spared, t.attached.Mark())
		}
	}
	a.endUnclaimed(kept)
	if n := proc.SweepOwner(a.id, spared...); n > 0 {
		a.log.Warn("ended processes a previous run of the agent left behind", "processes", n)
	}

	tasksCtx, stopTasks := context.WithCancelCause(context.WithoutCancel(ctx))
	loopsCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	send, beat, claim := a.sendLoop(), a.heartbeat(), a.claimer(tasksCtx)
	claim.stop = ctx.Done() // a claim waiting for work is withdrawn when the stop begins
	loops := newLoops()
	loops.Go(loopsCtx, send)
	loops.Go(loopsCtx, beat)
	loops.Go(loopsCtx, claim)
	loops.Go(loopsCtx, a.retention())
	if a.cfg.WatchdogInterval > 0 {
		loops.Go(loopsCtx, &watchdog{interval: a.cfg.WatchdogInterval, notify: a.cfg.Notify, link: a.link,
			alive: []*atomic.Int64{&send.alive, &beat.alive, &claim.alive}})
	}
	for _, t := range resume {
		a.supervise(tasksCtx, t.task, t.attached)
	}
	kick(a.kickSend)
	a.cfg.Notify("READY=1")

	var fatal error
	select {
	case <-ctx.Done():
		a.log.Info("agent stopping", "running", a.runningCount())
	case fatal = <-loops.failed():
		a.log.Error("agent stopping", "err", fatal)
	}
	a.cfg.Notify("STOPPING=1")
	a.running.stop()
	a.shutdownTasks(stopTasks)
	stopLoops()
	loops.Wait()
	if fatal == nil {
		a.flush()
		a.goOffline()
	}
	st := a.outbox.Stats()
	a.log.Info("agent stopped", "pending", st.Pending, "dead", st.Dead)
	return fatal
}

// goOffline sends a last heartbeat saying the agent is gone, so the control
// plane stops showing it online at once rather than after three silent
// intervals. Best effort, and brief: the agent is stopping.
func (a *Agent) goOffline() {
	ctx, cancel := context.WithTimeout(context.Background(), offlineTimeout)
	defer cancel()
	req := a.heartbeatRequest()
	req.State, req.Running = api.AgentOffline, []api.RunningTask{}
	if _, err := a.client.Heartbeat(ctx, req); err != nil {
		a.log.Info("the control plane was not told the agent went offline; it will see it silent", "err", err)
	}
}

// offlineTimeout bounds the last heartbeat.
const offlineTimeout = 2 * time.Second

// drainTick is how often a stop says what it waits for.
const drainTick = time.Second

// shutdownTasks gives running tasks the drain timeout, then cancels them
// with runner.ErrShutdown and waits for them to end. Each second it says
// what it waits for, in the log and to the service manager.
func (a *Agent) shutdownTasks(stop context.CancelCauseFunc) {
	done := make(chan struct{})
	go func() { a.tasks.Wait(); close(done) }()
	if a.reattaches() {
		a.detachTasks(stop, done)
		return
	}
	if a.runningCount() > 0 {
		deadline := time.Now().Add(a.cfg.ShutdownGrace)
		a.log.Info("draining: running tasks may finish before they are cancelled", "running", a.runningIDs(), "drain_timeout", a.cfg.ShutdownGrace)
		a.waitSaying(done, time.After(a.cfg.ShutdownGrace), "draining: waiting for running tasks", func() []any {
			return []any{"running", a.runningIDs(), "cancel_in", time.Until(deadline).Round(time.Second).String()}
		})
	}
	ids := a.runningIDs()
	if len(ids) > 0 {
		a.log.Info("stopping the tasks still running; the next run of the agent takes them up, as the gate allows", "running", ids)
	}
	stop(runner.ErrShutdown)
	a.waitSaying(done, nil, "waiting for stopped tasks to end their attempts", func() []any { return []any{"running", a.runningIDs()} })
	for _, id := range ids {
		t, err := a.store.Load(id)
		if err != nil {
			continue
		}
		switch c := t.Current(); {
		case c != nil && c.Status == state.AttemptPending && c.Continues > 0:
			a.log.Info("task will continue its session when the agent starts again", "task", id, "attempt", c.Number, "continues", c.Continues)
		case c != nil && c.Status == state.AttemptPending:
			a.log.Info("task will run again from the start when the agent starts again", "task", id, "attempt", c.Number)
		default:
			a.log.Info("task stopped", "task", id, "phase", t.Phase, "reason", t.PhaseReason)
		}
	}
}

// detachTasks stops the running tasks leaving their attempts running,
// for the next start to take up: no drain, nothing cut. An attempt that
// cannot be left (it has not started, its executor keeps none) is
// stopped as a drain's end stops it, and taken up as the gate says.
func (a *Agent) detachTasks(stop context.CancelCauseFunc, done <-chan struct{}) {
	ids := a.runningIDs()
	if len(ids) > 0 {
		a.log.Info("stopping: running attempts go on without the agent; the next start takes them up where they are",
			"running", ids, "reattach_grace", a.cfg.ReattachGrace)
	}
	stop(runner.ErrDetach)
	a.waitSaying(done, nil, "waiting for running tasks to leave their attempts", func() []any { return []any{"running", a.runningIDs()} })
	for _, id := range ids {
		t, err := a.store.Load(id)
		if err != nil {
			continue
		}
		switch c := t.Current(); {
		case c != nil && c.Status == state.AttemptRunning && keeper.Alive(filepath.Join(a.layout.Spool(), c.AttemptID)):
			a.log.Info("task will be re-attached when the agent starts again: its attempt goes on", "task", id, "attempt", c.Number,
				"for", a.cfg.ReattachGrace)
		case c != nil && c.Status == state.AttemptPending && c.Continues > 0:
			a.log.Info("task will continue its session when the agent starts again", "task", id, "attempt", c.Number, "continues", c.Continues)
		case c != nil && c.Status == state.AttemptPending:
			a.log.Info("task will run again from the start when the agent starts again", "task", id, "attempt", c.Number)
		default:
			a.log.Info("task stopped", "task", id, "phase", t.Phase, "reason", t.PhaseReason)
		}
	}
}

// waitSaying waits for done, the end of limit, or an abort, saying each
// drainTick what it waits for. A nil limit never ends; an abort then ends
// nothing either (what is cancelled must still stop).
func (a *Agent) waitSaying(done <-chan struct{}, limit <-chan time.Time, what string, attrs func() []any) {
	tick := time.NewTicker(drainTick)
	defer tick.Stop()
	aborted := a.aborted
	if limit == nil {
		aborted = nil
	}
	for {
		select {
		case <-done:
			return
		case <-aborted:
			return
		case <-limit:
			return
		case <-tick.C:
			at := attrs()
			a.log.Info(what, at...)
			a.cfg.Notify("STATUS=stopping: " + what)
		}
	}
}

// runningIDs are the tasks running now, sorted.
func (a *Agent) runningIDs() []string { return a.running.ids() }

// flush delivers what it can of the outbox within the flush timeout,
// saying each second how much is left.
func (a *Agent) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.FlushTimeout)
	defer cancel()
	go func() {
		select {
		case <-a.aborted:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(drainTick)
	defer tick.Stop()
	_ = a.sender.drain(ctx, func(int) {
		select {
		case <-tick.C:
			a.log.Info("stopping: delivering pending records", "pending", a.outbox.Stats().Pending,
				"gives_up_in", time.Until(deadlineOf(ctx)).Round(time.Second).String())
		default:
		}
	})
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func (a *Agent) runningCount() int { return a.running.count() }

// sendLoop is the agent's delivery loop.
func (a *Agent) sendLoop() *sendLoop {
	return &sendLoop{sender: a.sender, backoffMax: a.cfg.SendBackoffMax, log: a.log, kick: a.kickSend, replay: a.replay}
}

// heartbeat is the agent's heartbeat loop.
func (a *Agent) heartbeat() *heartbeat {
	return &heartbeat{client: a.client, outbox: a.outbox, store: a.store, held: a.held, health: a.health, live: &a.live,
		replies: a.replies, link: a.link, obs: a.obs, log: a.log, notify: a.cfg.Notify, base: a.cfg.HeartbeatInterval, outputCap: &a.output.told,
		request: a.heartbeatRequest, cancel: a.cancelTask, stop: a.stopTask, wake: a.wakeTask, record: a.writeHealth,
		sendNow: a.kickSend, replay: a.replay, claimNow: a.kickClaim}
}

// claimer is the agent's claim loop; the tasks it claims run under
// tasksCtx.
func (a *Agent) claimer(tasksCtx context.Context) *claimer {
	return &claimer{client: a.client, agentID: a.id, store: a.store, health: a.health, held: a.held, link: a.link, log: a.log,
		room:    func() (int, bool) { return a.running.room(a.live.Load().MaxConcurrent) },
		running: a.running.has, start: func(t *state.Task, token string) {
			if token != "" {
				a.taskTokens.Store(t.ID, token)
			}
			a.supervise(tasksCtx, t, nil)
		}, kick: a.kickClaim, repos: repoNames(a.cfg.Repos),
		offer: a.capabilities, labels: a.cfg.Labels,
		watched: a.running.unordered, obey: func(r api.ClaimResponse) { obey(r.CancelOrders, r.Stop, nil, a.cancelTask, a.stopTask) }}
}

// resumed is a task the agent takes up as it starts: with the keeper of
// an attempt a previous life left running, or without.
type resumed struct {
	task     *state.Task
	attached *proc.Process
}

// reconcile loads task state and takes up the tasks a crash or a stop
// left in a running phase: those with an attempt kept running (kept, by
// attempt id) where it is, the others as the gate says. It returns those
// to run again.
func (a *Agent) reconcile(kept map[string]*proc.Process) []resumed {
	tasks, err := a.store.LoadAll()
	if err != nil {
		a.log.Error("some task files could not be read; those tasks are left alone", "err", err)
	}
	var resume []resumed
	for _, t := range tasks {
		// An attempt of the task may be kept, even one whose end the task
		// file already shows: its last commit may hold reports the
		// outbox does not have.
		var p *proc.Process
		for i := len(t.Attempts) - 1; i >= 0 && p == nil; i-- {
			if p = kept[t.Attempts[i].AttemptID]; p != nil {
				delete(kept, t.Attempts[i].AttemptID)
			}
		}
		if p != nil {
			a.log.Info("taking up an attempt left running, where it is", "task", t.ID, "attempt", t.Attempts[len(t.Attempts)-1].Number,
				"executor_pid", p.Pid(), "keeper_pid", p.Pgid)
			resume = append(resume, resumed{task: t, attached: p})
			continue
		}
		if !t.Phase.Running() {
			continue
		}
		r := a.newRunner(t)
		if r.Recover(t) {
			attempt := 0 // a task claimed, whose first attempt had not begun
			if c := t.Current(); c != nil {
				attempt = c.Number
			}
			how := "start"
			if c := t.Current(); c != nil && c.Continues > 0 && c.Status == state.AttemptPending {
				how = fmt.Sprintf("continue attempt %d's session", c.Continues)
			} else if attempt > 1 {
				how = "replay"
			}
			a.log.Info("taking up a task left running", "task", t.ID, "attempt", attempt, "as", how)
			resume = append(resume, resumed{task: t})
		} else {
			a.log.Info("task left running was ended", "task", t.ID, "phase", t.Phase, "reason", t.PhaseReason)
		}
	}
	return resume
}

// newRunner returns a runner whose reports go to task's sink.
func (a *Agent) newRunner(t *state.Task) *runner.Runner {
	l := a.live.Load()
	return &runner.Runner{Executor: l.Executor, Sink: &sink{a: a, taskID: t.ID}, Health: a.health,
		Policy: policyFor(l.Policy, t), Timeouts: l.Timeouts, Models: modelsFor(l.Models, t), Logger: a.log.With("task", t.ID),
		Owner: a.id, WorkRoot: a.workDir(), Replies: a.replies, ApprovalTimeout: l.ApprovalTimeout, Isolation: a.conf.Runner,
		Workspaces: taskWorkspaces{a.workspaces}, Env: a.taskEnv(t.ID), Budget: l.Budget,
		Egress: a.egressFor(t.ID), TaskUser: a.conf.TaskUser,
		Deliver: a.delivery.deliver, Withhold: TokenEnvs(a.cfg.PullRequests), Starts: a.starts, OnBudget: a.cfg.OnBudget, Liveness: a.cfg.LivenessInterval,
		SpoolDir: a.layout.Spool(), ReattachGrace: a.cfg.ReattachGrace}
}

// egressFor is where task id's attempts may connect: the agent's allow
// list, and the control plane when the task holds a token for its
// subtasks (which only its own subtasks answer to). Nil: not confined.
func (a *Agent) egressFor(id string) *runner.Egress {
	e := a.conf.Egress
	if e == nil {
		return nil
	}
	if _, ok := a.taskTokens.Load(id); ok {
		withCP := *e
		withCP.Always = append([]egress.Rule(nil), e.Always...)
		for _, u := range strings.Split(a.cfg.ControlPlane, ",") { // each replica's
			if r, ok := egress.Endpoint(strings.TrimSpace(u)); ok {
				withCP.Always = append(withCP.Always, r)
			}
		}
		return &withCP
	}
	return e
}

// taskEnv is what task id's executor gets for subtasks: its task token,
// the control plane's address and the agent binary, first on its PATH.
// None when the agent holds no token for it: a control plane from before
// subtasks, or a task taken up again after the agent restarted (tokens
// live in memory only).
func (a *Agent) taskEnv(id string) []string {
	v, ok := a.taskTokens.Load(id)
	if !ok {
		return nil
	}
	env := []string{api.EnvTaskToken + "=" + v.(string), api.EnvControlPlane + "=" + a.cfg.ControlPlane}
	if a.cfg.Insecure {
		env = append(env, "AGENT_INSECURE=true")
	}
	if bin := a.cfg.SelfBin; bin != "" {
		env = append(env, api.EnvAgentBin+"="+bin, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return env
}

// taskWorkspaces gives the runner the agent's workspaces; with no
// repository served, a task naming one is refused.
type taskWorkspaces struct{ m *workspace.Manager }

func (w taskWorkspaces) Prepare(ctx context.Context, taskID, repo, base string) (runner.Prepared, error) {
	if w.m == nil {
		return runner.Prepared{}, fmt.Errorf("repository %q is not served by this agent (it serves none; see [[repo]] in its config)", repo)
	}
	ws, err := w.m.Prepare(ctx, taskID, repo, base)
	if err != nil {
		return runner.Prepared{}, err
	}
	return runner.Prepared{Dir: ws.Dir, Writable: ws.Writable(), Checkout: ws.Checkout}, nil
}

func (w taskWorkspaces) Reset(ctx context.Context, taskID string, attempt int) (string, error) {
	if w.m == nil {
		return "", workspace.ErrNoWorkspace
	}
	return w.m.Reset(ctx, taskID, attempt)
}

func (w taskWorkspaces) Commit(ctx context.Context, taskID, message string) (string, error) {
	if w.m == nil {
		return "", nil
	}
	head, err := w.m.Commit(ctx, taskID, message, workspace.Author{})
	if errors.Is(err, workspace.ErrNoWorkspace) {
		return "", nil
	}
	return head, err
}

func (w taskWorkspaces) BringBack(ctx context.Context, taskID string) error {
	if w.m == nil {
		return nil
	}
	if _, err := w.m.BringBack(ctx, taskID); err != nil && !errors.Is(err, workspace.ErrNoWorkspace) {
		return err
	}
	return nil
}

func (w taskWorkspaces) Diff(ctx context.Context, taskID string) (*state.DiffEvent, error) {
	if w.m == nil {
		return nil, nil
	}
	d, err := w.m.Diff(ctx, taskID)
	if errors.Is(err, workspace.ErrNoWorkspace) {
		return nil, nil
	}
	return d, err
}

func (w taskWorkspaces) Changes(ctx context.Context, taskID string) (*state.Changes, error) {
	if w.m == nil {
		return nil, workspace.ErrNoWorkspace
	}
	return w.m.Changes(ctx, taskID)
}

// workDir is where tasks get their work directories.
func (a *Agent) workDir() string {
	if a.cfg.WorkDir != "" {
		return a.cfg.WorkDir
	}
	return filepath.Join(a.cfg.DataDir, "work")
}

// policyFor applies a task's own max_attempts and on_side_effect, if it
// has them.
func policyFor(p runner.Policy, t *state.Task) runner.Policy {
	if t.MaxAttempts > 0 {
		p.MaxAttempts = t.MaxAttempts
	}
	if t.OnSideEffect != "" && t.OnSideEffect.Check() == nil {
		p.OnSideEffect = t.OnSideEffect
	}
	return p
}

// supervise runs a task in its own goroutine until it ends; attached is
// the keeper of its attempt a previous life left running, if one did.
func (a *Agent) supervise(parent context.Context, t *state.Task, attached *proc.Process) {
	ctx, cancel := context.WithCancelCause(parent)
	sup := &supervised{cancel: cancel, phase: t.Phase, lastProgress: t.LastProgressAt, wake: make(chan runner.WakeOrder, 1)}
	if t.Lease != nil {
		sup.leaseID = t.Lease.ID
	}
	if c := t.Current(); c != nil {
		sup.attempt = c.Number
	}
	// Counted in the wait group under the running set's lock, so never
	// after shutdown began waiting.
	if !a.running.start(t.ID, sup, func() { a.tasks.Add(1) }) {
		// A claim that raced the stop: the task is still only claimed, so
		// its lease lapses and the control plane queues it again.
		cancel(nil)
		if attached != nil {
			attached.Leave() // for the next start
		}
		a.log.Info("not starting a task claimed while stopping", "task", t.ID)
		return
	}
	go func() {
		defer a.tasks.Done()
		defer func() {
			cancel(nil)
			if err := a.logs.finish(t.ID); err != nil {
				a.log.Warn("local task log: tail not written", "task", t.ID, "err", err)
			}
			a.running.end(t.ID)
			a.view.Forget(t.ID)
			a.taskTokens.Delete(t.ID)
			kick(a.kickClaim)
		}()
		r := a.newRunner(t)
		r.Wake = sup.wake
		r.OnActivity = func(at time.Time, liveness string) { a.running.activity(t.ID, at, liveness) }
		r.Unpark = func(ctx context.Context) error {
			return a.running.unpark(ctx, t.ID, func() int { return a.live.Load().MaxConcurrent })
		}
		r.Attached = attached
		if err := r.Run(ctx, t); err != nil {
			a.log.Error("task cannot run", "task", t.ID, "err", err)
			return
		}
		if errors.Is(context.Cause(ctx), runner.ErrDetach) && !t.Phase.Terminal() {
			if c := t.Current(); c != nil && c.Status == state.AttemptRunning {
				a.log.Info("task left running: its attempt goes on, and the next start takes it up", "task", t.ID, "attempt", c.Number)
				return
			}
		}
		a.log.Info("task ended", "task", t.ID, "phase", t.Phase, "attempts", len(t.Attempts))
		if o := a.running.orderOf(t.ID); o != nil && t.Phase.Terminal() && t.Phase != state.PhaseCancelled && !o.At.IsZero() && !t.CancelRequested {
			// The cancel crossed the task's end: the ending stands.
			t.RequestCancel(o.Reason, o.At)
			if err := a.held.save(a.store, t); err != nil {
				a.log.Warn("task state not saved", "task", t.ID, "err", err)
			}
		}
	}()
}

// wakeTask ends a parked task's wait at the control plane's word: a
// person continued it early, or raised its budget.
func (a *Agent) wakeTask(o api.ResumeOrder) {
	if a.running.wake(o.TaskID, runner.WakeOrder{MaxTokens: o.MaxTokens, MaxTime: o.MaxTime.D()}) {
		a.log.Info("continuing a parked task, a person having asked", "task", o.TaskID, "max_tokens", o.MaxTokens, "max_time", o.MaxTime.D())
	}
}

// cancelTask stops a running task at the control plane's order: it ends
// in the order's phase, saying who ended it and why, as the control
// plane has it. A task that ended before the order came is left as it
// ended; a cancel someone asked is noted on it (state.CancelNote), as
// the control plane notes it.
func (a *Agent) cancelTask(o api.CancelOrder) {
	sup, news := a.running.order(o.TaskID, o)
	switch {
	case news:
		a.log.Info("stopping task at the control plane's order", "task", o.TaskID, "phase", o.Phase, "why", o.Reason)
		sup.cancel(&runner.Cancel{Phase: o.Phase, Reason: o.Reason})
	case sup == nil:
		a.noteLateCancel(o)
	}
}

// noteLateCancel notes, on a task that ended here before a cancel someone
// asked of it came, that the cancel came after: its ending stands.
func (a *Agent) noteLateCancel(o api.CancelOrder) {
	if o.At.IsZero() {
		return // the control plane's own ending, or no cancel asked: nothing to note
	}
	t, err := a.store.Load(o.TaskID)
	if err != nil || !t.Phase.Terminal() || t.Phase == state.PhaseCancelled || t.CancelRequested {
		return
	}
	t.RequestCancel(o.Reason, o.At)
	a.log.Info("a cancel came after the task had ended; its ending stands", "task", t.ID, "phase", t.Phase, "cancel_asked", o.At)
	if err := a.held.save(a.store, t); err != nil {
		a.log.Warn("task state not saved", "task", t.ID, "err", err)
	}
}

// stopTask stops a running task at the control plane's word that its
// tree of subtasks passed its root's budget: it ends budget_exceeded.
// The heartbeat answer's Cancel names the task too, for agents from
// before tree budgets: the heartbeat does not cancel what it stopped, and
// were it cancelled after, the first cause would stand.
func (a *Agent) stopTask(o api.StopOrder) {
	if sup, news := a.running.order(o.TaskID, api.CancelOrder{TaskID: o.TaskID, Reason: o.Reason}); news {
		a.log.Info("stopping task at the control plane's word: its tree of subtasks is over its budget", "task", o.TaskID, "why", o.Reason)
		sup.cancel(&runner.BudgetStop{Reason: o.Reason})
	}
}

// leaseOf returns the lease id to send a task's records with.
func (a *Agent) leaseOf(taskID string) string {
	if sup := a.running.get(taskID); sup != nil {
		return sup.leaseID
	}
	return storedLease(a.store, taskID)
}
