package store

import (
	"context"
	"errors"
	"time"
)

// Notification is one notification on its way to one target: written in
// the same transaction as the change that causes it (Tx.Notify), or alone
// for a change that holds no task (Notifier.Notify), and kept until it is
// delivered or given up on (NotificationDone). One change makes one
// record per target, all with the same ID.
type Notification struct {
	// ID is the notification's (api.Notification.ID): with Target, it
	// names the record.
	ID string `json:"id"`
	// Target is the name of the target it goes to.
	Target string `json:"target"`
	// Body is the api.Notification, as JSON.
	Body []byte `json:"body"`
	// Created is when it was written; Due, when it is next tried.
	Created time.Time `json:"created"`
	Due     time.Time `json:"due"`
	// Attempts counts the deliveries tried; LastError is the last one's
	// failure, one line.
	Attempts  int    `json:"attempts,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Gate, when set, is the key of the gate (NotifyGate) whose held-back
	// notifications this record folds: written by FoldNotification, never
	// by the rules that write a change's notification.
	Gate string `json:"gate,omitempty"`
}

// NotifyGate is one rate limit's state for one target (package notify
// keeps them: the deliverer, in the replica that leads, reads and writes
// them): the window it counts in, what it let through in it, and the
// record that folds what it held back.
type NotifyGate struct {
	// Target and Key name it: Key is the limit's and what it is of (an
	// agent's or a task's event, an agent or a task, the target).
	Target string `json:"target"`
	Key    string `json:"key"`
	// Until is when its window ends; Sent, the notifications it let
	// through in it.
	Until time.Time `json:"until"`
	Sent  int       `json:"sent,omitempty"`
	// Passed are the IDs of the records it let through in its window (at
	// most Sent): a record passed and then cut by a crash before its
	// first delivery was recorded passes again, not counted twice.
	Passed []string `json:"passed,omitempty"`
	// Held is the ID of the record (its Target's) that folds what the
	// gate held back, "" for none.
	Held string `json:"held,omitempty"`
	// Rev counts the gate's writes: a write of a gate read at Rev r
	// stores it only if it is still at r (0: not stored), and stores it
	// at r+1.
	Rev int64 `json:"rev"`
}

// ErrGateMoved is the answer of a gate's write when the gate changed since
// it was read (another replica led meanwhile): nothing was stored; read
// it again.
var ErrGateMoved = errors.New("a notification gate changed since it was read")

// Notifier keeps the notifications waiting for delivery. Every store
// keeps it (Store embeds it); a Tx writes them with its changes
// (Tx.Notify).
type Notifier interface {
	// Notify stores notifications that no task transaction carries (an
	// agent's), synced before it returns. A record whose ID and Target
	// are stored already is left as it is.
	Notify(ctx context.Context, ns ...Notification) error
	// DueNotifications returns up to limit records due at or before now,
	// the earliest due first.
	DueNotifications(ctx context.Context, now time.Time, limit int) ([]Notification, error)
	// NotificationDone removes a record: it was delivered, or given up
	// on. Removing one that is gone is not an error.
	NotificationDone(ctx context.Context, id, target string) error
	// NotificationRetry records a failed delivery: Attempts one more,
	// LastError lastErr, and next due at due.
	NotificationRetry(ctx context.Context, id, target string, due time.Time, lastErr string) error

	// NotifyGates returns target's gates named keys, those stored.
	NotifyGates(ctx context.Context, target string, keys []string) ([]NotifyGate, error)
	// PutNotifyGates stores gates, each only if it is still at its Rev,
	// all of them or none (ErrGateMoved).
	PutNotifyGates(ctx context.Context, gates ...NotifyGate) error
	// FoldNotification folds record n into the record that holds what
	// gate g held back, all at once: that record is g.Held's when it is
	// stored, else n itself. fold is given it (n, when it is n) and
	// changes it (its Body, Due and Gate); then it is stored whole (its
	// ID and Target kept), n is removed unless it is that record, and g
	// is stored with Held its ID, if g is still at its Rev: else nothing
	// is and the answer is ErrGateMoved. fold runs in the store's
	// transaction: it must not call the store.
	FoldNotification(ctx context.Context, n Notification, g NotifyGate, fold func(held *Notification)) error
	// PruneNotifyGates removes the gates whose window ended before before
	// and that hold no stored record.
	PruneNotifyGates(ctx context.Context, before time.Time) error
}
