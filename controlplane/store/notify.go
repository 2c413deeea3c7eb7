package store

import (
	"context"
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
}

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
}
