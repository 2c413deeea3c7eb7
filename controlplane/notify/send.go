package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
)

// DefaultSendTimeout bounds one delivery: connecting, sending and the
// answer's headers.
const DefaultSendTimeout = 10 * time.Second

// maxRedirects is how many redirects a delivery follows, each to the
// same host.
const maxRedirects = 3

// NewClient is the HTTP client deliveries use: bounded connects, TLS
// handshakes and waits for an answer, and redirects followed only to the
// same host (a target's URL may carry a secret in its path; another host
// never gets the body).
func NewClient() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: DefaultSendTimeout,
			MaxIdleConns:          16,
			IdleConnTimeout:       time.Minute,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if req.URL.Host != via[0].URL.Host {
				return http.ErrUseLastResponse // answered 3xx: a failure
			}
			return nil
		},
	}
}

// StatusError is a target's answer that was not 2xx.
type StatusError struct {
	Code   int
	Status string // "502 Bad Gateway"
}

func (e *StatusError) Error() string { return e.Status }

// Send delivers one notification to t: body is the api.Notification as
// JSON (the stored record's Body). It returns the answer's status code
// (0 when there was none) and nil only for a 2xx. An error is one line
// that names the status, or the network error with the URL's host only.
func Send(ctx context.Context, client *http.Client, t Target, body []byte, now time.Time) (int, error) {
	req, err := request(ctx, t, body, now)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, netError(t, err)
	}
	// A little of the answer is read so that the connection is kept.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		status := resp.Status
		if status == "" {
			status = strconv.Itoa(resp.StatusCode)
		}
		return resp.StatusCode, &StatusError{Code: resp.StatusCode, Status: status}
	}
	return resp.StatusCode, nil
}

// request is t's POST of the notification in body.
func request(ctx context.Context, t Target, body []byte, now time.Time) (*http.Request, error) {
	var n api.Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, fmt.Errorf("the notification is not JSON: %v", err)
	}
	var payload []byte
	header := http.Header{}
	switch t.Kind {
	case Webhook:
		payload = body
		ts := strconv.FormatInt(now.Unix(), 10)
		header.Set("Content-Type", "application/json")
		header.Set(HeaderID, n.ID)
		header.Set(HeaderEvent, string(n.Event))
		header.Set(HeaderTimestamp, ts)
		header.Set(HeaderSignature, Sign(t.Secret, body, ts))
	case Slack:
		payload = slackPayload(n)
		header.Set("Content-Type", "application/json")
	case Ntfy:
		payload = []byte(n.Text)
		header.Set("Content-Type", "text/plain; charset=utf-8")
		header.Set("Title", mime.QEncoding.Encode("utf-8", title(n)))
		if n.Link != "" {
			header.Set("Click", n.Link)
		}
		header.Set("Tags", tags[n.Event])
		header.Set("Priority", "default")
		if n.Event == api.NotifyAwaitingReply {
			header.Set("Priority", "high")
		}
		if a := n.Actions; a != nil {
			// Buttons on the phone's notification: each opens the
			// link's page, which answers with one more tap.
			header.Set("Actions", "view, Accept, "+a.Accept+"; view, Decline, "+a.Decline)
		}
		if t.Token != "" {
			header.Set("Authorization", "Bearer "+t.Token)
		}
	default:
		return nil, fmt.Errorf("unknown kind %q", t.Kind)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("%s: bad URL", host(t.URL))
	}
	req.Header = header
	req.Header.Set("User-Agent", "edgeagent-controlplane")
	return req, nil
}

// slackPayload is a Slack incoming webhook's message: the text in
// mrkdwn, with the link as <url|text>.
func slackPayload(n api.Notification) []byte {
	text := "*" + slackEscape(title(n)) + "*: " + slackEscape(n.Text)
	if n.Link != "" {
		text += " <" + n.Link + "|" + linkText(n) + ">"
	}
	if a := n.Actions; a != nil {
		text += " · <" + a.Accept + "|Accept> · <" + a.Decline + "|Decline>"
	}
	b, _ := json.Marshal(struct {
		Text string `json:"text"`
	}{text})
	return b
}

// slackEscape escapes Slack's control characters, &, < and >.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func linkText(n api.Notification) string {
	if n.Event == api.NotifyAwaitingReply {
		return "Answer it"
	}
	switch {
	case n.Agent != nil && n.Task == nil:
		return "Open the agent"
	case n.Task == nil:
		return "Open the console"
	}
	return "Open the task"
}

// title says a notification's event in a few words.
func title(n api.Notification) string {
	if t, ok := titles[n.Event]; ok {
		return t
	}
	return string(n.Event)
}

var titles = map[api.NotifyEvent]string{
	api.NotifyAwaitingReply:   "Waiting for you",
	api.NotifyApprovalExpired: "Nobody answered",
	api.NotifyCompleted:       "Task completed",
	api.NotifyFailed:          "Task failed",
	api.NotifyBlocked:         "Task blocked",
	api.NotifyAgentOffline:    "Agent offline",
	api.NotifyAgentStopped:    "Agent stopped",
	api.NotifyAgentUnhealthy:  "Agent unhealthy",
	api.NotifyTest:            "Test notification",
	api.NotifyDigest:          "Notifications held back",
}

// tags are ntfy's tags by event: the first an emoji's short code.
var tags = map[api.NotifyEvent]string{
	api.NotifyAwaitingReply:   "raising_hand,agent",
	api.NotifyApprovalExpired: "hourglass,agent",
	api.NotifyCompleted:       "white_check_mark,agent",
	api.NotifyFailed:          "x,agent",
	api.NotifyBlocked:         "no_entry,agent",
	api.NotifyAgentOffline:    "electric_plug,agent",
	api.NotifyAgentStopped:    "stop_button,agent",
	api.NotifyAgentUnhealthy:  "warning,agent",
	api.NotifyTest:            "bell,agent",
	api.NotifyDigest:          "hourglass,agent",
}

// netError says a failed request in one line with the URL's host only:
// url.Error would hold the whole URL.
func netError(t Target, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("POST to %s: no answer within the timeout", host(t.URL))
	}
	return fmt.Errorf("POST to %s: %v", host(t.URL), err)
}

// Test is the notification agent controlplane notify test sends: link is
// the control plane's public URL, "" for none.
func Test(id, link string, now time.Time) api.Notification {
	return api.Notification{ID: id, Event: api.NotifyTest, At: now.UTC(), Link: link,
		Text: "A test from the agent control plane: this target gets its notifications."}
}

// TestResult is how a test notification to a target went: Code is the
// target's answer, Err says why it was not delivered.
type TestResult struct {
	Target string
	Code   int
	Err    error
}

// Line says on one line how the test went (notify test's output).
func (r TestResult) Line() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: failed: %s", r.Target, strings.Join(strings.Fields(r.Err.Error()), " "))
	}
	return fmt.Sprintf("%s: delivered (%d)", r.Target, r.Code)
}

// SendTests sends one test notification (Test) to every target at once,
// straight away and not through a store, and says how each went, in the
// targets' order.
func SendTests(ctx context.Context, targets []Target, link string) []TestResult {
	id := make([]byte, 16)
	rand.Read(id)
	now := time.Now()
	body, err := json.Marshal(Test(hex.EncodeToString(id), link, now))
	if err != nil {
		panic(err) // a struct of strings
	}
	client := NewClient()
	out := make([]TestResult, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, DefaultSendTimeout)
			defer cancel()
			code, err := Send(sctx, client, t, body, now)
			out[i] = TestResult{Target: t.Name, Code: code, Err: err}
		})
	}
	wg.Wait()
	return out
}
