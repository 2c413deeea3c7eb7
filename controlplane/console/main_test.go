package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/server/servertest"
	"github.com/edgeagent/agent/state"
)

// No test leaves a goroutine behind: a live stream ends with its request.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// The tests' operator tokens: people.
const (
	operatorToken = "op-console-0123456789abcdef0123456789"
	otherOperator = "op-console-fedcba9876543210fedcba9876"
)

// start starts a control plane (a file store in a temporary directory)
// whose handler serves the API and the console, with two operators.
func start(t *testing.T, opts server.Options) *servertest.ControlPlane {
	t.Helper()
	return startIn(t, "", opts)
}

// startIn is start on the file store in dir, where another control plane
// may have left its records ("": a new one).
func startIn(t *testing.T, dir string, opts server.Options) *servertest.ControlPlane {
	t.Helper()
	if len(opts.OperatorTokens) == 0 {
		opts.OperatorTokens = []string{operatorToken, otherOperator}
	}
	return servertest.Start(t, servertest.Options{Server: opts, Dir: dir})
}

// browser is a person's client of the console: a cookie jar, no
// redirects followed, and the page it read last.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request and returns the answer with its body read.
func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp, string(body)
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.do(req)
}

// post sends a form as a browser on the console's own page would:
// Sec-Fetch-Site same-origin and the console's Origin, unless headers
// say otherwise (an empty value drops the header).
func (b *browser) post(path string, form url.Values, headers map[string]string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", b.base)
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return b.do(req)
}

