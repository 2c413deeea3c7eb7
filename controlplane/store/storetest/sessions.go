package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/store"
)

// revoked reports whether st keeps nonce revoked.
func revoked(t *testing.T, st store.Store, nonce string) bool {
	t.Helper()
	ok, err := st.SessionRevoked(t.Context(), nonce)
	if err != nil {
		t.Fatalf("SessionRevoked(%s): %v", nonce, err)
	}
	return ok
}

func revoke(t *testing.T, st store.Store, nonce string, expires, now time.Time) {
	t.Helper()
	if err := st.RevokeSession(t.Context(), nonce, expires, now); err != nil {
		t.Fatalf("RevokeSession(%s): %v", nonce, err)
	}
}

// sessions checks Sessions: a nonce revoked is kept until it expires,
// then forgotten by a later revocation; others are not revoked.
func (s suite) sessions(t *testing.T) {
	s.run(t, "a revoked nonce is kept, others are not", func(t *testing.T, st store.Store) {
		if revoked(t, st, "n1") {
			t.Fatal("SessionRevoked(n1) before any revocation: true")
		}
		revoke(t, st, "n1", at(720), at(0))
		if !revoked(t, st, "n1") {
			t.Error("SessionRevoked(n1) after RevokeSession: false")
		}
		if revoked(t, st, "n2") || revoked(t, st, "") || revoked(t, st, "N1") {
			t.Error("a nonce never revoked is revoked")
		}
		revoke(t, st, "n1", at(720), at(1)) // again: not an error
		if !revoked(t, st, "n1") {
			t.Error("SessionRevoked(n1) after a second RevokeSession: false")
		}
	})
	s.run(t, "expired nonces are forgotten, live ones kept", func(t *testing.T, st store.Store) {
		revoke(t, st, "early", at(10), at(0))
		revoke(t, st, "late", at(100), at(0))
		revoke(t, st, "extended", at(10), at(0))
		revoke(t, st, "extended", at(200), at(1)) // the later expiry stays
		revoke(t, st, "extended", at(20), at(2))
		revoke(t, st, "now", at(300), at(50))
		if revoked(t, st, "early") {
			t.Error("a nonce that expired before a later revocation is still kept")
		}
		for _, n := range []string{"late", "extended", "now"} {
			if !revoked(t, st, n) {
				t.Errorf("SessionRevoked(%s), not expired: false", n)
			}
		}
		revoke(t, st, "later", at(400), at(150))
		if revoked(t, st, "late") || !revoked(t, st, "extended") {
			t.Errorf("at minute 150: late (expired at 100) kept %v, extended (expires at 200) kept %v; want false, true",
				revoked(t, st, "late"), revoked(t, st, "extended"))
		}
	})
	s.run(t, "concurrent revocations are all kept", func(t *testing.T, st store.Store) {
		const n = 8
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if err := st.RevokeSession(t.Context(), nonceN(i), at(720), at(0)); err != nil {
					t.Errorf("RevokeSession: %v", err)
				}
			})
		}
		wg.Wait()
		for i := range n {
			if !revoked(t, st, nonceN(i)) {
				t.Errorf("SessionRevoked(%s) after concurrent revocations: false", nonceN(i))
			}
		}
	})
}

func nonceN(i int) string { return "nonce-" + string(rune('a'+i)) }

// reopenSessions revokes sessions before a reopen; afterReopenSessions
// checks them after.
func reopenSessions(t *testing.T, st store.Store) {
	revoke(t, st, "kept", at(720), at(0))
}

func afterReopenSessions(t *testing.T, st store.Store) {
	if !revoked(t, st, "kept") {
		t.Error("SessionRevoked(kept) after a reopen: false")
	}
	if revoked(t, st, "other") {
		t.Error("SessionRevoked(other) after a reopen: true")
	}
}
