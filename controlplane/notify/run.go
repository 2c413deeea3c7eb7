package notify

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
)

// Store is what Run needs of the control plane's store: its notification
// queue, and whether this process leads (store.Store has both).
type Store interface {
	store.Notifier
	Lead(ctx context.Context) (bool, error)
}

// The delivery loop's defaults.
const (
	DefaultInterval   = time.Second
	DefaultBatch      = 50
	DefaultParallel   = 4
	DefaultMaxAge     = 72 * time.Hour
	DefaultMinBackoff = 5 * time.Second
	DefaultMaxBackoff = 10 * time.Minute
)

// Options tune Run. The zero value of each is its default.
type Options struct {
	// Interval is how often it looks for due records (DefaultInterval),
	// besides when woken.
	Interval time.Duration
	// Wake, when it receives, makes Run look at once: the server may
	// signal it after it wrote notifications.
	Wake <-chan struct{}
	// Batch is how many due records it takes at a time; Parallel, how
	// many it sends at once.
	Batch, Parallel int
	// SendTimeout bounds each delivery (DefaultSendTimeout).
	SendTimeout time.Duration
	// MaxAge is how long after it was written a record that still fails
	// is given up on (DefaultMaxAge, 72 h).
	MaxAge time.Duration
	// MinBackoff is the wait after a first failure, doubling with each
	// more up to MaxBackoff; each wait is jittered (between half and all
	// of it).
	MinBackoff, MaxBackoff time.Duration
	// Client sends; NewClient() when nil.
	Client *http.Client
	Logger *slog.Logger
	// Now is the clock (time.Now); tests move it.
	Now func() time.Time
	// Jitter picks a wait in [d/2, d]; tests fix it.
	Jitter func(d time.Duration) time.Duration
	// Counts, if set, counts the tries (for metrics).
	Counts *Counts
	// Window is the period the rate limits count in (DefaultWindow);
	// PerSubject, how many notifications about one agent or task a target
	// gets per window (DefaultPerSubject); PerTarget, how many it gets in
	// all (DefaultPerTarget). An event's repeats about one agent or task
	// are one per window. What they hold back is folded into one
	// notification, sent when the window ends (gate.go).
	Window                time.Duration
	PerSubject, PerTarget int
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.Client == nil {
		o.Client = NewClient()
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.PerSubject <= 0 {
		o.PerSubject = DefaultPerSubject
	}
	if o.PerTarget <= 0 {
		o.PerTarget = DefaultPerTarget
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = func(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }
	}
}

// Backoff is the wait before the next try of a record that failed
// attempts times (1 after the first failure), before jitter: first doubled
// per failure after the first, capped at max.
func Backoff(attempts int, first, max time.Duration) time.Duration {
	d := first
	for i := 1; i < attempts && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Run delivers the store's due notifications to targets until ctx ends,
// while the store says this process leads. It returns when ctx ends and
// every delivery it started has returned.
func Run(ctx context.Context, st Store, targets []Target, opts Options) {
	opts.defaults()
	d := &deliverer{st: st, opts: opts, byName: map[string]Target{}, warned: map[string]bool{}}
	for _, t := range targets {
		d.byName[t.Name] = t
	}
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	for {
		for d.round(ctx) {
			// A full batch: more may be due.
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-opts.Wake:
		}
	}
}

type deliverer struct {
	st     Store
	opts   Options
	byName map[string]Target

	// warned are the unknown targets already warned of; lastErr, the
	// store's last error, said once until it changes.
	warned  map[string]bool
	lastErr string
	// lastPrune is when the gates were last pruned.
	lastPrune time.Time
}

// round sends one batch of due records; it reports whether the batch was
// full (more may be due). Each record not tried yet passes its rate
// limits first (gate.go), one after another, the gates' folds first: a
// fold due goes out before what it would hold back is folded into it.
func (d *deliverer) round(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	lead, err := d.st.Lead(ctx)
	if err != nil {
		d.storeError(ctx, "leadership", err)
		return false
	}
	if !lead {
		return false
	}
	now := d.opts.Now()
	due, err := d.st.DueNotifications(ctx, now, d.opts.Batch)
	if err != nil {
		d.storeError(ctx, "due notifications", err)
		return false
	}
	d.lastErr = ""
	full := len(due) == d.opts.Batch
	isFold := func(n store.Notification) int {
		if n.Gate != "" && n.Attempts == 0 {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(due, func(a, b store.Notification) int { return cmp.Compare(isFold(a), isFold(b)) })
	g := d.newGating(now)
	type sending struct {
		t Target
		n store.Notification
	}
	var send []sending
	for _, n := range due {
		if ctx.Err() != nil {
			return false
		}
		t, ok := d.byName[n.Target]
		if !ok {
			d.unknown(ctx, n)
			continue
		}
		if g.folded[[2]string{n.Target, n.ID}] {
			continue // changed by a fold since it was read: the next round has it
		}
		if n.Attempts == 0 {
			pass, err := g.admit(ctx, n)
			if err != nil {
				d.storeError(ctx, "notification rate limits", err)
				continue
			}
			if !pass {
				continue
			}
		}
		send = append(send, sending{t, n})
	}
	sem := make(chan struct{}, d.opts.Parallel)
	var wg sync.WaitGroup
	for _, s := range send {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.deliver(ctx, s.t, s.n)
		}()
	}
	wg.Wait()
	d.prune(ctx, now)
	return full && ctx.Err() == nil
}

// pruneEvery is how often the gates whose windows ended are removed.
const pruneEvery = time.Minute

// prune removes the gates whose windows ended, at most once a
// pruneEvery: they let everything through, as a gate not stored does.
func (d *deliverer) prune(ctx context.Context, now time.Time) {
	if now.Sub(d.lastPrune) < pruneEvery || ctx.Err() != nil {
		return
	}
	if err := d.st.PruneNotifyGates(ctx, now); err != nil {
		d.storeError(ctx, "prune the notification rate limits", err)
		return
	}
	d.lastPrune = now
}

// deliver sends one record and records how it went.
func (d *deliverer) deliver(ctx context.Context, t Target, n store.Notification) {
	sctx, cancel := context.WithTimeout(ctx, d.opts.SendTimeout)
	code, err := Send(sctx, d.opts.Client, t, n.Body, d.opts.Now())
	cancel()
	if ctx.Err() != nil {
		return // shutting down: it stays due, and is sent again after the start
	}
	log := d.opts.Logger
	if err == nil {
		d.opts.Counts.add(t.Name, Delivered)
		if err := d.st.NotificationDone(ctx, n.ID, n.Target); err != nil {
			log.Warn("notification delivered, not marked done: it will be sent again", "target", t.Name, "id", n.ID, "err", err)
			return
		}
		log.Debug("notification delivered", "target", t.Name, "id", n.ID, "status", code, "attempts", n.Attempts+1)
		return
	}
	now := d.opts.Now()
	if now.Sub(n.Created) >= d.opts.MaxAge {
		d.opts.Counts.add(t.Name, GivenUp)
		log.Error("notification given up on", "target", t.Name, "id", n.ID, "attempts", n.Attempts+1,
			"age", now.Sub(n.Created).Round(time.Second).String(), "err", err.Error())
		if err := d.st.NotificationDone(ctx, n.ID, n.Target); err != nil {
			log.Warn("notification given up on, not removed", "target", t.Name, "id", n.ID, "err", err)
		}
		return
	}
	d.opts.Counts.add(t.Name, Failed)
	wait := d.opts.Jitter(Backoff(n.Attempts+1, d.opts.MinBackoff, d.opts.MaxBackoff))
	log.Warn("notification not delivered; will retry", "target", t.Name, "id", n.ID, "attempts", n.Attempts+1,
		"retry_in", wait.Round(time.Second).String(), "err", err.Error())
	if err := d.st.NotificationRetry(ctx, n.ID, n.Target, now.Add(wait), err.Error()); err != nil {
		log.Warn("notification retry not recorded", "target", t.Name, "id", n.ID, "err", err)
	}
}

// unknown drops a record for a target no longer configured, warning once
// per target.
func (d *deliverer) unknown(ctx context.Context, n store.Notification) {
	d.opts.Counts.add(n.Target, Dropped)
	if !d.warned[n.Target] {
		d.warned[n.Target] = true
		d.opts.Logger.Warn("notifications for a target no longer configured are dropped", "target", n.Target)
	}
	if err := d.st.NotificationDone(ctx, n.ID, n.Target); err != nil {
		d.opts.Logger.Warn("notification for an unknown target not removed", "target", n.Target, "id", n.ID, "err", err)
	}
}

// storeError logs a store's failure once until it changes.
func (d *deliverer) storeError(ctx context.Context, what string, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	if msg := err.Error(); msg != d.lastErr {
		d.lastErr = msg
		d.opts.Logger.Warn("notifications: the store failed; trying again", "what", what, "err", err)
	}
}
