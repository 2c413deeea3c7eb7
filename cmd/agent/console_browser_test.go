package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/browsertest"
	"github.com/edgeagent/agent/internal/clitest"
	"github.com/edgeagent/agent/internal/mockmodel"
	"github.com/edgeagent/agent/internal/testkit"
	"github.com/edgeagent/agent/state"
)

// pageLimit bounds a wait for the console to show something: a guard
// against a page that never changes, not a measure.
const pageLimit = time.Minute

// The web console in a real headless Chromium, through the real binary:
// one control plane and one browser for every subtest, in order (each
// goes on from where the one before left the console). The screenshots
// of docs/console.md are taken here (AGENT_UPDATE_SCREENSHOTS=1 writes
// them to docs/console/).
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	b := browsertest.New(t)
	c := startCP(t, freeAddr(t), t.TempDir())
	defer c.stop()
	dataDir := t.TempDir()
	ag := startAgentProc(t, c, dataDir)
	agentToken := filepath.Join(dataDir, "agent-token")
	testkit.WaitFor(t, "the agent to register", func() bool { _, err := os.Stat(agentToken); return err == nil })
	con := &console{t: t, b: b, base: c.url()}
	// Each step goes on from the one before: after a failure the rest
	// would only fail with it.
	step := func(name string, f func(t *testing.T)) {
		if !t.Failed() {
			t.Run(name, f)
		}
	}

	step("an agent's token cannot sign in", func(t *testing.T) {
		con.t = t
		con.open("/tasks")
		con.waitJS("the sign-in page", `location.pathname === "/signin" && !!document.querySelector("form#signin input#token[type=password]")`)
		if got := con.eval(`new URLSearchParams(location.search).get("next")`); got != "/tasks" {
			t.Errorf("the sign-in page's next is %q, want /tasks", got)
		}
		b.Screenshot(t, "signin", browsertest.Desktop)
		for _, f := range []struct{ what, file, says string }{
			{"an agent's token", agentToken, "an agent's token cannot sign in; use an operator token"},
			{"the registration secret", c.tokenFile, "use an operator token"},
		} {
			con.signIn(f.what+" refused", tokenOf(t, f.file), `!!document.getElementById("signin-error")`)
			if got := con.text("#signin-error"); !strings.Contains(got, f.says) {
				t.Errorf("signing in with %s: p#signin-error says %q, want %q", f.what, got, f.says)
			}
			if ck := con.session(); ck != nil {
				t.Errorf("signing in with %s set a session cookie", f.what)
			}
		}
	})

	step("sign in", func(t *testing.T) {
		con.t = t
		con.open("/signin?next=/tasks")
		con.signIn("the tasks page after signing in", tokenOf(t, c.operatorFile), `location.pathname === "/tasks" && !!document.getElementById("tasks")`)
		ck := con.session()
		if ck == nil {
			t.Fatal("no session cookie after signing in")
		}
		if !ck.HTTPOnly || ck.SameSite != "Strict" || ck.Secure || ck.Path != "/" {
			t.Errorf("session cookie over http: HttpOnly %v, SameSite %q, Secure %v, Path %q", ck.HTTPOnly, ck.SameSite, ck.Secure, ck.Path)
		}
		if strings.Contains(ck.Value, tokenOf(t, c.operatorFile)) {
			t.Error("the session cookie holds the operator token")
		}
		// No approval waits: / leads to the tasks.
		con.open("/")
		con.waitJS("/ to lead to the tasks", `location.pathname === "/tasks"`)
	})

	var live string // the task the live card follows, completed after it
	step("a running task's card advances without reloading", func(t *testing.T) {
		con.t = t
		con.open("/tasks")
		con.waitJS("the tasks page", `!!document.getElementById("tasks")`)
		con.eval(`window.agentTestLoadedOnce = true`)
		gate1, gate2 := filepath.Join(t.TempDir(), "gate1"), filepath.Join(t.TempDir(), "gate2")
		r := runAgent(t, "submit", "--control-plane", c.url(), "--token-file", c.operatorFile, "--max-attempts", "3",
			"--prompt", "Live card\n@progress 2\n@wait-file "+gate1+"\n@progress 4\n@wait-file "+gate2+"\n@output done")
		if r.code != 0 {
			t.Fatalf("submit: %+v", r)
		}
		live = strings.TrimSpace(r.stdout)
		card := `document.getElementById(` + jsString("task-"+live) + `)`
		// The card arrives on the page loaded before the task existed,
		// then moves on with the task.
		con.waitJS("the new task's card, running", card+`?.dataset.phase === "turn_started" && `+card+`.dataset.outcome === "running" && `+card+`.querySelector(".progress")?.textContent.includes("step 2 of 2")`)
		if got := con.text("#task-" + live + " a.title"); !strings.Contains(got, "Live card") {
			t.Errorf("the card's title is %q", got)
		}
		if href := con.eval(card + `.querySelector("a.title").getAttribute("href")`); href != "/tasks/"+live {
			t.Errorf("the card's link is %q", href)
		}
		if got := con.text("#task-" + live + " .attempt"); !strings.Contains(got, "attempt 1/3") {
			t.Errorf("the card's .attempt says %q", got)
		}
		must(t, os.WriteFile(gate1, nil, 0o600))
		con.waitJS("the card's progress to move", card+`?.querySelector(".progress")?.textContent.includes("step 4 of 4")`)
		must(t, os.WriteFile(gate2, nil, 0o600))
		con.waitJS("the card to show the task completed", card+`?.dataset.phase === "completed" && `+card+`.dataset.outcome === "completed"`)
		if con.eval(`String(window.agentTestLoadedOnce)`) != "true" {
			t.Error("the page was reloaded or left: the card did not advance live")
		}
		if v := c.waitDone(t, live); v.Phase != state.PhaseCompleted {
			t.Errorf("the control plane has the task %s", v.Phase)
		}
	})

	step("the task page", func(t *testing.T) {
		con.t = t
		con.open("/tasks/" + live)
		con.waitJS("the task page", `!!document.getElementById(`+jsString("task-"+live)+`) && !!document.querySelector("ol#timeline li.attempt") && !!document.getElementById("result")`)
		if got := con.eval(`document.querySelector("ol#timeline li.attempt").dataset.status`); got != "completed" {
			t.Errorf("the timeline's attempt has data-status %q", got)
		}
		if got := con.text("#timeline li.attempt .model"); !strings.Contains(got, "model-a") {
			t.Errorf("the timeline's attempt shows the model %q, want model-a", got)
		}
		if got := con.text("pre#log"); !strings.Contains(got, "done") {
			t.Errorf("pre#log does not hold the task's output: %q", got)
		}
		if con.eval(`!!document.querySelector("form#cancel")`) != "false" {
			t.Error("a completed task offers form#cancel")
		}
		b.Screenshot(t, "task", browsertest.Desktop)
	})

	step("cancel a task from its page", func(t *testing.T) {
		con.t = t
		id := submit(t, c, "Cancel me\n@progress 1\n@wait-file "+filepath.Join(t.TempDir(), "never"))
		c.waitPhase(t, id, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
		con.open("/tasks/" + id)
		con.waitJS("the cancel form", `!!document.querySelector("form#cancel input[name=csrf]") && !!document.querySelector("form#cancel [type=submit]")`)
		// Submitted with no --max-attempts: the limit is the agent's (its
		// default, 3 attempts), as the attempt records it.
		if got := strings.TrimSpace(con.text("#task-" + id + " .attempt")); got != "attempt 1/3" {
			t.Errorf("the card's .attempt says %q, want attempt 1/3", got)
		}
		con.post("cancel", chromedp.Click(chromedp.CSS(`form#cancel [type=submit]`)), "the task page to show the task cancelled", `location.pathname === `+jsString("/tasks/"+id)+` && document.getElementById(`+jsString("task-"+id)+`)?.dataset.phase === "cancelled"`)
		if v := c.waitPhase(t, id, "cancelled", terminal); v.Phase != state.PhaseCancelled {
			t.Errorf("after the cancel the control plane has the task %s", v.Phase)
		}
	})

	var running string // a task left running, for the forged posts and the agents page
	step("a forged cross-site form post is refused", func(t *testing.T) {
		con.t = t
		running = submit(t, c, "Refactor the parser\n@progress 3\n@wait-file "+filepath.Join(t.TempDir(), "never"))
		c.waitPhase(t, running, "running", func(p state.Phase) bool { return p == state.PhaseTurnStarted })
		// Another origin on loopback: the same site on another port, and
		// another site (localhost is not 127.0.0.1). Its page posts a
		// form to the console as soon as it loads.
		// Its form carries a made-up csrf token, or even the session's
		// own (as if it had leaked): the origin alone is refused.
		con.open("/tasks/" + running)
		con.waitJS("the cancel form", `!!document.querySelector("form#cancel input[name=csrf]")`)
		leaked := con.eval(`document.querySelector("form#cancel input[name=csrf]").value`)
		target := c.url() + "/tasks/" + running + "/cancel"
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>You won!</title>
<form method="post" action="%s"><input type="hidden" name="csrf" value="%s"></form>
<script>document.forms[0].submit()</script>`, html.EscapeString(target), html.EscapeString(r.URL.Query().Get("csrf")))
		}))
		defer evil.Close()
		port := evil.URL[strings.LastIndexByte(evil.URL, ':')+1:]
		for _, f := range []struct{ origin, csrf string }{
			{evil.URL, "forged"},
			{"http://localhost:" + port, "forged"},
			{evil.URL, leaked},
			{"http://localhost:" + port, leaked},
		} {
			origin := f.origin
			con.open2(origin + "/prize?csrf=" + url.QueryEscape(f.csrf))
			con.waitJS("the forged post to be answered", `location.origin === `+jsString(c.url()))
			path := con.eval(`location.pathname`)
			status := con.eval(`performance.getEntriesByType("navigation")[0].responseStatus`)
			t.Logf("the post from %s: %s %s", origin, status, path)
			switch {
			case path == "/tasks/"+running+"/cancel":
				// Refused where it landed: 403 and the forbidden page.
				if status != "403" || !strings.Contains(con.text("#forbidden"), "forbidden: cross-site request refused") {
					t.Errorf("the post from %s: %s, p#forbidden %q", origin, status, con.text("#forbidden"))
				}
			case path == "/signin":
				// Without the cookie (SameSite=Strict, another site):
				// sent to sign in, nothing done.
			default:
				t.Errorf("the post from %s landed on %s (%s): accepted?", origin, path, status)
			}
			if v := c.task(t, running); v.Phase != state.PhaseTurnStarted || v.CancelRequested {
				t.Fatalf("the forged post from %s cancelled the task: %s", origin, v.Phase)
			}
		}
	})

	step("the agents and tasks pages", func(t *testing.T) {
		con.t = t
		con.open("/agents")
		con.waitJS("the agent's card with its running task", `[...document.querySelectorAll("section#agents article.agent")].some(a => a.dataset.online === "true" && a.querySelector("ul.running a[href="+`+jsString(`"/tasks/`+running+`"`)+`+"]"))`)
		if got := con.text("section#agents article.agent .capacity"); !strings.Contains(got, "1 of") {
			t.Errorf("the agent's capacity reads %q", got)
		}
		if got := con.text("section#agents article.agent .executor") + " · " + con.text("section#agents article.agent .models"); got != "the sample executor (sample) · model-a model-b " {
			t.Errorf("the agent's executor and models read %q", got)
		}
		b.Screenshot(t, "agents", browsertest.Desktop)
		con.open("/tasks")
		con.waitJS("the tasks page with every task", `document.querySelectorAll("section#tasks article.card").length >= 3`)
		b.Screenshot(t, "tasks", browsertest.Desktop)
		// Filtered by phase, through the form.
		con.open("/tasks?phase=cancelled")
		con.waitJS("the filtered list", `!!document.getElementById("tasks")`)
		if got := con.eval(`[...document.querySelectorAll("section#tasks article.card")].map(a => a.dataset.phase).join(",")`); got != "cancelled" {
			t.Errorf("/tasks?phase=cancelled shows the phases %q", got)
		}
		if _, err := c.client.CancelTask(t.Context(), running); err != nil {
			t.Fatal(err)
		}
		c.waitPhase(t, running, "cancelled", terminal)
	})

	step("start a task from the new-task form on a phone", func(t *testing.T) {
		con.t = t
		b.SetViewport(t, browsertest.Phone)
		defer b.SetViewport(t, browsertest.Desktop)
		con.open("/tasks")
		con.waitJS("the tasks page's new-task link", `!!document.getElementById("new-task-link")`)
		con.post("open the form", chromedp.Tap(chromedp.CSS(`#new-task-link`)), "the new-task form", `location.pathname === "/tasks/new" && !!document.querySelector("form#newtask textarea#prompt")`)
		if w := con.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); w != "0" {
			t.Errorf("the new-task form scrolls sideways on a phone by %s px", w)
		}
		con.do("type the prompt", chromedp.SendKeys(chromedp.CSS("#prompt"), "Started from a phone\n@output typed on a phone"))
		con.do("type the title", chromedp.SendKeys(chromedp.CSS("#title"), "From the phone"))
		b.Screenshot(t, "newtask", browsertest.Phone)
		con.post("submit the form", chromedp.Tap(chromedp.CSS(`#newtask-submit`)), "the new task's page", `/^\/tasks\/t-/.test(location.pathname)`)
		id := strings.TrimPrefix(con.eval(`location.pathname`), "/tasks/")
		v := c.waitDone(t, id)
		if v.Phase != state.PhaseCompleted || v.Title != "From the phone" || v.Prompt != "Started from a phone\n@output typed on a phone" {
			t.Errorf("the task the form submitted: %s, title %q, prompt %q", v.Phase, v.Title, v.Prompt)
		}
	})

	step("the tasks page on a phone: what needs a person on top, then the newest, each ended task's result", func(t *testing.T) {
		con.t = t
		// Stopped for a person to decide, before the newer tasks below.
		stopped := submit(t, c, "Rotate the staging key\n@side-effect rotated the staging key\n@fail network\n@no-session")
		if v := c.waitDone(t, stopped); v.Phase != state.PhaseRecoverableFailed {
			t.Fatalf("the task meant to stop is %s", v.Phase)
		}
		summarized := submit(t, c, "Summarize the notes\n@progress 2\n@output three notes, one open question")
		if v := c.waitDone(t, summarized); v.Phase != state.PhaseCompleted {
			t.Fatalf("the task meant to complete is %s", v.Phase)
		}
		b.SetViewport(t, browsertest.Phone)
		defer b.SetViewport(t, browsertest.Desktop)
		con.open("/tasks")
		con.waitJS("the tasks page", `!!document.getElementById("tasks")`)
		con.eval(`window.agentTestLoadedOnce = true`)
		// A task submitted while the page is open arrives on top of the
		// newest, under the one that needs a person, and shows its
		// result once it ends.
		gate := filepath.Join(t.TempDir(), "gate")
		newest := submit(t, c, "Tidy the changelog\n@progress 2\n@wait-file "+gate+"\n@output tidied")
		cards := `[...document.querySelectorAll("section#tasks article.card")]`
		con.waitJS("the new task's card under the stopped one", cards+`.map(a => a.id).slice(0, 2).join(" ") === `+jsString("task-"+stopped+" task-"+newest))
		must(t, os.WriteFile(gate, nil, 0o600))
		con.waitJS("the new task's card to show its result", `document.getElementById(`+jsString("task-"+newest)+`)?.querySelector(".progress .result")?.textContent === "done: Tidy the changelog"`)
		if con.eval(`String(window.agentTestLoadedOnce)`) != "true" {
			t.Error("the page was reloaded: the card did not arrive live")
		}
		// The whole order: the stopped task, then the newest first.
		views, err := c.client.Tasks(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(views, func(x, y api.TaskView) int {
			return cmp.Or(y.CreatedAt.Compare(x.CreatedAt), strings.Compare(y.ID, x.ID))
		})
		want := []string{"task-" + stopped}
		for _, v := range views {
			if v.ID != stopped {
				want = append(want, "task-"+v.ID)
			}
		}
		if got := con.eval(cards + `.map(a => a.id).join(" ")`); got != strings.Join(want, " ") {
			t.Errorf("the cards on the page:\n%s\nwant:\n%s", got, strings.Join(want, " "))
		}
		// Ended tasks say what they came to, never their last progress.
		for id, line := range map[string]string{
			summarized: "done: Summarize the notes",
			stopped:    "recoverable_failed: ",
		} {
			got := con.text("#task-" + id + " .progress")
			if !strings.HasPrefix(got, line) {
				t.Errorf("the card of %s says %q, want %q", id, got, line)
			}
		}
		if got := con.eval(cards + `.filter(a => ["completed", "failed", "recoverable_failed", "cancelled", "timed_out", "expired"].includes(a.dataset.phase) && (a.querySelector(".progress-text") || !a.querySelector(".progress .result"))).map(a => a.id).join(" ")`); got != "" {
			t.Errorf("ended tasks whose card shows progress or no result: %s", got)
		}
		if w := con.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); w != "0" {
			t.Errorf("the tasks page scrolls sideways on a phone by %s px", w)
		}

		// The system's dark mode, followed.
		background := func() string {
			return con.eval(`getComputedStyle(document.body).backgroundColor + " " + getComputedStyle(document.querySelector("article.card")).backgroundColor`)
		}
		if got := background(); got != "rgb(246, 247, 249) rgb(255, 255, 255)" {
			t.Errorf("light: the page and a card are %s", got)
		}
		b.SetColorScheme(t, "dark")
		defer b.SetColorScheme(t, "")
		con.waitJS("the dark scheme", `matchMedia("(prefers-color-scheme: dark)").matches`)
		if got := background(); got != "rgb(15, 19, 23) rgb(23, 29, 35)" {
			t.Errorf("dark: the page and a card are %s", got)
		}
		b.Screenshot(t, "tasks-dark", browsertest.Phone)
	})

	step("answer an approval from the inbox on a phone", func(t *testing.T) {
		con.t = t
		if code := ag.stop(); code != 0 {
			t.Fatalf("the sample agent exited %d", code)
		}
		mock, err := mockmodel.Start()
		if err != nil {
			t.Fatal(err)
		}
		defer mock.Close()
		codexDir := t.TempDir()
		codex := startProc(t, "codex-agent", clitest.CodexEnv(t, mock, clitest.CodexOptions{}), "run", "--control-plane", c.url(),
			"--token-file", c.tokenFile, "--data-dir", codexDir,
			"--executor", "codex", "--executor-bin", clitest.CodexBin(t), "--executor-env", "MOCK_API_KEY",
			"--approval", "ask", "--approval-timeout", "2m",
			"--heartbeat-interval", "1s", "--shutdown-grace", "2s", "--kill-grace", "1s")
		defer codex.stop()

		b.SetViewport(t, browsertest.Phone)
		defer b.SetViewport(t, browsertest.Desktop)
		con.open("/inbox")
		con.waitJS("the empty inbox", `!!document.getElementById("inbox-empty")`)
		// Confined, Codex asks before a file change (the default sandbox,
		// started untrusted): its question shows the file and the diff.
		id := submit(t, c, "Write the notes\nmock: write\nmock-file: approved.txt")
		item := `document.getElementById(` + jsString("approval-"+id) + `)`
		// The question arrives on the inbox loaded before it.
		con.waitJS("the approval in the inbox", item+`?.querySelector("ul.paths code")?.textContent.endsWith("/approved.txt")`)
		if got := con.eval(item + `.querySelector(".question-diff .add")?.textContent ?? ""`); got != "+written by the mock model" {
			t.Errorf("the approval's diff shows %q as added, want the file's line", got)
		}
		if got := con.text("#approval-" + id + " .deadline"); !strings.Contains(got, "if nobody answers") {
			t.Errorf("the approval does not say when it is declined: %q", got)
		}
		if con.eval(`String(!!document.getElementById("inbox-empty"))`) != "false" {
			t.Error("p#inbox-empty is still shown beside the approval")
		}
		if got := con.eval(item + `.querySelector("a.task").getAttribute("href")`); got != "/tasks/"+id {
			t.Errorf("the approval links to %q", got)
		}
		if w := con.eval(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); w != "0" {
			t.Errorf("the inbox scrolls sideways on a phone by %s px", w)
		}
		b.Screenshot(t, "inbox", browsertest.Phone)
		// While an approval waits, / leads to the inbox.
		con.open("/")
		con.waitJS("/ to lead to the inbox", `location.pathname === "/inbox" && !!`+item)
		con.post("accept", chromedp.Tap(chromedp.CSS(`#approval-`+id+` button.accept`)), "the answered approval to leave the inbox", `location.pathname === "/inbox" && !`+item)
		v := c.waitDone(t, id)
		if v.Phase != state.PhaseCompleted {
			t.Fatalf("after the accept the task is %s (%s)", v.Phase, v.PhaseReason)
		}
		if _, err := os.Stat(filepath.Join(codexDir, "work", id, "approved.txt")); err != nil {
			t.Errorf("the accepted command did not run: %v", err)
		}
	})

	step("sign out", func(t *testing.T) {
		con.t = t
		con.open("/tasks")
		con.waitJS("the sign-out form", `!!document.querySelector("form#signout input[name=csrf]")`)
		con.post("sign out", chromedp.Click(chromedp.CSS(`form#signout [type=submit]`)), "the sign-in page", `location.pathname === "/signin"`)
		if ck := con.session(); ck != nil {
			t.Error("the session cookie is still set after signing out")
		}
		con.open("/tasks")
		con.waitJS("the sign-in page again", `location.pathname === "/signin"`)
	})
}

