package controlplane_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
)

// A request that gets no answer fails with one line naming the control
// plane and why, transient (the agent retries it), and never the token or
// Go's `Post "…": dial tcp …`.
func TestUnreachableSaysWhyInOneLine(t *testing.T) {
	refused := func(t *testing.T) string { // a port nobody listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		return "http://" + ln.Addr().String()
	}
	// serve accepts connections and hands each to handle.
	serve := func(t *testing.T, handle func(net.Conn)) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				handle(c)
			}
		}()
		t.Cleanup(func() { ln.Close(); <-done })
		return "http://" + ln.Addr().String()
	}
	for _, tc := range []struct {
		name    string
		url     func(t *testing.T) string
		timeout time.Duration
		reason  string // one of |-separated reasons; one ending ": " is a prefix
	}{
		{"nothing listens", refused, 0, "connection refused"},
		{"the connection closes unanswered", func(t *testing.T) string {
			return serve(t, func(c net.Conn) {
				// The request read (a GET: headers only), so that the close
				// is a FIN, not a reset for unread data.
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				c.Close()
			})
		}, 0, "the connection closed before an answer"},
		{"no answer in time", func(t *testing.T) string {
			var held []net.Conn
			t.Cleanup(func() {
				for _, c := range held {
					c.Close()
				}
			})
			return serve(t, func(c net.Conn) { held = append(held, c) }) // read, never answered
		}, 50 * time.Millisecond, "no answer within 50ms"},
		// Without a resolver that answers, the lookup fails otherwise: it
		// still names the host.
		{"an unknown host", func(*testing.T) string { return "http://nowhere.invalid:8080" }, 0, "host nowhere.invalid not found|looking up host nowhere.invalid: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url(t)
			c, err := controlplane.NewClient(url, "secret-token-value", controlplane.ClientOptions{Tries: 1, Timeout: tc.timeout, Insecure: true})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Tasks(context.Background())
			var ue *controlplane.UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("Tasks: %v (%T), want an UnreachableError", err, err)
			}
			said := false
			for _, reason := range strings.Split(tc.reason, "|") {
				want := "the control plane at " + url + " is unreachable: " + reason
				said = said || err.Error() == want || strings.HasSuffix(reason, ": ") && strings.HasPrefix(err.Error(), want)
			}
			if !said {
				t.Errorf("error %q, want the control plane at %s is unreachable: %s", err, url, tc.reason)
			}
			if !controlplane.Transient(err) {
				t.Error("an unreachable control plane is not transient: the agent would not retry")
			}
			if strings.Contains(err.Error(), "secret-token-value") {
				t.Errorf("the error holds the token: %v", err)
			}
		})
	}
}

// A request the caller stops is its context's error, not an unreachable
// control plane.
func TestStoppedRequestIsTheContextsError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := controlplane.NewClient("http://"+ln.Addr().String(), "secret-token-value", controlplane.ClientOptions{Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Tasks(ctx)
	var ue *controlplane.UnreachableError
	if !errors.Is(err, context.Canceled) || errors.As(err, &ue) {
		t.Fatalf("Tasks with a stopped context: %v, want context.Canceled alone", err)
	}
}

// RedactURL hides a password, in each URL of a list too, and says of a
// URL that does not parse only that.
func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://cp.example.com":                         "https://cp.example.com",
		"postgres://cp:hunter2@db:5432/agents":           "postgres://cp:REDACTED@db:5432/agents",
		"postgres://cp@db/agents":                        "postgres://cp@db/agents",
		"https://a:pw1@one.example.com,https://two:8443": "https://a:REDACTED@one.example.com,https://two:8443",
		"http://a:pw1@[::1:80":                           "(a URL that does not parse)",
	} {
		if got := controlplane.RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
