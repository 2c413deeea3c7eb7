package controlplane

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edgeagent/agent/controlplane/api"
)

func TestCheckURLNormalizesAndNeverEchoesAPassword(t *testing.T) {
	for _, c := range []struct {
		name, raw, want, errHas string
	}{
		{"https", "https://cp.example.com/", "https://cp.example.com", ""},
		{"loopback http", "http://127.0.0.1:8080/api/", "http://127.0.0.1:8080/api", ""},
		{"user and password", "https://bob:hunter2@cp.example.com", "", "user or password"},
		{"query", "https://cp.example.com/?token=x", "", "query or fragment"},
		{"fragment", "https://cp.example.com/#frag", "", "query or fragment"},
		{"plain http far away", "http://cp.example.com", "", "not https"},
		{"not a URL, with a password", "https://bob:hunter2@[::1", "", "want http(s)"},
		{"ftp", "ftp://cp.example.com", "", "want http(s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, err := CheckURL(c.raw, false)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("CheckURL(%q) = %v, want an error with %q", c.raw, err, c.errHas)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the error repeats the password: %v", err)
				}
				return
			}
			if err != nil || u.String() != c.want {
				t.Fatalf("CheckURL(%q) = %v, %v; want %s", c.raw, u, err, c.want)
			}
		})
	}
}

// A redirect is never followed: the token would go along, to another host
// or over plain http.
func TestClientRefusesRedirects(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()

	c, err := NewClient(redirector.URL, "secret-token", ClientOptions{Tries: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "a"})
	if !errors.Is(err, errRedirect) {
		t.Fatalf("Heartbeat through a redirect: %v, want errRedirect", err)
	}
	if Transient(err) {
		t.Error("a redirect is not transient: retrying it cannot help")
	}
	if strings.Contains(err.Error(), "secret-token") {
		t.Errorf("the error holds the token: %v", err)
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the token reached the redirect's target %d times", n)
	}
}

func TestURLMustBeHTTPSUnlessLoopback(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://localhost:1": true, "http://[::1]:9": true, "https://cp.example.com": true,
		"http://cp.example.com": false, "ftp://x": false, "not a url": false, "http://": false,
	} {
		if _, err := CheckURL(raw, false); (err == nil) != ok {
			t.Errorf("%s: %v", raw, err)
		}
	}
	if _, err := CheckURL("http://cp.example.com", true); err != nil {
		t.Errorf("--insecure: %v", err)
	}
}
