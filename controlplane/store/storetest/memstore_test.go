package storetest_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/state"
)

// memStore is a store in memory, for the suite's own tests: simple and
// correct, unless broken names a promise it breaks (see broken_test.go).
type memStore struct {
	broken string

	mu   sync.Mutex
	cond *sync.Cond
	d    *memData        // what a reopen finds again
	held map[string]bool // tasks a transaction holds
}

// memData is a memStore's records.
type memData struct {
	tasks  map[string]*state.Task
	events map[string][]store.EventLine // by task, in seq order
	keys   map[string]map[string]bool   // by task
	tokens map[string]string            // agent id: token hash
	agents map[string]store.Agent
	notes  map[noteKey]store.Notification
	secret map[string][]byte
	// revoked are the console's revoked sessions: nonce → expiry.
	revoked map[string]time.Time
	gates   map[noteKey]store.NotifyGate // by target and key
	// granted are the labels people granted, by agent id; adopt the ids
	// still to adopt theirs.
	granted map[string]map[string]string
	adopt   map[string]bool
}

// noteKey names a notification record.
type noteKey struct{ id, target string }

func newMemStore(d *memData, broken string) *memStore {
	if d == nil {
		d = &memData{tasks: map[string]*state.Task{}, events: map[string][]store.EventLine{},
			keys: map[string]map[string]bool{}, tokens: map[string]string{}, agents: map[string]store.Agent{},
			notes: map[noteKey]store.Notification{}, secret: map[string][]byte{}, revoked: map[string]time.Time{}, gates: map[noteKey]store.NotifyGate{},
			granted: map[string]map[string]string{}, adopt: map[string]bool{}}
	}
	m := &memStore{broken: broken, d: d, held: map[string]bool{}}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// memTx is a transaction of a memStore.
type memTx struct {
	m      *memStore
	hold   []string // the tasks it holds
	locked map[string]*state.Task
	saved  map[string]*state.Task
	keys   map[string]map[string]bool
	lines  map[string][]store.EventLine
	notes  []store.Notification
}

func (m *memStore) newTx() *memTx {
	return &memTx{m: m, locked: map[string]*state.Task{}, saved: map[string]*state.Task{},
		keys: map[string]map[string]bool{}, lines: map[string][]store.EventLine{}}
}

func (m *memStore) copyOf(t *state.Task) *state.Task {
	if m.broken == "no copies" {
		return t
	}
	return t.Clone()
}

func (m *memStore) Create(_ context.Context, t *state.Task) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.d.tasks[t.ID] != nil {
		return errors.New("task exists")
	}
	m.d.tasks[t.ID] = m.copyOf(t)
	return nil
}

func (m *memStore) Task(_ context.Context, id string) (*state.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.d.tasks[id]; t != nil {
		return m.copyOf(t), nil
	}
	return nil, nil
}

