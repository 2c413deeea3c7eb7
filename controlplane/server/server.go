package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/console"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/internal/utc"
	"github.com/edgeagent/agent/state"
)

// Defaults of Options, used by the command line's settings table too.
const (
	DefaultLease             = 60 * time.Second
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultRetention         = 30 * 24 * time.Hour
)

// Options configure the reference control plane. Zero fields take
// the defaults their comments give.
type Options struct {
	// Store keeps the tasks, events and agents: required. Its opener
	// closes it, after Close. A store that a crash may leave behind its
	// events (store.Recoverer: the file store) is brought up to date by
	// New.
	Store store.Store
	// Token is the registration secret: it enrols agents (POST
	// /v1/agents/register) and does nothing else. Required, at least
	// MinTokenLen characters.
	Token string
	// OperatorTokens are the people's tokens (one per person): they
	// submit, read, cancel, retry, answer approvals and manage agents.
	// At least one is required, each at least MinTokenLen characters and
	// none the registration secret.
	OperatorTokens []string
	// Lease is how long a claim lasts without renewal. Default 60 s.
	Lease time.Duration
	// HeartbeatInterval is what agents are told to use. An agent silent for
	// three intervals is offline and its leases lapse. Default 10 s.
	HeartbeatInterval time.Duration
	// Limits are the watchdog's queued and stall limits.
	Limits state.Limits
	// MaxAttemptOutput caps the log output stored for one attempt: its
	// log events' bytes in the events file. Past it, log events are
	// accepted and counted, their lines not stored; one stored event marks
	// the cut. Default DefaultMaxAttemptOutput (8 MiB).
	MaxAttemptOutput int64
	// Retention is how long an ended task and its events are kept; then
	// the watchdog removes them. Zero keeps them forever.
	Retention time.Duration
	// MaxClaimWait caps how long a claim is held waiting for work (its
	// wait_ms). Default, and at most, api.MaxClaimWait (20 s).
	MaxClaimWait time.Duration
	// PublicURL is the address people reach the control plane at (its
	// console), such as https://cp.example.com: notifications link to it,
	// and the console's cookies are Secure when it is https. Empty: the
	// console serves plain HTTP on its listening address, and
	// notifications carry no link.
	PublicURL string
	// Replica names this replica of the control plane: each agent's
	// record says which replica its last heartbeat reached
	// (api.AgentView.Replica). Empty: none is said.
	Replica string
	// Notify are the notification targets: every notification is
	// written once per target that wants its event, in the transaction
	// of the change that causes it. Empty: no notifications.
	Notify []NotifyTarget
	// Delegate are the delegation rules subtasks are submitted under
	// (see DelegateRule); empty: the default rules by agent type (see
	// DefaultDelegation).
	Delegate []DelegateRule
	// MaxInFlight bounds the requests of each kind in flight at once
	// (admission.go); past it a request is answered 503 with
	// Retry-After at once. A kind left out, or 0, takes
	// DefaultMaxInFlight's.
	MaxInFlight map[RequestKind]int
	Logger      *slog.Logger
	Now         func() time.Time

	// claimPoll, when set, is how often the claims waiting look for work
	// (watchClaims), in place of claimLook and sharedClaimPoll: for the
	// package's tests.
	claimPoll time.Duration
}

// NotifyTarget is a notification target as the server sees it: a name
// (its records' store.Notification.Target) and the events it wants.
type NotifyTarget struct {
	Name string
	// Events are the events it wants; empty is every one but those a
	// target gets only by naming them (api.NotifyEvent.ByDefault).
	Events []api.NotifyEvent
}

// Server is the reference control plane: its HTTP layer (routes,
// authentication, admission, pages) over its rooms, the rules, the
// dispatch and the watchdog, which work on a store that keeps the
// records (package store). Every change is a store transaction on the
// tasks it touches; each room's own lock guards only what one process
// keeps for itself (waiting claims, counters).
type Server struct {
	opts  Options
	log   *slog.Logger
	store store.Store

	// The rooms of the control plane, each a type of its own: rules, how
	// requests change the tasks over a store transaction (no HTTP);
	// dispatch, the claims waiting for work and for orders; watchdog, the
	// loop that applies the rules of time. The Server is the HTTP layer
	// on top: routes, authentication, admission, pages, the console.
	rules    *rules
	dispatch *dispatch
	watchdog *watchdog

	// admission bounds the requests in flight (admission.go).
	admission *admission

	// operators are the SHA-256 of the operator tokens; throttle counts
	// failed authentications per address.
	operators map[[sha256.Size]byte]bool
	// sessionKeys are the console's session keys, by operator id
	// (console.OperatorID), one per operator token.
	sessionKeys map[string][]byte
	throttle    throttle

	// stopListen ends the listening for tasks other replicas queue
	// (store.QueueListener) and the looks for them (watchClaims);
	// listening waits for both.
	stopListen context.CancelFunc
	listening  sync.WaitGroup
}

