package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/console"
	"github.com/edgeagent/agent/controlplane/store"
)

// consoleSession is a person's session of the web console: its cookie
// and its CSRF token, good on any replica.
type consoleSession struct {
	cookie *http.Cookie
	csrf   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleDo sends a console request to e as a browser on the console's
// own page would, with cookie s (when set); no redirect is followed. It
// returns the status, the Location and the body.
func (e *env) consoleDo(method, path string, form url.Values, s *consoleSession) (int, string, string, *http.Response) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.http.URL+path, body)
	must(e.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Origin", e.http.URL)
	}
	if s != nil {
		req.AddCookie(&http.Cookie{Name: s.cookie.Name, Value: s.cookie.Value})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	must(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(e.t, err)
	return resp.StatusCode, resp.Header.Get("Location"), string(b), resp
}

// signIn signs in to e's console with the operator's token.
func (e *env) signIn() *consoleSession {
	e.t.Helper()
	code, _, body, resp := e.consoleDo(http.MethodPost, "/signin", url.Values{"token": {opToken}}, nil)
	var s consoleSession
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			s.cookie = c
		}
	}
	if code != http.StatusSeeOther || s.cookie == nil {
		e.t.Fatalf("sign in: %d\n%s", code, body)
	}
	_, _, page, _ := e.consoleDo(http.MethodGet, "/tasks", nil, &s)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		e.t.Fatalf("no CSRF token in the tasks page:\n%s", page)
	}
	s.csrf = m[1]
	return &s
}

// signOut signs s out through e's console.
func (e *env) signOut(s *consoleSession) {
	e.t.Helper()
	if code, to, body, _ := e.consoleDo(http.MethodPost, "/signout", url.Values{"csrf": {s.csrf}}, s); code != http.StatusSeeOther || to != "/signin" {
		e.t.Fatalf("sign out: %d to %q\n%s", code, to, body)
	}
}

// opens checks whether s opens e's console: a page, and a cancel of a
// task of its own (which is cancelled only if s opens it).
func (e *env) opens(s *consoleSession, want bool, what string) {
	e.t.Helper()
	code, to, _, _ := e.consoleDo(http.MethodGet, "/tasks", nil, s)
	if got := code == http.StatusOK; got != want {
		e.t.Errorf("%s: GET /tasks %d (to %q); want it open: %v", what, code, to, want)
	}
	task := e.submit("cancel me, "+what, "any")
	code, _, _, _ = e.consoleDo(http.MethodPost, "/tasks/"+task.ID+"/cancel", url.Values{"csrf": {s.csrf}}, s)
	v, err := e.client.Task(context.Background(), task.ID)
	must(e.t, err)
	if cancelled := v.CancelRequested || v.Phase.Terminal(); cancelled != want {
		e.t.Errorf("%s: POST cancel %d, the task cancelled: %v; want %v", what, code, cancelled, want)
	}
}

// A sign-out is kept in the store: after a restart (a new server over
// the same files or database) the signed-out cookie is refused, for
// reads and changes, while a session not signed out still works.
func TestASignOutOutlivesARestart(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	e := newEnv(t, t.TempDir(), clk)
	out, kept := e.signIn(), e.signIn()
	e.opens(out, true, "a session signed in")
	e.signOut(out)
	e.opens(out, false, "the session signed out")

	e = e.restart(clk)
	e.opens(out, false, "the session signed out, after a restart")
	e.opens(kept, true, "another session, after a restart")
	// The live stream: its answer's status, the stream itself not read.
	req, err := http.NewRequest(http.MethodGet, e.http.URL+"/events?view=tasks", nil)
	must(t, err)
	req.AddCookie(&http.Cookie{Name: out.cookie.Name, Value: out.cookie.Value})
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the session signed out, after a restart: its live stream %s, want 401", resp.Status)
	}
}

// Over PostgreSQL, a sign-out on one replica holds on every other the
// moment it is answered, whichever replica signed the session in.
func TestASignOutHoldsOnEveryReplica(t *testing.T) {
	t.Parallel()
	if !onPostgres() {
		t.Skip("replicas share a PostgreSQL store")
	}
	dir, clk := t.TempDir(), &clock{now: t0}
	one := newEnv(t, dir, clk)
	other := newEnv(t, dir, clk)
	a, b := one.signIn(), one.signIn()
	other.opens(a, true, "a session signed in on another replica")
	other.signOut(a)
	one.opens(a, false, "the session signed out on the other replica, on the one that signed it in")
	other.opens(a, false, "the session signed out, on the replica that signed it out")
	// A live stream open on one replica ends when its session is signed
	// out on the other.
	c := one.signIn()
	req, err := http.NewRequest(http.MethodGet, other.http.URL+"/events?view=tasks", nil)
	must(t, err)
	req.AddCookie(&http.Cookie{Name: c.cookie.Name, Value: c.cookie.Value})
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a live stream: %s", resp.Status)
	}
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, resp.Body); resp.Body.Close(); close(ended) }()
	one.signOut(b)
	other.opens(b, false, "a session signed out on the first replica, on the other")
	one.signOut(c)
	select {
	case <-ended:
	case <-time.After(time.Minute):
		resp.Body.Close()
		<-ended
		t.Error("the live stream on the other replica did not end within a minute of its sign-out")
	}
}

// sessionsDown is a store whose revoked sessions cannot be read or
// written while down is set.
type sessionsDown struct {
	store.Store
	down atomic.Bool
}

func (s *sessionsDown) SessionRevoked(ctx context.Context, nonce string) (bool, error) {
	if s.down.Load() {
		return false, errors.New("the database is restarting")
	}
	return s.Store.SessionRevoked(ctx, nonce)
}

func (s *sessionsDown) RevokeSession(ctx context.Context, nonce string, expires, now time.Time) error {
	if s.down.Load() {
		return errors.New("the database is restarting")
	}
	return s.Store.RevokeSession(ctx, nonce, expires, now)
}

// A session the store cannot check is refused (503, one line), never let
// in; a sign-out the store did not keep says so and keeps the cookie, to
// be tried again.
func TestASessionTheStoreCannotCheckIsRefused(t *testing.T) {
	t.Parallel()
	dir, clk := t.TempDir(), &clock{now: t0}
	st := &sessionsDown{Store: ownStore(t, dir, clk)}
	e := newEnvOpts(t, dir, clk, Options{Store: st})
	s := e.signIn()
	st.down.Store(true)
	if code, _, body, _ := e.consoleDo(http.MethodGet, "/tasks", nil, s); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "the control plane&#39;s store is unavailable; try again") {
		t.Errorf("GET /tasks with the store down: %d, want 503 saying so\n%s", code, body)
	}
	task := e.submit("keep me", "any")
	if code, _, _, _ := e.consoleDo(http.MethodPost, "/tasks/"+task.ID+"/cancel", url.Values{"csrf": {s.csrf}}, s); code != http.StatusServiceUnavailable {
		t.Errorf("POST cancel with the store down: %d, want 503", code)
	}
	code, _, body, resp := e.consoleDo(http.MethodPost, "/signout", url.Values{"csrf": {s.csrf}}, s)
	if code != http.StatusServiceUnavailable || len(resp.Cookies()) != 0 {
		t.Errorf("sign out with the store down: %d, cookies %v; want 503 and the cookie kept\n%s", code, resp.Cookies(), body)
	}
	st.down.Store(false)
	e.opens(s, true, "the session, the store back")
	e.signOut(s)
	e.opens(s, false, "the session signed out")
}