// sorted is every task, oldest first. mu is held.
func (m *memStore) sorted() []*state.Task {
	var out []*state.Task
	for _, t := range m.d.tasks {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *state.Task) int {
		if m.broken == "by id" {
			return cmp.Compare(a.ID, b.ID)
		}
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func (m *memStore) Tasks(_ context.Context, q store.Query) ([]*state.Task, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := m.sorted()
	if q.Order == api.OrderNewest && m.broken != "newest ignored" {
		slices.Reverse(all)
	}
	if q.After != "" {
		i := slices.IndexFunc(all, func(t *state.Task) bool { return t.ID == q.After })
		if i < 0 {
			return nil, "", errors.New("unknown cursor")
		}
		all = all[i+1:]
	}
	var page []*state.Task
	for _, t := range all {
		if !q.Match(t) {
			continue
		}
		if q.Limit > 0 && len(page) == q.Limit {
			return page, page[len(page)-1].ID, nil
		}
		page = append(page, m.copyOf(t))
	}
	if m.broken == "cursor on a full last page" && q.Limit > 0 && len(page) == q.Limit {
		return page, page[len(page)-1].ID, nil
	}
	return page, "", nil
}

func (m *memStore) Count(context.Context) (map[state.Phase]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := map[state.Phase]int{}
	for _, t := range m.d.tasks {
		n[t.Phase]++
	}
	return n, nil
}

// lock waits until no other transaction holds ids, then holds them.
func (m *memStore) lock(ids []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for slices.ContainsFunc(ids, func(id string) bool { return m.held[id] }) {
		m.cond.Wait()
	}
	for _, id := range ids {
		m.held[id] = true
	}
}

// end stores what tx saved and appended unless err, and lets go of what
// it held.
func (m *memStore) end(tx *memTx, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil || m.broken == "notifies on a failed update" {
		m.notify(tx.notes)
	}
	if err == nil || m.broken == "stores a failed update" {
		for id, t := range tx.saved {
			m.d.tasks[id] = t.Clone()
		}
		for id, keys := range tx.keys {
			if m.d.keys[id] == nil {
				m.d.keys[id] = map[string]bool{}
			}
			for k := range keys {
				m.d.keys[id][k] = true
			}
		}
		for id, lines := range tx.lines {
			all := append(m.d.events[id], lines...)
			slices.SortStableFunc(all, func(a, b store.EventLine) int { return cmp.Compare(a.Seq, b.Seq) })
			m.d.events[id] = all
		}
	}
	for _, id := range tx.hold {
		delete(m.held, id)
	}
	m.cond.Broadcast()
}

func (m *memStore) Update(_ context.Context, ids []string, fn func(store.Tx) error) error {
	tx := m.newTx()
	if m.broken != "no locks" {
		m.lock(ids)
		tx.hold = ids
	}
	m.mu.Lock()
	for _, id := range ids {
		if t := m.d.tasks[id]; t != nil {
			tx.locked[id] = t.Clone()
		}
	}
	m.mu.Unlock()
	if m.broken == "no locks" {
		time.Sleep(time.Millisecond) // widens the race the broken store has, for the suite to catch
	}
	err := fn(tx)
	m.end(tx, err)
	return err
}

func (m *memStore) Claim(ctx context.Context, fn func(store.Tx, *state.Task) (bool, error)) error {
	m.mu.Lock()
	candidates := m.sorted()
	m.mu.Unlock()
	tx := m.newTx()
	var err error
	for _, c := range candidates {
		m.mu.Lock()
		t := m.d.tasks[c.ID]
		ok := t != nil && (!m.held[c.ID] || m.broken == "claims held tasks") && (t.Phase == state.PhaseQueued || m.broken == "claims any phase")
		if ok {
			m.held[c.ID] = true
			tx.hold = append(tx.hold, c.ID)
			tx.locked[c.ID] = t.Clone()
		}
		m.mu.Unlock()
		if !ok {
			continue
		}
		if m.broken == "claims held tasks" {
			time.Sleep(time.Millisecond) // widens the race the broken store has, for the suite to catch
		}
		var stop bool
		if stop, err = fn(tx, tx.locked[c.ID]); err != nil || stop {
			break
		}
	}
	m.end(tx, err)
	return err
}

func (m *memStore) AgentAndLeased(ctx context.Context, id string) (store.Agent, bool, []*state.Task, error) {
	a, ok, err := m.Agent(ctx, id)
	if err != nil {
		return store.Agent{}, false, nil, err
	}
	leased, err := m.Leased(ctx, id)
	return a, ok, leased, err
}

func (m *memStore) Leased(_ context.Context, agentID string) ([]*state.Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*state.Task
	for _, t := range m.d.tasks {
		if (!t.Phase.Terminal() || m.broken == "leased ended") && t.Lease != nil && t.Lease.AgentID == agentID {
			out = append(out, t.Clone())
		}
	}
	return out, nil
}

func (m *memStore) Live(_ context.Context, fn func(*state.Task) error) error {
	m.mu.Lock()
	var live []*state.Task
	for _, t := range m.d.tasks {
		if !t.Phase.Terminal() {
			live = append(live, t.Clone())
		}
	}
	m.mu.Unlock()
	for _, t := range live {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) Events(_ context.Context, taskID string, after, limit int, maxBytes int64) ([]store.EventLine, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.EventLine
	var size int64
	for _, l := range m.d.events[taskID] {
		if l.Seq <= after {
			continue
		}
		over := size+int64(len(l.Line)) > maxBytes
		if len(out) == limit || over && (len(out) > 0 || m.broken == "no line over maxBytes") {
			return out, true, nil
		}
		size += int64(len(l.Line))
		out = append(out, store.EventLine{Seq: l.Seq, Line: slices.Clone(l.Line)})
	}
	return out, false, nil
}

func (m *memStore) Prune(_ context.Context, before time.Time, limit int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.sorted() {
		if n == limit && m.broken != "prunes past limit" {
			break
		}
		if t.Phase.Terminal() && state.EndedAt(t).Before(before) && !m.held[t.ID] {
			delete(m.d.tasks, t.ID)
			if m.broken != "prune keeps events" {
				delete(m.d.events, t.ID)
			}
			delete(m.d.keys, t.ID)
			n++
		}
	}
	return n, nil
}

func (m *memStore) Register(_ context.Context, id, tokenHash string, replace bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.d.tokens[id]; ok && !replace && m.broken != "register replaces" {
		return store.ErrRegistered
	}
	m.d.tokens[id] = tokenHash
	return nil
}

func (m *memStore) Revoke(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.d.tokens[id]
	delete(m.d.tokens, id)
	if m.broken != "labels outlive revoke" {
		delete(m.d.granted, id)
		delete(m.d.adopt, id)
	}
	return ok, nil
}

func (m *memStore) GrantLabels(_ context.Context, id string, set map[string]string, remove []string) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.d.tokens[id]; !ok {
		return nil, fmt.Errorf("grant labels to %s: %w", id, store.ErrNotRegistered)
	}
	labels := maps.Clone(m.d.granted[id])
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, set)
	for _, k := range remove {
		delete(labels, k)
	}
	m.d.granted[id] = labels
	delete(m.d.adopt, id)
	return maps.Clone(labels), nil
}

func (m *memStore) AdoptLabels(_ context.Context, id string, labels map[string]string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.d.adopt[id] {
		return false, nil
	}
	delete(m.d.adopt, id)
	m.d.granted[id] = maps.Clone(labels)
	return true, nil
}

// withGrants is a with the labels granted it, as the store reads it.
// mu is held.
func (m *memStore) withGrants(a store.Agent, id string) store.Agent {
	a.Granted, a.AdoptLabels = maps.Clone(m.d.granted[id]), m.d.adopt[id]
	return a
}

func (m *memStore) AgentByToken(_ context.Context, tokenHash string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, h := range m.d.tokens {
		if h == tokenHash {
			return id, nil
		}
	}
	return "", nil
}

func (m *memStore) PutAgent(_ context.Context, a store.Agent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.d.agents[a.View.AgentID]; ok && m.broken == "serves forever" {
		a.View.Repos = append(slices.Clone(a.View.Repos), old.View.Repos...)
	}
	a.Granted, a.AdoptLabels = nil, false // kept apart, by GrantLabels
	m.d.agents[a.View.AgentID] = a
	return nil
}

func (m *memStore) Agent(_ context.Context, id string) (store.Agent, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.d.agents[id]
	return m.withGrants(a, id), ok, nil
}

func (m *memStore) Agents(context.Context) ([]store.Agent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Agent
	for id, a := range m.d.agents {
		out = append(out, m.withGrants(a, id))
	}
	slices.SortFunc(out, func(a, b store.Agent) int { return cmp.Compare(a.View.AgentID, b.View.AgentID) })
	return out, nil
}

func (m *memStore) Serves(_ context.Context, repo string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.d.agents {
		if slices.Contains(a.View.Repos, repo) {
			return true, nil
		}
	}
	return false, nil
}

func (m *memStore) Lead(context.Context) (bool, error) { return true, nil }
func (m *memStore) Shared() bool                       { return false }

func (m *memStore) Secret(_ context.Context, name string, size int) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.d.secret[name]; ok && m.broken != "forgets secrets" {
		if len(b) != size {
			return nil, fmt.Errorf("secret %s is %d bytes, not %d", name, len(b), size)
		}
		return slices.Clone(b), nil
	}
	b := make([]byte, size)
	rand.Read(b)
	m.d.secret[name] = b
	return slices.Clone(b), nil
}
func (m *memStore) Close() error { return nil }

