package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
)

// Rate limits. Before a record is first sent it passes its gates (one
// store.NotifyGate each, per target, kept in the store so that they hold
// across restarts and replicas: only the replica that leads sends):
//
//   - repeat: one notification of an event about an agent or a task per
//     Window. The first goes out at once; the repeats within the window
//     are held back and folded into one, sent when the window ends, that
//     says how many there were and when ("…is unavailable [39 times in
//     4s since 09:14:03 UTC; …]"). A storm that goes on is one notice per
//     window.
//   - agent or task: PerSubject notifications about one agent or task,
//     of any events, per Window.
//   - target: PerTarget notifications to the target in all per Window.
//
// What a gate holds back is never lost: it is folded into one record
// (its ID the first held back's), which goes out when the gate's window
// ends, counting them (api.NotifyFolded) by event; held back by a wider
// gate, it is folded again into that gate's. A window starts at the
// first notification a gate lets through, and again at the fold it
// sends. A record that passed its gates and failed to be delivered is
// retried past them: it was counted once.

// The rate limits' defaults.
const (
	DefaultWindow     = 10 * time.Minute
	DefaultPerSubject = 3
	DefaultPerTarget  = 20
)

// The gates' keys: "repeat/KIND/EVENT/ID", "KIND/ID" (KIND agent or
// task; the id last, for it may hold a slash) and "target".
const (
	repeatPrefix = "repeat/"
	targetGate   = "target"
)

// subjectOf is the kind ("agent" or "task") and id of what n is about,
// "" for a digest of several.
func subjectOf(n api.Notification) (kind, id string) {
	switch {
	case n.Task != nil:
		return "task", n.Task.ID
	case n.Agent != nil:
		return "agent", n.Agent.ID
	}
	return "", ""
}

// gateKeys are the gates a record must pass, the narrowest first: all
// three for a record as the server wrote it; for a fold, its own gate
// and those wider.
func gateKeys(gate string, n api.Notification) []string {
	if gate == "" {
		kind, id := subjectOf(n)
		if kind == "" {
			return []string{targetGate}
		}
		return []string{repeatPrefix + kind + "/" + string(n.Event) + "/" + id, kind + "/" + id, targetGate}
	}
	if rest, ok := strings.CutPrefix(gate, repeatPrefix); ok {
		if p := strings.SplitN(rest, "/", 3); len(p) == 3 {
			return []string{gate, p[0] + "/" + p[2], targetGate}
		}
	}
	if gate == targetGate {
		return []string{targetGate}
	}
	return []string{gate, targetGate}
}

// limitOf is what gate key limits, as NotifyFolded.Limit says it, and how
// many it lets through per window.
func (o *Options) limitOf(key string) (name string, most int) {
	switch {
	case strings.HasPrefix(key, repeatPrefix):
		return "repeat", 1
	case key == targetGate:
		return "target", o.PerTarget
	}
	kind, _, _ := strings.Cut(key, "/")
	return kind, o.PerSubject
}

// gating is one round's view of the gates: those it read or wrote, by
// target and key.
type gating struct {
	d     *deliverer
	now   time.Time
	gates map[[2]string]store.NotifyGate
	// folded are the records changed by a fold this round: what the
	// round read of them is stale.
	folded map[[2]string]bool
}

func (d *deliverer) newGating(now time.Time) *gating {
	return &gating{d: d, now: now, gates: map[[2]string]store.NotifyGate{}, folded: map[[2]string]bool{}}
}

