package notify

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
)

// A webhook delivery, as a receiver gets it on loopback, verifies; the
// same with its body, timestamp or signature changed, or too old, does
// not.
func TestWebhookSignatureVerifies(t *testing.T) {
	r := newReceiver(t)
	now := time.Unix(1767225600, 0)
	target := Target{Name: "hooks", Kind: Webhook, URL: r.URL + "/agent", Secret: testSecret}
	rec := record(t, "n1", "hooks", api.NotifyCompleted, now)
	code, err := Send(context.Background(), NewClient(), target, rec.Body, now)
	if err != nil || code != 200 {
		t.Fatalf("Send: %d, %v", code, err)
	}
	got := r.deliveries()
	if len(got) != 1 {
		t.Fatalf("the receiver got %d requests, want 1", len(got))
	}
	d := got[0]
	if string(d.body) != string(rec.Body) {
		t.Errorf("body %s, want the stored one %s", d.body, rec.Body)
	}
	for h, want := range map[string]string{"Content-Type": "application/json", HeaderID: "n1", HeaderEvent: "task.completed",
		HeaderTimestamp: strconv.FormatInt(now.Unix(), 10)} {
		if d.header.Get(h) != want {
			t.Errorf("%s: %q, want %q", h, d.header.Get(h), want)
		}
	}
	ts, sig := d.header.Get(HeaderTimestamp), d.header.Get(HeaderSignature)
	if err := Verify(testSecret, d.body, ts, sig, now.Add(time.Minute), DefaultTolerance); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	altered := append([]byte{}, d.body...)
	altered[len(altered)-2] ^= 1
	earlier := strconv.FormatInt(now.Unix()-1, 10)
	for _, c := range []struct {
		name         string
		secret, body []byte
		ts, sig      string
		at           time.Time
		want         error
	}{
		{"body altered", testSecret, altered, ts, sig, now, ErrSignature},
		{"timestamp altered", testSecret, d.body, earlier, sig, now, ErrSignature},
		{"another secret", []byte("another secret of thirty-two bytes!!"), d.body, ts, sig, now, ErrSignature},
		{"no signature", testSecret, d.body, ts, "", now, ErrSignature},
		{"not v1", testSecret, d.body, ts, "v0=" + sig[3:], now, ErrSignature},
		{"too old", testSecret, d.body, ts, sig, now.Add(DefaultTolerance + time.Second), ErrTimestamp},
		{"from the future", testSecret, d.body, ts, sig, now.Add(-DefaultTolerance - time.Second), ErrTimestamp},
		{"timestamp not a number", testSecret, d.body, "yesterday", sig, now, ErrTimestamp},
	} {
		if err := Verify(c.secret, c.body, c.ts, c.sig, c.at, DefaultTolerance); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
	// Two signatures while a secret is replaced: either matches.
	both := Sign([]byte("the old secret, also thirty-two bytes"), d.body, ts) + "," + sig
	if err := Verify(testSecret, d.body, ts, both, now, DefaultTolerance); err != nil {
		t.Errorf("Verify with two signatures: %v", err)
	}
}
