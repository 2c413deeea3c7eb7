package console_test

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/controlplane/store/filestore"
)

// An operator's token signs in: an HttpOnly, SameSite=Strict cookie that
// does not hold the token, then the page asked for.
func TestSignInWithAnOperatorToken(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	resp, _ := b.post("/signin", url.Values{"token": {operatorToken}, "next": {"/agents"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/agents" {
		t.Fatalf("sign in: %s to %q, want 303 to /agents", resp.Status, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "agent_session" {
			ck = c
		}
	}
	switch {
	case ck == nil:
		t.Fatal("no agent_session cookie")
	case !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/":
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/", ck)
	case ck.Secure:
		t.Errorf("cookie over plain HTTP without an https public URL is Secure: %+v", ck)
	case strings.Contains(ck.Value, operatorToken):
		t.Errorf("the cookie holds the token")
	}
	resp, body := b.get("/tasks")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="tasks"`) || !strings.Contains(body, `id="signout"`) {
		t.Fatalf("tasks page after sign-in: %s\n%s", resp.Status, body)
	}
	if strings.Contains(body, operatorToken) {
		t.Error("a page holds the token")
	}
	for _, h := range []struct{ name, want string }{
		{"Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"},
		{"X-Content-Type-Options", "nosniff"},
		{"Referrer-Policy", "same-origin"},
		{"Cache-Control", "no-store"},
	} {
		if got := resp.Header.Get(h.name); got != h.want {
			t.Errorf("%s: %q, want %q", h.name, got, h.want)
		}
	}
	// Open redirects are not followed: next is a path of the console.
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "/\\evil.example"} {
		resp, _ := newBrowser(t, cp.URL).post("/signin", url.Values{"token": {operatorToken}, "next": {next}}, nil)
		if loc := resp.Header.Get("Location"); loc != "/" {
			t.Errorf("next %q: sent to %q, want /", next, loc)
		}
	}
}

// Over TLS, or behind an https public URL, the cookie is Secure.
func TestSessionCookieIsSecureOverTLS(t *testing.T) {
	t.Parallel()
	st, err := filestore.Open(t.TempDir(), filestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := server.New(server.Options{Store: st, Token: servertest.RegistrationToken, OperatorTokens: []string{operatorToken},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewTLSServer(srv.Handler())
	defer hs.Close()
	defer srv.StopWaits()
	b := newBrowser(t, hs.URL)
	b.c.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer b.c.CloseIdleConnections()
	resp, _ := b.post("/signin", url.Values{"token": {operatorToken}}, nil)
	if c := sessionCookie(resp); c == nil || !c.Secure {
		t.Errorf("over TLS: cookie %+v, want Secure", c)
	}

	cp := start(t, server.Options{PublicURL: "https://cp.example.com"})
	resp, _ = newBrowser(t, cp.URL).post("/signin", url.Values{"token": {operatorToken}}, map[string]string{"Origin": "https://cp.example.com"})
	if c := sessionCookie(resp); c == nil || !c.Secure {
		t.Errorf("behind an https public URL: cookie %+v, want Secure", c)
	}
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == "agent_session" {
			return c
		}
	}
	return nil
}

// An agent's token and the registration secret cannot sign in, each told
// why in a line; a token nobody holds is 401, and too many are 429.
func TestSignInRefusesOtherTokens(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	agentToken := registerAgent(t, cp.URL, "agent-1")
	for _, c := range []struct {
		name, tok string
		status    int
		says      string
	}{
		{"an agent's token", agentToken, http.StatusForbidden, "an agent&#39;s token cannot sign in; use an operator token"},
		{"the registration secret", servertest.RegistrationToken, http.StatusForbidden, "the registration secret cannot sign in"},
		{"a token nobody holds", "op-nobody-0123456789abcdef0123456789", http.StatusUnauthorized, "wrong token"},
		{"no token", "", http.StatusUnauthorized, "wrong token"},
	} {
		b := newBrowser(t, cp.URL)
		resp, body := b.post("/signin", url.Values{"token": {c.tok}}, nil)
		if resp.StatusCode != c.status || !strings.Contains(body, `id="signin-error"`) || !strings.Contains(body, c.says) {
			t.Errorf("%s: %s, want %d with p#signin-error saying %q\n%s", c.name, resp.Status, c.status, c.says, body)
		}
		if b.cookie() != nil {
			t.Errorf("%s: a session cookie was set", c.name)
		}
		if c.tok != "" && strings.Contains(body, c.tok) {
			t.Errorf("%s: the page holds the token", c.name)
		}
	}
	b := newBrowser(t, cp.URL)
	var resp *http.Response
	for range 30 {
		if resp, _ = b.post("/signin", url.Values{"token": {"op-wrong-0123456789abcdef0123456789"}}, nil); resp.StatusCode == http.StatusTooManyRequests {
			break
		}
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("after many wrong tokens: %s, want 429 with Retry-After", resp.Status)
	}
	// The API counts the same failures: the address is throttled there too.
	req, _ := http.NewRequest(http.MethodGet, cp.URL+"/v1/tasks", nil)
	req.Header.Set("Authorization", "Bearer op-wrong-0123456789abcdef0123456789")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the API after the console's failures: %s, want 429", r.Status)
	}
}

// A page without a session sends the person to sign in, and back.
func TestPagesNeedASession(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	for _, path := range []string{"/", "/tasks?phase=queued", "/tasks/t-1", "/inbox", "/agents"} {
		resp, _ := b.get(path)
		want := "/signin?next=" + url.QueryEscape(path)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("GET %s: %s to %q, want 303 to %q", path, resp.Status, resp.Header.Get("Location"), want)
		}
	}
	resp, _ := b.get("/events?view=tasks")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("stream without a session: %s, want 401", resp.Status)
	}
	b.c.Jar.SetCookies(mustURL(cp.URL), []*http.Cookie{{Name: "agent_session", Value: "v1.0123456789abcdef.99999999999.00.forged"}})
	if resp, _ := b.get("/tasks"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a forged cookie: %s, want 303 to sign in", resp.Status)
	}
	if resp, body := b.get("/signin"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="token"`) || !strings.Contains(body, `type="password"`) {
		t.Errorf("sign-in page: %s\n%s", resp.Status, body)
	}
}

// Sign-out clears the cookie and revokes the session: the old cookie no
// longer opens a page.
func TestSignOutRevokesTheSession(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	old := b.cookie()
	csrf := b.csrf()
	resp, _ := b.post("/signout", url.Values{"csrf": {csrf}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Fatalf("sign out: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if b.cookie() != nil {
		t.Error("the cookie is still set after sign-out")
	}
	replay := newBrowser(t, cp.URL)
	replay.c.Jar.SetCookies(mustURL(cp.URL), []*http.Cookie{old})
	if resp, _ := replay.get("/tasks"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the signed-out session's cookie: %s, want 303 to sign in", resp.Status)
	}
	// Another session of the same person is its own.
	other := newBrowser(t, cp.URL)
	other.signIn(operatorToken)
	if resp, _ := other.get("/tasks"); resp.StatusCode != http.StatusOK {
		t.Errorf("another session after a sign-out: %s", resp.Status)
	}
}

// A session works across restarts (and replicas): it is signed, not
// kept; it ends when its operator's token is removed.
func TestSessionsOutliveARestartButNotTheirToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cp := startIn(t, dir, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(otherOperator)
	ck := b.cookie()
	cp.Close()

	again := startIn(t, dir, server.Options{})
	b2 := newBrowser(t, again.URL)
	b2.c.Jar.SetCookies(mustURL(again.URL), []*http.Cookie{{Name: ck.Name, Value: ck.Value}})
	if resp, _ := b2.get("/tasks"); resp.StatusCode != http.StatusOK {
		t.Errorf("after a restart: %s, want 200", resp.Status)
	}
	again.Close()

	without := startIn(t, dir, server.Options{OperatorTokens: []string{operatorToken}})
	b3 := newBrowser(t, without.URL)
	b3.c.Jar.SetCookies(mustURL(without.URL), []*http.Cookie{{Name: ck.Name, Value: ck.Value}})
	if resp, _ := b3.get("/tasks"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after its token was removed: %s, want 303 to sign in", resp.Status)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// The script and the stylesheet are served to anyone (the sign-in page
// needs them), and nothing else under /static/.
func TestStaticFiles(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	for path, want := range map[string]string{"/static/console.js": "text/javascript", "/static/console.css": "text/css"} {
		resp, body := b.get(path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) || body == "" {
			t.Errorf("GET %s: %s %q", path, resp.Status, resp.Header.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/static/", "/static/nope.js"} {
		if resp, _ := b.get(path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
}

// A sign-out is kept in the store: the signed-out cookie is refused by
// the control plane started again on the same store, as by the one that
// signed it out, while another session of the same person still works.
func TestSignOutOutlivesARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cp := startIn(t, dir, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	old, oldCSRF := b.cookie(), b.csrf()
	kept := newBrowser(t, cp.URL)
	kept.signIn(operatorToken)
	keptCookie, keptCSRF := kept.cookie(), kept.csrf()
	if resp, _ := b.post("/signout", url.Values{"csrf": {oldCSRF}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %s", resp.Status)
	}
	cp.Close()

	again := startIn(t, dir, server.Options{})
	for _, tc := range []struct {
		name   string
		cookie *http.Cookie
		csrf   string
		want   int
	}{{"the signed-out session", old, oldCSRF, http.StatusSeeOther}, {"another session, not signed out", keptCookie, keptCSRF, http.StatusOK}} {
		replay := newBrowser(t, again.URL)
		replay.c.Jar.SetCookies(mustURL(again.URL), []*http.Cookie{{Name: tc.cookie.Name, Value: tc.cookie.Value}})
		if resp, _ := replay.get("/tasks"); resp.StatusCode != tc.want {
			t.Errorf("%s after a restart: GET /tasks %s, want %d", tc.name, resp.Status, tc.want)
		}
		if tc.want == http.StatusSeeOther {
			if resp, _ := replay.get("/events?view=tasks"); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s after a restart: its live stream %s, want 401", tc.name, resp.Status)
			}
		}
		// A change too: the CSRF token is the session's own, which the
		// signed-out cookie's holder may have kept.
		id, err := again.Operator.CreateTask(t.Context(), api.CreateTaskRequest{Prompt: "keep me"})
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := replay.post("/tasks/"+id.ID+"/cancel", url.Values{"csrf": {tc.csrf}}, nil)
		v, err := again.Operator.Task(t.Context(), id.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cancelled := v.CancelRequested || v.Phase.Terminal(); (tc.want == http.StatusOK) != cancelled {
			t.Errorf("%s after a restart: POST cancel %s, the task cancelled: %v", tc.name, resp.Status, cancelled)
		}
	}
}
