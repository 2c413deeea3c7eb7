package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/state"
)

// A task whose agent reported a diff links to it from its page, and the
// diff page shows it file by file, each line marked, markup in it
// escaped; a task with none says so.
func TestDiffPage(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	a := newAgent(t, cp, "agent-1")
	id := submit(t, cp, "footer")
	a.claim()
	a.start(id)
	if _, body := b.get("/tasks/" + id); strings.Contains(body, `id="diff-link"`) {
		t.Error("a task with no diff links to one")
	}
	if resp, body := b.get("/tasks/" + id + "/diff"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "has no diff") {
		t.Errorf("the diff of a task with none: %s\n%s", resp.Status, body)
	}
	patch := "diff --git a/site/footer.html b/site/footer.html\nindex 1..2 100644\n--- a/site/footer.html\n+++ b/site/footer.html\n@@ -1,2 +1,2 @@\n <footer>\n-<p>old</p>\n+<p><script>alert(1)</script></p>\n" +
		"diff --git a/logo.png b/logo.png\nnew file mode 100644\nBinary files /dev/null and b/logo.png differ\n"
	a.send(id, state.EventDiff, state.DiffEvent{Repo: "site", Branch: "agent/" + id, BaseCommit: "b0", Head: "h1", Files: 2, Insertions: 1, Deletions: 1,
		Patch: patch, Bytes: int64(len(patch))})

	_, body := b.get("/tasks/" + id)
	if !strings.Contains(body, `<p id="diff-link"><a href="/tasks/`+id+`/diff">The diff</a>: 2 files changed, &#43;1 −1</p>`) || strings.Contains(body, `id="result"`) {
		t.Errorf("a running task with a diff: want the link, and no result yet\n%s", body)
	}
	resp, body := b.get("/tasks/" + id + "/diff")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the diff page: %s\n%s", resp.Status, body)
	}
	// html/template writes + as &#43; in text.
	for _, want := range []string{
		`<span class="path">site/footer.html</span> <span class="added">+1</span> <span class="deleted">−1</span>`,
		`<span class="hunk">@@ -1,2 &#43;1,2 @@</span>`,
		`<span> &lt;footer&gt;</span>`,
		`<span class="del">-&lt;p&gt;old&lt;/p&gt;</span>`,
		`<span class="add">&#43;&lt;p&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;/p&gt;</span>`,
		`<span class="path">logo.png</span> <span class="added">+0</span> <span class="deleted">−0</span> <span class="binary">binary</span>`,
		`<p id="diff-stat">2 files changed, &#43;1 −1, at the end of attempt 1</p>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the diff page lacks %s", want)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("the diff page holds the patch's markup unescaped")
	}
}

// A CLI's colours in a task's log are for a terminal: the log tail and
// the events show the text, never the escapes.
func TestLogShowsNoColourEscapes(t *testing.T) {
	t.Parallel()
	cp := start(t, server.Options{})
	b := newBrowser(t, cp.URL)
	b.signIn(operatorToken)
	a := newAgent(t, cp, "agent-1")
	id := submit(t, cp, "colours")
	a.claim()
	a.start(id)
	a.send(id, state.EventLog, state.LogEvent{Stream: state.LogStderr, Lines: []string{"\x1b[2m2026-11-27T18:49:47Z\x1b[0m \x1b[31mERROR\x1b[0m codex: it failed"}})
	_, body := b.get("/tasks/" + id)
	if !strings.Contains(body, "stderr: 2026-11-27T18:49:47Z ERROR codex: it failed") || strings.Contains(body, "[31m") || strings.Contains(body, "\x1b") {
		t.Errorf("the task page shows a CLI's colour escapes:\n%s", body)
	}
}