func (m *memStore) RevokeSession(_ context.Context, nonce string, expires, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, exp := range m.d.revoked {
		if !exp.After(now) && m.broken != "keeps expired sessions" {
			delete(m.d.revoked, n)
		}
	}
	if exp, ok := m.d.revoked[nonce]; !ok || expires.After(exp) || m.broken == "shortens sessions" {
		m.d.revoked[nonce] = expires
	}
	return nil
}

func (m *memStore) SessionRevoked(_ context.Context, nonce string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.d.revoked[nonce]
	return ok, nil
}

func (tx *memTx) Task(id string) *state.Task {
	if t := tx.saved[id]; t != nil {
		return t
	}
	return tx.locked[id]
}

func (tx *memTx) Save(t *state.Task) {
	if _, ok := tx.locked[t.ID]; ok {
		tx.saved[t.ID] = t.Clone()
	}
}

func (tx *memTx) Seen(taskID, key string) (bool, error) {
	tx.m.mu.Lock()
	defer tx.m.mu.Unlock()
	return tx.keys[taskID][key] || tx.m.d.keys[taskID][key], nil
}

func (tx *memTx) LastSeq(taskID string) int {
	if l := tx.lines[taskID]; len(l) > 0 {
		return l[len(l)-1].Seq
	}
	tx.m.mu.Lock()
	defer tx.m.mu.Unlock()
	if l := tx.m.d.events[taskID]; len(l) > 0 {
		return l[len(l)-1].Seq
	}
	return 0
}

