package notify

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
)

// Slack gets its incoming webhook's {"text": …}, in mrkdwn: Slack's
// control characters escaped, the link as <url|text>.
func TestSlackPayload(t *testing.T) {
	r := newReceiver(t)
	now := time.Now()
	target := Target{Name: "ops-slack", Kind: Slack, URL: r.URL + "/services/T000/B000/XXXX"}
	if _, err := Send(context.Background(), NewClient(), target, record(t, "n1", "ops-slack", api.NotifyCompleted, now).Body, now); err != nil {
		t.Fatal(err)
	}
	d := r.deliveries()[0]
	if ct := d.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var msg map[string]any
	if err := json.Unmarshal(d.body, &msg); err != nil {
		t.Fatalf("Slack body is not JSON: %v: %s", err, d.body)
	}
	want := `*Task completed*: Task t1 "fix &lt;the&gt; build" &amp; more completed <https://cp.example.com/console/tasks/t1|Open the task>`
	if msg["text"] != want {
		t.Errorf("text\n %q, want\n %q", msg["text"], want)
	}
	if len(msg) != 1 {
		t.Errorf("Slack body has other keys than text: %s", d.body)
	}
	if d.header.Get(HeaderSignature) != "" {
		t.Error("a Slack delivery carries a webhook signature")
	}
}

// ntfy gets the text as the body, and its headers: Title, Click (the
// link), Tags, Priority (high for a task awaiting a person), and the
// token as Authorization: Bearer.
func TestNtfyRequest(t *testing.T) {
	r := newReceiver(t)
	now := time.Now()
	target := Target{Name: "phone", Kind: Ntfy, URL: r.URL + "/agent-alerts", Token: "tk_abcdefabcdefabcdefabcdefabcde"}
	for _, e := range []api.NotifyEvent{api.NotifyAwaitingReply, api.NotifyFailed} {
		if _, err := Send(context.Background(), NewClient(), target, record(t, "n-"+string(e), "phone", e, now).Body, now); err != nil {
			t.Fatal(err)
		}
	}
	got := r.deliveries()
	for i, want := range []struct{ title, priority, tags string }{
		{"Waiting for you", "high", "raising_hand,agent"},
		{"Task failed", "default", "x,agent"},
	} {
		h := got[i].header
		if string(got[i].body) != `Task t1 "fix <the> build" & more completed` {
			t.Errorf("body %q", got[i].body)
		}
		title, err := new(mime.WordDecoder).DecodeHeader(h.Get("Title"))
		if err != nil || title != want.title {
			t.Errorf("Title %q (%v), want %q", h.Get("Title"), err, want.title)
		}
		for k, v := range map[string]string{"Priority": want.priority, "Tags": want.tags,
			"Click": "https://cp.example.com/console/tasks/t1", "Authorization": "Bearer " + target.Token,
			"Content-Type": "text/plain; charset=utf-8"} {
			if h.Get(k) != v {
				t.Errorf("%s: %q, want %q", k, h.Get(k), v)
			}
		}
	}
}

// A title beyond ASCII reaches ntfy encoded (RFC 2047), which it decodes.
func TestNtfyTitleEncoded(t *testing.T) {
	n := api.Notification{ID: "x", Event: "task.new-kind-ü", Text: "t"}
	body, _ := json.Marshal(n)
	req, err := request(context.Background(), Target{Name: "n", Kind: Ntfy, URL: "http://127.0.0.1/x"}, body, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Title"); !strings.HasPrefix(got, "=?utf-8?") {
		t.Errorf("Title %q: not encoded", got)
	}
}

