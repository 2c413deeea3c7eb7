package main

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/controlplane/notify"
)

// got is a request a loopback receiver got.
type got struct {
	path   string
	header http.Header
	body   []byte
}

// loopbackReceiver answers status to every request and keeps them.
type loopbackReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []got
}

func newLoopbackReceiver(t *testing.T, status int) *loopbackReceiver {
	r := &loopbackReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, got{req.URL.Path, req.Header.Clone(), body})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *loopbackReceiver) requests() []got {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]got(nil), r.reqs...)
}

// writeSecret writes a 0600 file.
func writeSecret(t *testing.T, path, content string) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(content+"\n"), 0o600))
}

const hookSecret = "0123456789abcdef0123456789abcdef0123456789abcdef"

// notify test sends one test notification to each target of the config
// file and --notify-webhook: a line each, exit 0; the webhooks' signatures
// verify, Slack gets its text, ntfy its headers and token.
func TestNotifyTestDelivers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newLoopbackReceiver(t, http.StatusOK)
	writeSecret(t, filepath.Join(dir, "slack-url"), r.URL+"/services/T0/B0/SECRETPATH")
	writeSecret(t, filepath.Join(dir, "hook-secret"), hookSecret)
	writeSecret(t, filepath.Join(dir, "ntfy-token"), "tk_abcdefabcdefabcdefabcdefabcde")
	cfg := filepath.Join(dir, "cp.toml")
	must(t, os.WriteFile(cfg, []byte(`
[[notify]]
name = "ops-slack"
type = "slack"
url-file = "slack-url"
events = ["task.awaiting_reply", "task.failed"]

[[notify]]
name = "hooks"
type = "webhook"
url = "`+r.URL+`/hooks"
secret-file = "hook-secret"

[[notify]]
name = "phone"
type = "ntfy"
url = "`+r.URL+`/agent-topic"
token-file = "ntfy-token"
`), 0o600))
	writeSecret(t, filepath.Join(dir, "notify-secret"), hookSecret+"-default")
	res := runAgent(t, "controlplane", "notify", "test", "--config", cfg, "--data-dir", dir,
		"--notify-webhook", r.URL+"/simple", "--public-url", "https://cp.example.com")
	want := "ops-slack: delivered (200)\nhooks: delivered (200)\nphone: delivered (200)\nwebhook-1: delivered (200)\n"
	if res.code != 0 || res.stdout != want {
		t.Fatalf("notify test: exit %d, stdout\n%s\nstderr %s; want\n%s", res.code, res.stdout, res.stderr, want)
	}
	byPath := map[string]got{}
	for _, g := range r.requests() {
		byPath[g.path] = g
	}
	if len(byPath) != 4 {
		t.Fatalf("the receiver got %d distinct requests, want 4", len(byPath))
	}
	var ids []string
	for path, secret := range map[string]string{"/hooks": hookSecret, "/simple": hookSecret + "-default"} {
		g := byPath[path]
		if err := notify.Verify([]byte(secret), g.body, g.header.Get(notify.HeaderTimestamp), g.header.Get(notify.HeaderSignature), time.Now(), notify.DefaultTolerance); err != nil {
			t.Errorf("%s: signature: %v", path, err)
		}
		var n api.Notification
		if err := json.Unmarshal(g.body, &n); err != nil || n.Event != api.NotifyTest || n.Link != "https://cp.example.com" || n.ID == "" {
			t.Errorf("%s: body %s (%v)", path, g.body, err)
		}
		ids = append(ids, n.ID)
	}
	if ids[0] != ids[1] {
		t.Errorf("the test notification has two ids: %v", ids)
	}
	var slack struct{ Text string }
	if err := json.Unmarshal(byPath["/services/T0/B0/SECRETPATH"].body, &slack); err != nil || !strings.Contains(slack.Text, "<https://cp.example.com|") {
		t.Errorf("Slack got %s (%v)", byPath["/services/T0/B0/SECRETPATH"].body, err)
	}
	phone := byPath["/agent-topic"].header
	title, _ := new(mime.WordDecoder).DecodeHeader(phone.Get("Title"))
	if phone.Get("Authorization") != "Bearer tk_abcdefabcdefabcdefabcdefabcde" || title != "Test notification" || phone.Get("Click") != "https://cp.example.com" {
		t.Errorf("ntfy headers: %v", phone)
	}
}

// A target that answers an error, or where nothing listens: a line each
// saying why, exit 1, and no secret (the Slack URL's path) in the output.
func TestNotifyTestFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := newLoopbackReceiver(t, http.StatusBadGateway)
	dead := "http://" + freeAddr(t)
	writeSecret(t, filepath.Join(dir, "slack-url"), dead+"/services/T0/B0/SECRETPATH")
	cfg := filepath.Join(dir, "cp.toml")
	must(t, os.WriteFile(cfg, []byte(`
[[notify]]
name = "ops-slack"
type = "slack"
url-file = "slack-url"
`), 0o600))
	writeSecret(t, filepath.Join(dir, "notify-secret"), hookSecret)
	res := runAgent(t, "controlplane", "notify", "test", "--config", cfg, "--data-dir", dir, "--notify-webhook", bad.URL)
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	if res.code != 1 || len(lines) != 2 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and two lines", res.code, res.stdout, res.stderr)
	}
	if want := "ops-slack: failed: POST to " + strings.TrimPrefix(dead, "http://") + ": dial tcp "; !strings.HasPrefix(lines[0], want) ||
		!strings.Contains(lines[0], "connection refused") {
		t.Errorf("line %q, want %q… connection refused", lines[0], want)
	}
	if lines[1] != "webhook-1: failed: 502 Bad Gateway" {
		t.Errorf("line %q", lines[1])
	}
	if strings.Contains(res.stdout+res.stderr, "SECRETPATH") || strings.Contains(res.stdout+res.stderr, hookSecret) {
		t.Errorf("the output holds a secret: %q %q", res.stdout, res.stderr)
	}
}