// console drives the console's pages in the browser for one subtest.
type console struct {
	t    *testing.T
	b    *browsertest.Browser
	base string
}

// open loads a path of the console.
func (c *console) open(path string) { c.open2(c.base + path) }

// open2 loads any URL.
func (c *console) open2(url string) {
	c.t.Helper()
	c.do("open "+url, chromedp.Navigate(url))
}

func (c *console) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	c.b.Do(c.t, what, actions...)
}

func (c *console) waitJS(what, expr string) {
	c.t.Helper()
	c.b.WaitJS(c.t, pageLimit, what, expr)
}

// eval evaluates a JavaScript expression to a string.
func (c *console) eval(expr string) string {
	c.t.Helper()
	return browsertest.Eval[string](c.t, c.b, `String(`+expr+`)`)
}

// text is the text of the first element sel matches, "" when none.
func (c *console) text(sel string) string {
	c.t.Helper()
	return c.eval(`document.querySelector(` + jsString(sel) + `)?.textContent ?? ""`)
}

// post runs an action that posts a form, and waits until the browser
// shows the answer: a new document (the one before is marked) where expr
// holds.
func (c *console) post(what string, action chromedp.Action[chromedp.Void], then, expr string) {
	c.t.Helper()
	c.eval(`window.agentTestBefore = true`)
	c.do(what, action)
	c.waitJS(then, `window.agentTestBefore === undefined && (`+expr+`)`)
}

// signIn fills the sign-in form on the page with tok, submits it, and
// waits until the answer's page has expr.
func (c *console) signIn(then, tok, expr string) {
	c.t.Helper()
	c.waitJS("the sign-in form", `!!document.querySelector("form#signin input#token")`)
	c.eval(`document.getElementById("token").value = ""`)
	c.do("type the token", chromedp.SendKeys(chromedp.CSS("#token"), tok))
	c.post("sign in", chromedp.Click(chromedp.CSS("#signin-submit")), then, expr)
}

// session is the console's session cookie in the browser, or nil.
func (c *console) session() *browserCookie {
	c.t.Helper()
	for _, ck := range c.b.Cookies(c.t, c.base+"/") {
		if ck.Name == "agent_session" {
			return &browserCookie{Value: ck.Value, Path: ck.Path, HTTPOnly: ck.HTTPOnly, Secure: ck.Secure, SameSite: string(ck.SameSite)}
		}
	}
	return nil
}

type browserCookie struct {
	Value, Path, SameSite string
	HTTPOnly, Secure      bool
}

// tokenOf is the token in file.
func tokenOf(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
