package store

import (
	"context"
	"time"
)

// Sessions keeps the web console's revoked sessions. A session cookie is
// signed, not stored (package console), so it is good on every replica
// and after every restart; its sign-out must be too: the store keeps
// the nonce of each session signed out until the cookie would have
// expired, and every request's session is looked up in it.
type Sessions interface {
	// RevokeSession keeps nonce revoked until expires, synced (every
	// replica sees it) before it returns, and forgets those that expired
	// at or before now. Revoking a nonce kept already keeps the later
	// expiry.
	RevokeSession(ctx context.Context, nonce string, expires, now time.Time) error
	// SessionRevoked reports whether nonce is kept revoked.
	SessionRevoked(ctx context.Context, nonce string) (bool, error)
}