// A failure is one line: the status, or the network error with the
// host only, never the URL's path (Slack's is a secret) nor a token.
func TestSendErrorsHoldNoSecret(t *testing.T) {
	r := newReceiver(t)
	r.setStatus(http.StatusBadGateway)
	now := time.Now()
	body := record(t, "n1", "x", api.NotifyFailed, now).Body
	slack := Target{Name: "s", Kind: Slack, URL: r.URL + "/services/SECRETPATH"}
	code, err := Send(context.Background(), NewClient(), slack, body, now)
	var se *StatusError
	if code != 502 || !errors.As(err, &se) || err.Error() != "502 Bad Gateway" {
		t.Errorf("Send to a 502: %d, %v", code, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, target := range []Target{
		{Name: "s", Kind: Slack, URL: dead + "/services/SECRETPATH"},
		{Name: "n", Kind: Ntfy, URL: dead + "/SECRETTOPIC", Token: "SECRETTOKEN"},
	} {
		code, err := Send(context.Background(), NewClient(), target, body, now)
		if code != 0 || err == nil {
			t.Fatalf("Send to nothing: %d, %v", code, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "SECRET") || strings.Contains(msg, "\n") {
			t.Errorf("error %q holds a secret or is more than a line", msg)
		}
		if !strings.Contains(msg, ln.Addr().String()) || !strings.Contains(msg, "refused") {
			t.Errorf("error %q does not name the host and what failed", msg)
		}
	}
}

// A target that never answers fails when the delivery's context ends.
func TestHangingTargetTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	now := time.Now()
	target := Target{Name: "slow", Kind: Webhook, URL: srv.URL, Secret: testSecret}
	code, err := Send(ctx, NewClient(), target, record(t, "n1", "slow", api.NotifyFailed, now).Body, now)
	if code != 0 || err == nil || !strings.Contains(err.Error(), "no answer within the timeout") {
		t.Errorf("Send to a hanging target: %d, %v", code, err)
	}
}

// A redirect to another host is not followed: the body (and a webhook's
// signature) goes to the configured host only. One to the same host is.
func TestRedirects(t *testing.T) {
	other := newReceiver(t)
	var same *receiver
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
		case "/moved":
			http.Redirect(w, r, "/here", http.StatusPermanentRedirect)
		case "/here":
			same.Config.Handler.ServeHTTP(w, r)
		}
	}))
	defer front.Close()
	same = newReceiver(t)
	now := time.Now()
	body := record(t, "n1", "w", api.NotifyFailed, now).Body
	code, err := Send(context.Background(), NewClient(), Target{Name: "w", Kind: Webhook, URL: front.URL + "/away", Secret: testSecret}, body, now)
	if code != http.StatusTemporaryRedirect || err == nil {
		t.Errorf("redirect to another host: %d, %v; want a failure with 307", code, err)
	}
	if n := len(other.deliveries()); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
	code, err = Send(context.Background(), NewClient(), Target{Name: "w", Kind: Webhook, URL: front.URL + "/moved", Secret: testSecret}, body, now)
	if code != 200 || err != nil {
		t.Errorf("redirect to the same host: %d, %v", code, err)
	}
	if got := same.deliveries(); len(got) != 1 || string(got[0].body) != string(body) {
		t.Errorf("the same host got %d requests, want 1 with the body", len(got))
	}
}

// SendTests tries every target and says how each went, in their order:
// a signed test notification to one that answers, the status of one that
// refuses.
func TestSendTests(t *testing.T) {
	ok, refusing := newReceiver(t), newReceiver(t)
	refusing.setStatus(http.StatusForbidden)
	targets := []Target{
		{Name: "hooks", Kind: Webhook, URL: ok.URL + "/agent", Secret: testSecret},
		{Name: "refusing", Kind: Webhook, URL: refusing.URL + "/agent", Secret: testSecret},
	}
	got := SendTests(context.Background(), targets, "https://cp.example.com")
	if len(got) != 2 || got[0].Target != "hooks" || got[0].Err != nil || got[0].Code != http.StatusOK {
		t.Fatalf("the answering target: %+v", got)
	}
	if got[1].Target != "refusing" || got[1].Err == nil || !strings.Contains(got[1].Err.Error(), "403") {
		t.Fatalf("the refusing target: %+v", got[1])
	}
	if got[0].Line() != "hooks: delivered (200)" || !strings.HasPrefix(got[1].Line(), "refusing: failed: ") {
		t.Errorf("the lines: %q, %q", got[0].Line(), got[1].Line())
	}
	if l := (TestResult{Target: "t", Err: errors.New("refused:\n  403")}).Line(); l != "t: failed: refused: 403" {
		t.Errorf("a failure over lines: %q", l)
	}
	d := ok.deliveries()
	if len(d) != 1 || d[0].header.Get("X-Agent-Event") != "test" {
		t.Fatalf("the answering target got %d deliveries", len(d))
	}
	var n api.Notification
	if err := json.Unmarshal(d[0].body, &n); err != nil || n.Event != api.NotifyTest || n.Link != "https://cp.example.com" || len(n.ID) != 32 {
		t.Fatalf("the test notification: %+v, %v", n, err)
	}
}