// Every mistake in the notification settings is one line, exit 2, with
// the file's line where it is in the file, and no secret.
func TestNotifyConfigMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSecret(t, filepath.Join(dir, "secret"), hookSecret)
	writeSecret(t, filepath.Join(dir, "short"), "too-short")
	must(t, os.WriteFile(filepath.Join(dir, "open-url"), []byte("https://hooks.slack.com/services/SECRETPATH\n"), 0o644))
	for _, c := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{"unknown key", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/x\"\ncolour = \"red\"\n", nil,
			`cp.toml:5: unknown key "colour" in [[notify]]: want name, type, url, url-file, secret-file, token-file or events`},
		{"no type", "[[notify]]\nname = \"a\"\nurl = \"https://h/x\"\n", nil, `cp.toml:1: [[notify]] has no type`},
		{"notify not tables", "notify = \"https://h/x\"\n", nil, `cp.toml:1: notify: want [[notify]] tables with name and type, got the string`},
		{"events not strings", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/x\"\nevents = [1]\n", nil, `cp.toml:5: notify.events: item 1: want a string`},
		{"unknown type", "[[notify]]\nname = \"a\"\ntype = \"email\"\nurl = \"https://h/x\"\n", nil, `cp.toml:3: [[notify]] a: type "email": want webhook, slack or ntfy`},
		{"unknown event", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/x\"\nevents = [\"task.done\"]\n", nil, `cp.toml:5: [[notify]] a: unknown event "task.done"`},
		{"url and url-file", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/x\"\nurl-file = \"secret\"\n", nil, `cp.toml:5: [[notify]] a: give url or url-file, not both`},
		{"no url", "[[notify]]\nname = \"a\"\ntype = \"slack\"\n", nil, `cp.toml:2: [[notify]] a: has no url or url-file`},
		{"relative url", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"hooks.slack.com/x\"\n", nil, `cp.toml:4: [[notify]] a: URL (not absolute): want an absolute http:// or https:// URL`},
		{"url-file others may read", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl-file = \"open-url\"\n", nil, `cp.toml:4: [[notify]] a: `},
		{"webhook without secret", "[[notify]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"https://h/x\"\n", nil, `cp.toml:2: [[notify]] a: a webhook needs secret-file`},
		{"short secret", "[[notify]]\nname = \"a\"\ntype = \"webhook\"\nurl = \"https://h/x\"\nsecret-file = \"short\"\n", nil, `cp.toml:5: [[notify]] a: secret-file`},
		{"secret on slack", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/x\"\nsecret-file = \"secret\"\n", nil, `cp.toml:5: [[notify]] a: secret-file is for a webhook, not slack`},
		{"bad name", "[[notify]]\nname = \"Ops Slack\"\ntype = \"slack\"\nurl = \"https://h/x\"\n", nil, `cp.toml:2: [[notify]]: target name "Ops Slack": want lower-case letters, digits and dashes`},
		{"two of a name", "[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/x\"\n[[notify]]\nname = \"a\"\ntype = \"slack\"\nurl = \"https://h/y\"\n", nil, `cp.toml:6: two [[notify]] targets are named a`},
		{"webhook name taken", "[[notify]]\nname = \"webhook-1\"\ntype = \"slack\"\nurl = \"https://h/x\"\n", []string{"--notify-webhook", "https://h/y", "--notify-secret-file", filepath.Join(dir, "secret")},
			`--notify-webhook: a [[notify]] target is named webhook-1 already`},
		{"bad webhook URL", "", []string{"--notify-webhook", "ftp://h/SECRETPATH", "--notify-secret-file", filepath.Join(dir, "secret")}, `--notify-webhook: URL ftp://h/…: want an absolute`},
		{"bad public URL", "", []string{"--notify-webhook", "https://h/x", "--public-url", "cp.example.com"}, `--public-url: URL (not absolute): want an absolute http:// or https:// URL`},
		{"no secret made yet", "", []string{"--notify-webhook", "https://h/x"}, `notify-secret does not exist: agent controlplane serve makes it; or give --notify-secret-file`},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"controlplane", "notify", "test", "--data-dir", t.TempDir()}
			if c.file != "" {
				cfg := filepath.Join(dir, "cp.toml")
				must(t, os.WriteFile(cfg, []byte(c.file), 0o600))
				args = append(args, "--config", cfg)
			}
			r := runAgent(t, append(args, c.args...)...)
			wantOneLineError(t, r, 2, c.want)
			if strings.Contains(r.stderr, "SECRETPATH") || strings.Contains(r.stderr, hookSecret) {
				t.Errorf("the error holds a secret: %s", r.stderr)
			}
		})
	}
}

// serve refuses the same mistakes before it listens: one line, exit 2.
func TestServeRefusesNotifyMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cp.toml")
	must(t, os.WriteFile(cfg, []byte("[[notify]]\nname = \"hooks\"\ntype = \"webhook\"\nurl = \"https://h/x\"\n"), 0o600))
	r := runAgent(t, "controlplane", "serve", "--config", cfg, "--data-dir", filepath.Join(dir, "cp"), "--addr", freeAddr(t))
	wantOneLineError(t, r, 2, "cp.toml:2: [[notify]] hooks: a webhook needs secret-file")
	r = runAgent(t, "controlplane", "serve", "--public-url", "ftp://cp.example.com", "--data-dir", filepath.Join(dir, "cp"), "--addr", freeAddr(t))
	wantOneLineError(t, r, 2, "--public-url: URL ftp://cp.example.com/…: want an absolute http:// or https:// URL")
}
