package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CookieName is the session cookie's name.
const CookieName = "agent_session"

// SessionLife is how long a session lasts from its sign-in.
const SessionLife = 12 * time.Hour

// A session cookie's value is its payload and the payload's MAC:
//
//	v1.<operator>.<expiry, Unix seconds>.<nonce, hex>.<HMAC-SHA256, base64url>
//
// The MAC's key is the operator's SessionKey: the backend knows it while
// the operator's token is one of its own.

// session is a signed-in person's session.
type session struct {
	operator string
	expires  time.Time
	nonce    string
	payload  string
	key      []byte
}

// csrf is the session's CSRF token: a MAC of its payload, which forms
// carry in their hidden field "csrf".
func (s session) csrf() string {
	return mac(s.key, "csrf."+s.payload)
}

func mac(key []byte, msg string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession is a new session for operator, signed with key.
func newSession(operator string, key []byte, now time.Time) (session, string) {
	b := make([]byte, 16)
	rand.Read(b)
	s := session{operator: operator, expires: now.Add(SessionLife).Truncate(time.Second), nonce: hex.EncodeToString(b), key: key}
	s.payload = "v1." + operator + "." + strconv.FormatInt(s.expires.Unix(), 10) + "." + s.nonce
	return s, s.payload + "." + mac(key, s.payload)
}

// session is the request's session: its cookie well formed, signed by
// the key of an operator the backend knows, not expired, and not signed
// out (the backend's store says, on every request: a sign-out on another
// replica, or before a restart, holds). err is the store's failure to
// say: the request is then refused, not let in.
func (c *Console) session(r *http.Request) (s session, ok bool, err error) {
	ck, err := r.Cookie(CookieName)
	if err != nil || len(ck.Value) > 256 {
		return session{}, false, nil
	}
	payload, sig, ok := cutLast(ck.Value, ".")
	parts := strings.Split(payload, ".")
	if !ok || len(parts) != 4 || parts[0] != "v1" {
		return session{}, false, nil
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return session{}, false, nil
	}
	key := c.backend.SessionKey(parts[1])
	if key == nil || !hmac.Equal([]byte(sig), []byte(mac(key, payload))) {
		return session{}, false, nil
	}
	s = session{operator: parts[1], expires: time.Unix(exp, 0), nonce: parts[3], payload: payload, key: key}
	if !c.now().Before(s.expires) {
		return session{}, false, nil
	}
	revoked, err := c.backend.SessionRevoked(r.Context(), s.nonce)
	if err != nil {
		return session{}, false, err
	}
	if revoked {
		return session{}, false, nil
	}
	return s, true, nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// setCookie sets (or, with an empty value, clears) the session cookie.
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	ck := &http.Cookie{Name: CookieName, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.HasPrefix(c.opts.PublicURL, "https:")}
	if value == "" {
		ck.MaxAge = -1
	} else {
		ck.Expires = expires
	}
	http.SetCookie(w, ck)
}