// signIn signs in with tok and fails the test unless it worked.
func (b *browser) signIn(tok string) {
	b.t.Helper()
	resp, body := b.post("/signin", url.Values{"token": {tok}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("sign in: %s\n%s", resp.Status, body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the session's CSRF token, read from a page's forms.
func (b *browser) csrf() string {
	b.t.Helper()
	_, body := b.get("/tasks")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no csrf field in the tasks page:\n%s", body)
	}
	return m[1]
}

// cookie is the session cookie the jar holds.
func (b *browser) cookie() *http.Cookie {
	u, _ := url.Parse(b.base)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "agent_session" {
			return c
		}
	}
	return nil
}

// registerAgent registers agent id and returns its own token.
func registerAgent(t *testing.T, base, id string) string {
	t.Helper()
	body, _ := json.Marshal(api.RegisterRequest{AgentID: id})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/agents/register", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+servertest.RegistrationToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out api.RegisterResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
		t.Fatalf("register %s: %s %v", id, resp.Status, err)
	}
	return out.Token
}

// fakeAgent drives tasks through the API as an agent would: claim,
// events.
type fakeAgent struct {
	t     *testing.T
	cp    *servertest.ControlPlane
	id    string
	c     *controlplane.Client
	keys  int
	lease map[string]api.Claimed
}

func newAgent(t *testing.T, cp *servertest.ControlPlane, id string) *fakeAgent {
	a := &fakeAgent{t: t, cp: cp, id: id, c: cp.Agent(t, id), lease: map[string]api.Claimed{}}
	if _, err := a.c.Heartbeat(t.Context(), api.HeartbeatRequest{AgentID: id, Version: "v-test", Capacity: api.Capacity{Max: 2},
		Labels: map[string]string{"site": "lab"}, Health: api.Health{Grade: "available", Isolation: "landlock"},
		Capabilities: api.Capabilities{Executor: "codex", Models: []string{"gpt-5", "gpt-5-mini"}, OS: "linux", Arch: "arm64"}}); err != nil {
		t.Fatal(err)
	}
	return a
}

// claim claims one task and returns its id.
func (a *fakeAgent) claim() string {
	a.t.Helper()
	resp, err := a.c.Claim(a.t.Context(), api.ClaimRequest{AgentID: a.id, Max: 1, HealthGrade: "available"})
	if err != nil || len(resp.Tasks) != 1 {
		a.t.Fatalf("claim: %v, %d tasks", err, len(resp.Tasks))
	}
	c := resp.Tasks[0]
	a.lease[c.Task.ID] = c
	return c.Task.ID
}

// send sends an event of task id, and fails unless it is accepted.
func (a *fakeAgent) send(id string, kind state.EventKind, payload any) {
	a.t.Helper()
	c := a.lease[id]
	b, _ := json.Marshal(payload)
	a.keys++
	ev := api.Event{Key: fmt.Sprintf("%s:%d", id, a.keys), Kind: kind, TaskID: id, Attempt: 1, LeaseID: c.Lease.ID, CreatedAt: time.Now(), Payload: b}
	res, err := a.c.SendEvents(a.t.Context(), a.id, []api.Event{ev})
	if err != nil || len(res) != 1 || res[0].Status != api.StatusAccepted {
		a.t.Fatalf("send %s %s: %v %+v", id, kind, err, res)
	}
}

// start runs task id's first attempt up to turn_started.
func (a *fakeAgent) start(id string) {
	a.t.Helper()
	a.send(id, state.EventPhase, state.PhaseEvent{Phase: state.PhaseExecutorStarting})
	a.send(id, state.EventAttempt, state.Attempt{AttemptID: id + "-a1", Number: 1, Status: state.AttemptRunning, StartedAt: time.Now(), Model: "gpt-test"})
	a.send(id, state.EventPhase, state.PhaseEvent{Phase: state.PhaseTurnStarted})
}

// ask puts task id in awaiting_reply with req.
func (a *fakeAgent) ask(id string, req state.ApprovalRequest) {
	a.t.Helper()
	a.send(id, state.EventPhase, state.PhaseEvent{Phase: state.PhaseAwaitingReply, Request: &req})
}

// submit submits a task as a person, through the API.
func submit(t *testing.T, cp *servertest.ControlPlane, title string) string {
	t.Helper()
	v, err := cp.Operator.CreateTask(t.Context(), api.CreateTaskRequest{Title: title, Prompt: "do " + title, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return v.ID
}

func phaseOf(t *testing.T, cp *servertest.ControlPlane, id string) state.Phase {
	t.Helper()
	v, err := cp.Operator.Task(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return v.Phase
}

// stream is a live stream, read an event at a time.
type stream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	events chan sse
}

type sse struct {
	event, id, data string
}

// openStream opens the live stream at path with b's session.
func (b *browser) openStream(path string) *stream {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.openStreamRequest(req)
}

// openStreamRequest opens the live stream req asks for, with b's session.
func (b *browser) openStreamRequest(req *http.Request) *stream {
	b.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req = req.WithContext(ctx)
	client := &http.Client{Jar: b.c.Jar}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		b.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		b.t.Fatalf("stream %s: %s %s", req.URL, resp.Status, body)
	}
	s := &stream{t: b.t, resp: resp, cancel: cancel, events: make(chan sse, 1000)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var e sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.event != "" {
					s.events <- e
				}
				e = sse{}
			case strings.HasPrefix(line, "event: "):
				e.event = line[len("event: "):]
			case strings.HasPrefix(line, "id: "):
				e.id = line[len("id: "):]
			case strings.HasPrefix(line, "data: "):
				e.data = line[len("data: "):]
			}
		}
	}()
	b.t.Cleanup(s.close)
	return s
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
	for range s.events {
	}
}

// waitFor reads the stream until an event satisfies ok, failing the
// test after a generous deadline (a hung stream, not a slow one).
func (s *stream) waitFor(what string, ok func(sse) bool) sse {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, open := <-s.events:
			if !open {
				s.t.Fatalf("the stream ended before %s", what)
			}
			if ok(e) {
				return e
			}
		case <-deadline:
			s.t.Fatalf("no %s on the stream", what)
		}
	}
}

// replaceOf decodes a replace event's data.
func replaceOf(e sse) (id, html string) {
	var m map[string]string
	json.Unmarshal([]byte(e.data), &m)
	return m["id"], m["html"]
}

func urlValues(k, v string) url.Values { return url.Values{k: {v}} }
