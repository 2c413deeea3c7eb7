package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/pgtest"
)

// consoleSession is a person's session of a control plane's console: its
// cookie's value and its CSRF token.
type consoleSession struct{ cookie, csrf string }

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleRequest sends a console request to base as the console's own
// page would, with session s when set, following no redirect; it returns
// the answer, its body read (none for the live stream, whose status is
// all that is wanted).
func consoleRequest(t *testing.T, base, method, path string, form url.Values, s *consoleSession) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Origin", base)
	}
	if s != nil {
		req.AddCookie(&http.Cookie{Name: "agent_session", Value: s.cookie})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(path, "/events") {
		return resp, ""
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// consoleSignIn signs in to c's console with the operator token c's
// client holds.
func consoleSignIn(t *testing.T, c *cp) *consoleSession {
	t.Helper()
	tok, err := os.ReadFile(c.operatorFile)
	if err != nil {
		t.Fatal(err)
	}
	return consoleSignInWith(t, c, strings.TrimSpace(string(tok)))
}

// consoleSignInWith signs in to c's console with operator token tok.
func consoleSignInWith(t *testing.T, c *cp, tok string) *consoleSession {
	t.Helper()
	resp, body := consoleRequest(t, c.url(), http.MethodPost, "/signin", url.Values{"token": {tok}}, nil)
	s := &consoleSession{}
	for _, ck := range resp.Cookies() {
		if ck.Name == "agent_session" {
			s.cookie = ck.Value
		}
	}
	if resp.StatusCode != http.StatusSeeOther || s.cookie == "" {
		t.Fatalf("sign in: %s\n%s", resp.Status, body)
	}
	_, page := consoleRequest(t, c.url(), http.MethodGet, "/tasks", nil, s)
	m := consoleCSRF.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the tasks page:\n%s", page)
	}
	s.csrf = m[1]
	return s
}

func consoleSignOut(t *testing.T, c *cp, s *consoleSession) {
	t.Helper()
	if resp, body := consoleRequest(t, c.url(), http.MethodPost, "/signout", url.Values{"csrf": {s.csrf}}, s); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %s\n%s", resp.Status, body)
	}
}

// consoleOpens checks whether s opens c's console: it reads the tasks,
// opens the live stream, and cancels a task of its own, which is
// cancelled only if s opens the console.
func consoleOpens(t *testing.T, c *cp, s *consoleSession, want bool, what string) {
	t.Helper()
	if resp, _ := consoleRequest(t, c.url(), http.MethodGet, "/tasks", nil, s); (resp.StatusCode == http.StatusOK) != want {
		t.Errorf("%s: GET /tasks %s; want it open: %v", what, resp.Status, want)
	}
	if resp, _ := consoleRequest(t, c.url(), http.MethodGet, "/events?view=tasks", nil, s); (resp.StatusCode == http.StatusOK) != want {
		t.Errorf("%s: the live stream %s; want it open: %v", what, resp.Status, want)
	}
	task, err := c.client.CreateTask(context.Background(), api.CreateTaskRequest{Prompt: "cancel me: " + what})
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := consoleRequest(t, c.url(), http.MethodPost, "/tasks/"+task.ID+"/cancel", url.Values{"csrf": {s.csrf}}, s)
	v := c.task(t, task.ID)
	if cancelled := v.CancelRequested || v.Phase.Terminal(); cancelled != want {
		t.Errorf("%s: POST cancel %s, the task cancelled: %v; want %v", what, resp.Status, cancelled, want)
	}
}

// A console session signed out before the control plane is killed and
// started again stays signed out: its cookie reads nothing and cancels
// nothing; a session not signed out goes on.
func TestConsoleSignOutOutlivesARestart(t *testing.T) {
	t.Parallel()
	addr, dir := freeAddr(t), t.TempDir()
	c := startCP(t, addr, dir)
	out, kept := consoleSignIn(t, c), consoleSignIn(t, c)
	consoleOpens(t, c, out, true, "a session signed in")
	consoleSignOut(t, c, out)
	consoleOpens(t, c, out, false, "the session signed out")

	c.kill()
	c = startCP(t, addr, dir)
	consoleOpens(t, c, out, false, "the session signed out, after a restart")
	consoleOpens(t, c, kept, true, "another session, after a restart")
}

// Over PostgreSQL, a console session signed out on one replica is refused
// by the other at once, and by both after they are killed and started
// again.
func TestConsoleSignOutHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	addrA, dirA := freeAddr(t), t.TempDir()
	a := startCP(t, addrA, dirA, "--store", dsn)
	shared := []string{"--store", dsn, "--token-file", a.tokenFile, "--operator-token-file", a.operatorFile}
	addrB, dirB := freeAddr(t), t.TempDir()
	b := startCP(t, addrB, dirB, shared...)

	s := consoleSignIn(t, a)
	consoleOpens(t, b, s, true, "a session signed in on replica A, on B")
	consoleSignOut(t, b, s)
	consoleOpens(t, a, s, false, "the session signed out on B, on A")

	a.kill()
	b.kill()
	a = startCP(t, addrA, dirA, "--store", dsn)
	b = startCP(t, addrB, dirB, shared...)
	consoleOpens(t, a, s, false, "the session signed out, on A started again")
	consoleOpens(t, b, s, false, "the session signed out, on B started again")
	consoleOpens(t, a, consoleSignIn(t, b), true, "a new session, signed in on B, on A")
}

// An operator token removed from --operator-token-file ends the sessions
// signed in with it once the control plane starts again: their key is
// derived from the token, which it no longer holds.
func TestConsoleSessionEndsWithItsOperatorToken(t *testing.T) {
	t.Parallel()
	addr, dir := freeAddr(t), t.TempDir()
	opFile := filepath.Join(t.TempDir(), "operators")
	const alice, bob = "op-alice-0123456789abcdef0123456789abcdef", "op-bob-0123456789abcdef0123456789abcdef00"
	if err := os.WriteFile(opFile, []byte(alice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCP(t, addr, dir, "--operator-token-file", opFile)
	s := consoleSignInWith(t, c, alice)
	consoleOpens(t, c, s, true, "alice's session")

	c.stop()
	if err := os.WriteFile(opFile, []byte("# alice left\n"+bob+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c = startCP(t, addr, dir, "--operator-token-file", opFile)
	var err error
	if c.client, err = controlplane.NewClient(c.url(), bob, controlplane.ClientOptions{Tries: 1}); err != nil {
		t.Fatal(err)
	}
	consoleOpens(t, c, s, false, "alice's session, her token removed")
	if resp, _ := consoleRequest(t, c.url(), http.MethodPost, "/signin", url.Values{"token": {alice}}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("alice signing in again, her token removed: %s, want 401", resp.Status)
	}
	consoleOpens(t, c, consoleSignInWith(t, c, bob), true, "bob's session")
}
