package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The headers of a webhook delivery.
const (
	HeaderID        = "X-Agent-Notification-Id"
	HeaderEvent     = "X-Agent-Event"
	HeaderTimestamp = "X-Agent-Timestamp"
	HeaderSignature = "X-Agent-Signature"
)

// DefaultTolerance is how old a delivery's timestamp Verify should
// accept, as Stripe's libraries do.
const DefaultTolerance = 5 * time.Minute

// ErrSignature is Verify's answer when the signature does not match;
// ErrTimestamp, when the timestamp is missing, malformed or outside the
// tolerance.
var (
	ErrSignature = errors.New("signature does not match")
	ErrTimestamp = errors.New("timestamp is not within the tolerance")
)

// Sign is the X-Agent-Signature of body sent at timestamp (Unix seconds):
// "v1=" and the hex HMAC-SHA256 of timestamp + "." + body under secret.
func Sign(secret, body []byte, timestamp string) string {
	return "v1=" + hex.EncodeToString(mac(secret, body, timestamp))
}

func mac(secret, body []byte, timestamp string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a webhook delivery as its receiver got it: body, the
// X-Agent-Timestamp and X-Agent-Signature headers. The timestamp must be
// within tolerance of now (either way), so an old delivery played again
// is refused; the signature may list several v1= values, comma-separated
// (one per secret, while one is replaced), and one must match.
func Verify(secret, body []byte, timestamp, signature string, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not Unix seconds", ErrTimestamp, timestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: sent %s from now, tolerance %s", ErrTimestamp, d.Round(time.Second), tolerance)
	}
	want := mac(secret, body, timestamp)
	for part := range strings.SplitSeq(signature, ",") {
		v, ok := strings.CutPrefix(strings.TrimSpace(part), "v1=")
		if !ok {
			continue
		}
		got, err := hex.DecodeString(v)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrSignature
}