// Close stops listening for tasks other replicas queue. The store stays
// open: its opener closes it.
func (s *Server) Close() error {
	s.stopListen()
	s.listening.Wait()
	return nil
}

// Store is the server's store.
func (s *Server) Store() store.Store { return s.store }

// New makes a control plane over opts.Store, which it first brings up to
// date with the events a crash left unapplied, if the store may hold any
// (store.Recoverer).
func New(opts Options) (*Server, error) {
	if opts.Store == nil || opts.Token == "" {
		return nil, errors.New("controlplane: a store and a registration secret are required")
	}
	operators, err := checkTokens(opts.Token, opts.OperatorTokens)
	if err != nil {
		return nil, err
	}
	if err := checkMaxInFlight(opts.MaxInFlight); err != nil {
		return nil, err
	}
	if err := CheckDelegateRules(opts.Delegate); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	opts.Delegate = cloneRules(opts.Delegate)
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.MaxAttemptOutput <= 0 {
		opts.MaxAttemptOutput = DefaultMaxAttemptOutput
	}
	if opts.MaxClaimWait <= 0 || opts.MaxClaimWait > api.MaxClaimWait {
		opts.MaxClaimWait = api.MaxClaimWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = utc.Now
	}
	sessionKeys := make(map[string][]byte, len(opts.OperatorTokens))
	for _, tok := range opts.OperatorTokens {
		sessionKeys[console.OperatorID(tok)] = console.SessionKey(tok)
	}
	s := &Server{opts: opts, log: opts.Logger, store: opts.Store, operators: operators, sessionKeys: sessionKeys,
		admission: newAdmission(opts.MaxInFlight)}
	s.rules = &rules{opts: &s.opts, log: s.log, store: s.store}
	s.dispatch = &dispatch{opts: &s.opts, rules: s.rules, stopWaits: make(chan struct{})}
	s.watchdog = &watchdog{opts: &s.opts, log: s.log, store: s.store, rules: s.rules, dispatch: s.dispatch,
		started: opts.Now(), wasOnline: map[string]bool{}}
	s.rules.dispatch, s.rules.watchdog = s.dispatch, s.watchdog
	if r, ok := s.store.(store.Recoverer); ok {
		// The notifications of the changes replayed are stored before the
		// task that shows the change: a crash may have come before the
		// commit stored them (stored already, they are left as they are),
		// and one after this, before the task is saved, replays it again
		// at the next start.
		err := r.Recover(func(t *state.Task, missed []store.Missed) error {
			before := markOf(t)
			s.rules.replay(t, missed)
			if len(opts.Notify) == 0 {
				return nil
			}
			return s.store.Notify(context.Background(), s.rules.taskNotes(before, t)...)
		})
		if err != nil {
			return nil, err
		}
	}
	if s.rules.taskKey, err = taskTokenKey(s.store); err == nil {
		s.rules.linkKey, err = approvalLinkKey(s.store)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopListen = cancel
	every := claimLook
	if _, ok := s.store.(store.QueueListener); s.store.Shared() {
		every = sharedClaimPoll
		if ok {
			every = listenedClaimPoll
		}
	}
	if opts.claimPoll > 0 {
		every = opts.claimPoll
	}
	s.listening.Go(func() { s.dispatch.watchClaims(ctx, every) })
	if s.store.Shared() {
		// Another replica's cancel wakes nothing here: the claims held
		// open for orders look again often.
		s.listening.Go(func() { tick(ctx, ordersPoll, s.dispatch.wakeAllOrders) })
	}
	if l, ok := s.store.(store.QueueListener); ok {
		s.listening.Go(func() {
			l.ListenQueued(ctx, func(n int) {
				if n > 0 {
					s.dispatch.wakeClaims(n)
				} else {
					s.dispatch.wakeAll()
				}
			})
		})
	}
	return s, nil
}

// newID returns prefix and random hex.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// storeErr is a store's failure as an answer: 503, the store unavailable
// (a database restarting), said in one line.
func storeErr(what string, err error) error {
	if err == nil {
		return nil
	}
	var he *ruleError
	if errors.As(err, &he) {
		return err
	}
	return &ruleError{errUnavailable, fmt.Sprintf("%s: the control plane's store failed: %v", what, err)}
}