func (tx *memTx) Append(taskID, key string, _ state.EventKind, seq int, line []byte) {
	if tx.keys[taskID] == nil {
		tx.keys[taskID] = map[string]bool{}
	}
	if line != nil || tx.m.broken != "forgets cut keys" {
		tx.keys[taskID][key] = true
	}
	if line != nil {
		tx.lines[taskID] = append(tx.lines[taskID], store.EventLine{Seq: seq, Line: slices.Clone(line)})
	}
}

func (tx *memTx) Notify(ns ...store.Notification) {
	for _, n := range ns {
		n.Body = slices.Clone(n.Body)
		tx.notes = append(tx.notes, n)
	}
}

// notify stores ns, but not over a record of the same ID and Target. mu
// is held.
func (m *memStore) notify(ns []store.Notification) {
	for _, n := range ns {
		k := noteKey{n.ID, n.Target}
		if _, ok := m.d.notes[k]; ok && m.broken != "notify replaces" {
			continue
		}
		n.Body = slices.Clone(n.Body)
		m.d.notes[k] = n
	}
}

func (m *memStore) Notify(_ context.Context, ns ...store.Notification) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notify(ns)
	return nil
}

func (m *memStore) DueNotifications(_ context.Context, now time.Time, limit int) ([]store.Notification, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Notification
	for _, n := range m.d.notes {
		if !n.Due.After(now) || m.broken == "ignores due" {
			n.Body = slices.Clone(n.Body)
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b store.Notification) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Target, b.Target))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memStore) NotificationDone(_ context.Context, id, target string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.d.notes, noteKey{id, target})
	return nil
}

func (m *memStore) NotificationRetry(_ context.Context, id, target string, due time.Time, lastErr string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := noteKey{id, target}
	n, ok := m.d.notes[k]
	if !ok {
		return nil
	}
	if m.broken != "retry counts no attempt" {
		n.Attempts++
	}
	n.Due, n.LastError = due, lastErr
	m.d.notes[k] = n
	return nil
}

func (m *memStore) NotifyGates(_ context.Context, target string, keys []string) ([]store.NotifyGate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.NotifyGate
	for _, k := range keys {
		if g, ok := m.d.gates[noteKey{target, k}]; ok {
			out = append(out, g)
		}
	}
	return out, nil
}

// moved reports whether gate g is no longer at its Rev. mu is held.
func (m *memStore) moved(g store.NotifyGate) bool {
	return m.d.gates[noteKey{g.Target, g.Key}].Rev != g.Rev && m.broken != "no gate revs"
}

func (m *memStore) PutNotifyGates(_ context.Context, gates ...store.NotifyGate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range gates {
		if m.moved(g) {
			return store.ErrGateMoved
		}
	}
	for _, g := range gates {
		g.Rev++
		m.d.gates[noteKey{g.Target, g.Key}] = g
	}
	return nil
}

func (m *memStore) FoldNotification(_ context.Context, n store.Notification, g store.NotifyGate, fold func(*store.Notification)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.moved(g) {
		return store.ErrGateMoved
	}
	held, ok := m.d.notes[noteKey{g.Held, n.Target}]
	if g.Held == "" || !ok {
		held = n
	}
	held.Body = slices.Clone(held.Body)
	id := held.ID
	fold(&held)
	held.ID, held.Target = id, n.Target
	if held.ID != n.ID && m.broken != "fold keeps the folded" {
		delete(m.d.notes, noteKey{n.ID, n.Target})
	}
	m.d.notes[noteKey{held.ID, held.Target}] = held
	g.Held, g.Rev = held.ID, g.Rev+1
	m.d.gates[noteKey{g.Target, g.Key}] = g
	return nil
}

func (m *memStore) PruneNotifyGates(_ context.Context, before time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, g := range m.d.gates {
		if _, holds := m.d.notes[noteKey{g.Held, g.Target}]; g.Until.Before(before) && (g.Held == "" || !holds || m.broken == "prunes holding gates") {
			delete(m.d.gates, k)
		}
	}
	return nil
}
