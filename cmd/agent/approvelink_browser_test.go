package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/browsertest"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// A question's notification answers it from a phone: its accept link,
// followed in headless Chromium at a phone's size, shows the question and
// a button; the tap answers, and the task goes on. The same link again,
// and one with its signature changed, do nothing and say why.
func TestApproveFromTheNotificationOnAPhone(t *testing.T) {
	t.Parallel()
	b := browsertest.New(t)
	const key = "0123456789abcdef0123456789abcdef-secret"
	secret := filepath.Join(t.TempDir(), "secret")
	must(t, os.WriteFile(secret, []byte(key), 0o600))
	rv := &webhookReceiver{secret: []byte(key), byID: map[string][]byte{}, count: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: rv}
	go srv.Serve(ln)
	defer srv.Close()
	addr := freeAddr(t)
	c := startCP(t, addr, t.TempDir(), "--public-url", "http://"+addr, "--notify-webhook", "http://"+ln.Addr().String()+"/agent", "--notify-secret-file", secret)
	defer c.stop()
	dataDir := t.TempDir()
	startAgentProc(t, c, dataDir, "--approval", "ask", "--approval-timeout", "10m")
	id := submit(t, c, "Deploy\n@ask echo deployed > deployed.txt\n@output after the answer")

	var actions *api.NotifyActions
	testkit.WaitFor(t, "the question's notification", func() bool {
		rv.mu.Lock()
		defer rv.mu.Unlock()
		for _, body := range rv.byID {
			var n api.Notification
			if json.Unmarshal(body, &n) == nil && n.Event == api.NotifyAwaitingReply && n.Task != nil && n.Task.ID == id {
				actions = n.Actions
				return true
			}
		}
		return false
	})
	if actions == nil || !strings.HasPrefix(actions.Accept, "http://"+addr+"/approve/") {
		t.Fatalf("the question's notification carries no links: %+v", actions)
	}

	con := &console{t: t, b: b, base: c.url()}
	b.SetViewport(t, browsertest.Phone)
	con.open2(actions.Accept)
	con.waitJS("the link's page", `!!document.querySelector("#approve-page form#link-answer button.accept")`)
	if got := con.text("#approve-page code.command"); !strings.Contains(got, "echo deployed > deployed.txt") {
		t.Errorf("the link's page shows %q, not the command", got)
	}
	if w := con.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); w != "0" {
		t.Errorf("the link's page scrolls sideways on a phone by %s px", w)
	}
	if v := c.task(t, id); v.Reply != nil {
		t.Fatalf("opening the link answered: %+v", v.Reply)
	}
	b.Screenshot(t, "approve", browsertest.Phone)
	con.post("accept", chromedp.Tap(chromedp.CSS(`form#link-answer button.accept`)), "the answer's page", `!!document.getElementById("approve-done")`)
	v := c.waitDone(t, id)
	if v.Phase != state.PhaseCompleted || v.Denied != 0 {
		t.Fatalf("after the link's accept the task is %s (%s), %d denied", v.Phase, v.PhaseReason, v.Denied)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "work", id, "deployed.txt")); err != nil {
		t.Errorf("the accepted command did not run: %v", err)
	}

	for _, link := range []struct{ what, url, says string }{
		{"the same link again", actions.Accept, "used already"},
		{"a changed signature", actions.Decline[:len(actions.Decline)-3] + "AAA", "not one the control plane made"},
	} {
		con.open2(link.url)
		con.waitJS(link.what, `!!document.getElementById("approve-refused")`)
		if got := con.text("#approve-refused"); !strings.Contains(got, link.says) {
			t.Errorf("%s: the page says %q, want %q", link.what, got, link.says)
		}
		if con.eval(`String(!!document.querySelector("form#link-answer"))`) != "false" {
			t.Errorf("%s: the page still offers an answer", link.what)
		}
	}
}