// load reads target's gates named keys that this round has not read;
// those not stored are new (Rev 0).
func (g *gating) load(ctx context.Context, target string, keys []string) error {
	var missing []string
	for _, k := range keys {
		if _, ok := g.gates[[2]string{target, k}]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	got, err := g.d.st.NotifyGates(ctx, target, missing)
	if err != nil {
		return err
	}
	for _, k := range missing {
		g.gates[[2]string{target, k}] = store.NotifyGate{Target: target, Key: k}
	}
	for _, gt := range got {
		g.gates[[2]string{target, gt.Key}] = gt
	}
	return nil
}

// forget drops what the round read of target's gates: one moved.
func (g *gating) forget(target string) {
	maps.DeleteFunc(g.gates, func(k [2]string, _ store.NotifyGate) bool { return k[0] == target })
}

// admit reports whether record n, not tried yet, goes out now: it passes
// each of its gates, which count it; or the first that holds it back
// folds it (false). A gate that moved meanwhile leaves it due, for the
// next round (false, nil).
func (g *gating) admit(ctx context.Context, n store.Notification) (bool, error) {
	var body api.Notification
	if err := json.Unmarshal(n.Body, &body); err != nil {
		return true, nil // Send says what is wrong with it
	}
	keys := gateKeys(n.Gate, body)
	if err := g.load(ctx, n.Target, keys); err != nil {
		return false, err
	}
	if g.passed(n.Target, keys, n.ID) {
		// Let through before, and cut by a crash before its first try was
		// recorded: counted then, it goes out now.
		return true, nil
	}
	window := g.d.opts.Window
	next := make([]store.NotifyGate, 0, len(keys))
	for _, k := range keys {
		gt := g.gates[[2]string{n.Target, k}]
		_, most := g.d.opts.limitOf(k)
		open := gt.Until.After(g.now)
		switch {
		case gt.Held != "" && gt.Held == n.ID:
			// The gate's fold, due at its window's end: out it goes, and
			// a window starts.
			gt.Held, gt.Until, gt.Sent, gt.Passed = "", g.now.Add(window), 1, []string{n.ID}
		case gt.Held != "", open && gt.Sent >= most:
			if n.Gate != "" && len(next) > 0 {
				// A fold out of its own gate, into a wider one's: its gate
				// holds it no more, and a window starts there.
				if ok, err := g.put(ctx, n.Target, next); !ok || err != nil {
					return false, err
				}
			}
			return false, g.fold(ctx, n, body, gt)
		case open:
			gt.Sent++
			gt.Passed = append(slices.Clip(gt.Passed), n.ID)
		default:
			gt.Until, gt.Sent, gt.Passed = g.now.Add(window), 1, []string{n.ID}
		}
		next = append(next, gt)
	}
	// Not written (a gate moved): n stays due, for the next round.
	return g.put(ctx, n.Target, next)
}

// passed reports whether every one of target's gates named keys let
// record id through in its window: they are written all at once, so a
// record they passed is in all of them.
func (g *gating) passed(target string, keys []string, id string) bool {
	for _, k := range keys {
		gt := g.gates[[2]string{target, k}]
		if !gt.Until.After(g.now) || !slices.Contains(gt.Passed, id) {
			return false
		}
	}
	return true
}

// put writes gates (target's) and keeps what it wrote. When one moved
// meanwhile it writes none, forgets what it read of target's, and
// reports false.
func (g *gating) put(ctx context.Context, target string, gates []store.NotifyGate) (bool, error) {
	err := g.d.st.PutNotifyGates(ctx, gates...)
	if errors.Is(err, store.ErrGateMoved) {
		g.forget(target)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, gt := range gates {
		gt.Rev++
		g.gates[[2]string{gt.Target, gt.Key}] = gt
	}
	return true, nil
}

// fold folds n (body its notification) into what gate gt holds back: a
// record due when gt's window ends (n itself, when it holds none yet).
func (g *gating) fold(ctx context.Context, n store.Notification, body api.Notification, gt store.NotifyGate) error {
	o := &g.d.opts
	limit, most := o.limitOf(gt.Key)
	var (
		ferr error
		held string // the record that holds it, as the store found it
	)
	err := g.d.st.FoldNotification(ctx, n, gt, func(h *store.Notification) {
		held = h.ID
		var into *api.Notification
		if h.ID != n.ID {
			var hb api.Notification
			if err := json.Unmarshal(h.Body, &hb); err == nil {
				into = &hb
			}
		} else {
			h.Due = gt.Until
			if !gt.Until.After(g.now) {
				h.Due = g.now
			}
		}
		b, err := json.Marshal(folded(into, body, limit, most, o.Window))
		if err != nil {
			ferr = err
			return
		}
		h.Body, h.Gate = b, gt.Key
	})
	if errors.Is(err, store.ErrGateMoved) {
		g.forget(n.Target)
		return nil
	}
	if err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	o.Counts.add(n.Target, Folded)
	if held == n.ID {
		// A fold begins: said once per limit and window, loud for the
		// target's (a flood), quiet for the narrower ones.
		level := slog.LevelDebug
		if gt.Key == targetGate {
			level = slog.LevelInfo
		}
		o.Logger.Log(ctx, level, "notifications held back by a rate limit: they are folded into one, sent when its window ends",
			"target", n.Target, "limit", limit, "until", gt.Until.UTC().Format(time.RFC3339))
	}
	gt.Held, gt.Rev = held, gt.Rev+1
	g.gates[[2]string{gt.Target, gt.Key}] = gt
	g.folded[[2]string{n.Target, held}] = true
	return nil
}

// counts are what n stands for: itself, or what it folded.
func counts(n api.Notification) api.NotifyFolded {
	if f := n.Folded; f != nil {
		return *f
	}
	return api.NotifyFolded{Count: 1, Events: map[api.NotifyEvent]int{n.Event: 1}, First: n.At, Last: n.At, Latest: n.Text}
}

// folded is add folded into into (nil: add starts a fold): the counts
// summed, the latest's details kept, a subject or an event no longer
// named once they differ (a digest), and the text said again.
func folded(into *api.Notification, add api.Notification, limit string, most int, window time.Duration) api.Notification {
	a := counts(add)
	a.Events = maps.Clone(a.Events)
	out := add
	if into != nil {
		out = *into
		f := counts(*into)
		f.Events = maps.Clone(f.Events)
		f.Count += a.Count
		for e, c := range a.Events {
			f.Events[e] += c
		}
		if a.First.Before(f.First) {
			f.First = a.First
		}
		latest := !a.Last.Before(f.Last)
		if latest {
			f.Last, f.Latest = a.Last, a.Latest
			out.At, out.Said = add.At, add.Said
		}
		ik, iid := subjectOf(*into)
		ak, aid := subjectOf(add)
		switch {
		case ik != ak || iid != aid:
			out.Task, out.Agent, out.Said, out.Link = nil, nil, nil, consoleHome(cmp.Or(into.Link, add.Link))
		case latest:
			out.Task, out.Agent, out.Link = add.Task, add.Agent, add.Link
		}
		if out.Event != add.Event {
			out.Event = api.NotifyDigest
		}
		a = f
	}
	a.Limit, a.WindowS = limit, window.Seconds()
	out.Folded = &a
	out.Text = foldText(out, most, window)
	return out
}

// consoleHome is the console's home, from a link to one of its pages.
func consoleHome(link string) string {
	if link == "" || strings.HasSuffix(link, "/") {
		return link
	}
	if i := strings.LastIndex(link, "/tasks/"); i >= 0 {
		return link[:i] + "/"
	}
	return strings.TrimSuffix(link, "/agents") + "/"
}

// foldText says a fold in one line: the latest's text and how many it
// stands for, or, when they differ in event or subject, the counts by
// event and the latest's text.
func foldText(n api.Notification, most int, window time.Duration) string {
	f := n.Folded
	since := f.First.UTC().Format("15:04:05 UTC")
	times := "once"
	if f.Count > 1 {
		times = fmt.Sprintf("%d times in %s", f.Count, f.Last.Sub(f.First).Round(time.Second))
	}
	var why string
	switch f.Limit {
	case "repeat":
		why = fmt.Sprintf("repeats within %s are folded into one notice", window)
	case "target":
		why = fmt.Sprintf("held back: at most %d notifications to this target per %s", most, window)
	default:
		why = fmt.Sprintf("held back: at most %d notifications about one %s per %s", most, f.Limit, window)
	}
	if n.Event != api.NotifyDigest && (n.Task != nil || n.Agent != nil) {
		return fmt.Sprintf("%s [%s since %s; %s]", f.Latest, times, since, why)
	}
	events := slices.Sorted(maps.Keys(f.Events))
	var parts []string
	for _, e := range events {
		parts = append(parts, fmt.Sprintf("%d %s", f.Events[e], e))
	}
	about := ""
	if kind, id := subjectOf(n); kind != "" {
		about = strings.ToUpper(kind[:1]) + kind[1:] + " " + api.Name(id) + ": "
	}
	return fmt.Sprintf("%s%d notifications since %s (%s): %s; the latest: %s", about, f.Count, since, why, strings.Join(parts, ", "), f.Latest)
}
