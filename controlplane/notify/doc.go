// Package notify delivers the control plane's notifications to people's
// targets: generic webhooks, Slack incoming webhooks and ntfy topics.
//
// The server writes each notification to the store (store.Notifier), one
// record per target, in the same transaction as the change that causes
// it; Run takes the records that are due and sends them. What it
// promises:
//
//   - At least once: a record leaves the store only when its target
//     answered 2xx (NotificationDone), or when it was given up on after
//     Options.MaxAge of failures, with one error line in the log. A
//     failed delivery is tried again after a backoff (5 s doubling to
//     10 min, jittered); a crash or restart only delays it. A receiver
//     may see one twice, always with the same id: it drops the second.
//   - One sender across replicas: Run sends only while the store says
//     this process leads (store.Store.Lead).
//   - Secrets stay secret: a webhook's HMAC key, an ntfy token and the
//     URL's path (a Slack URL is itself a secret) are never logged nor
//     put in an error; a failure names the target, the status code or
//     the network error, and the URL's host only.
//
// A generic webhook receives the notification (api.Notification) as the
// JSON body of a POST, with these headers:
//
//	Content-Type: application/json
//	X-Agent-Notification-Id: 6f1c…       the id to deduplicate on
//	X-Agent-Event: task.awaiting_reply
//	X-Agent-Timestamp: 1767225600        Unix seconds, when it was sent
//	X-Agent-Signature: v1=5d2a…          hex HMAC-SHA256(secret, timestamp + "." + body)
//
// The timestamp is signed with the body, as Stripe does, so a receiver
// that checks it (Verify) refuses an old delivery played again.
package notify
