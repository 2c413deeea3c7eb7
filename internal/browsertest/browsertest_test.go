package browsertest

import (
	"bytes"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A page on loopback loads and runs its script; the screenshot is a PNG of
// the viewport's width, the whole page tall; closing the browser leaves no
// process of it behind.
func TestBrowser(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><meta name="viewport" content="width=device-width">
<title>hello</title><p id="p">static</p><div style="height:2000px"></div>
<script>document.getElementById("p").textContent = "scripted";
if (location.pathname === "/moves") setTimeout(() => { location.href = "/moved" }, 100)</script>`)
	}))
	defer srv.Close()
	b := New(t)
	pids := b.Processes()
	if len(pids) < 2 {
		t.Fatalf("the browser's processes %v: want the main one and its children", pids)
	}
	dir := b.ProfileDir()
	if dir == "" || !strings.HasPrefix(dir, os.TempDir()) {
		t.Errorf("profile directory %q, want a temporary one", dir)
	}

	b.Do(t, "open the page", chromedp.Navigate(srv.URL), chromedp.WaitReady(chromedp.ID("p")))
	if got := Eval[string](t, b, `document.getElementById("p").textContent`); got != "scripted" {
		t.Errorf("the page's script did not run: %q", got)
	}

	// WaitJS waits across a navigation the page makes by itself.
	b.Do(t, "open the page that moves", chromedp.Navigate(srv.URL+"/moves"))
	b.WaitJS(t, time.Minute, "the page to move", `location.pathname === "/moved" && document.getElementById("p").textContent === "scripted"`)

	t.Setenv(UpdateScreenshots, "")
	for _, v := range []Viewport{Desktop, Phone} {
		path := b.Screenshot(t, "page", v)
		f, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(f))
		if err != nil {
			t.Fatalf("screenshot %s: %v", path, err)
		}
		if got := img.Bounds().Dx(); int64(got) != v.Width {
			t.Errorf("screenshot at %+v is %d wide", v, got)
		}
		if got := img.Bounds().Dy(); got < 2000 {
			t.Errorf("screenshot at %+v is %d tall: not the whole page", v, got)
		}
		if strings.HasPrefix(path, filepath.Join("docs", "console")) || strings.Contains(path, "/docs/console/") {
			t.Errorf("screenshot written to the docs without %s: %s", UpdateScreenshots, path)
		}
	}

	b.Close()
	noneLeft(t, pids, dir)
}

// A page can reach nothing but loopback: another address fails to load,
// and the browser does not hang on it.
func TestBrowserReachesOnlyLoopback(t *testing.T) {
	// A listener on a non-loopback address of this machine, when it has
	// one: reachable from here, and still refused to the browser.
	addr := nonLoopbackAddr(t)
	b := New(t)
	for _, url := range []string{"http://" + addr + "/", "http://example.com/"} {
		if err := chromedp.Do(b.Context(), chromedp.Navigate(url)); err == nil {
			t.Errorf("the browser loaded %s", url)
		}
	}
}

// nonLoopbackAddr serves HTTP on the machine's first non-loopback address,
// or returns a documentation address (TEST-NET-1) nobody answers.
func nonLoopbackAddr(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil {
			continue
		}
		ln, err := net.Listen("tcp", ipn.IP.String()+":0")
		if err != nil {
			continue
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") })}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	return "192.0.2.1:80"
}

// noneLeft fails t if any of pids runs or a process names the profile
// directory. It does not wait: Close returns only once they are gone.
func noneLeft(t *testing.T, pids []int, dir string) {
	t.Helper()
	var left []int
	for _, pid := range pids {
		left = append(left, leftovers(pid, "")...)
	}
	if left = append(left, ProcessesUsing(dir)...); len(left) > 0 {
		t.Fatalf("the browser's processes %v outlived it", left)
	}
}

func TestFind(t *testing.T) {
	t.Setenv("AGENT_CHROMIUM", "/nonexistent/chromium")
	if _, err := Find(); err == nil || !strings.Contains(err.Error(), "AGENT_CHROMIUM /nonexistent/chromium") {
		t.Errorf("Find with a missing AGENT_CHROMIUM: %v", err)
	}
	t.Setenv("AGENT_CHROMIUM", "")
	t.Setenv("PATH", t.TempDir())
	if _, err := Find(); err != ErrNotFound {
		t.Errorf("Find with nothing on PATH: %v", err)
	}
}

// recorder is a test that New reports to: it notes a skip or a failure
// and ends its goroutine, as testing's Skip and Fatal do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()          {}
func (r *recorder) Skip(args ...any) { r.skipped = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(f string, args ...any) {
	r.failed = fmt.Sprintf(f, args...)
	runtime.Goexit()
}

// Without Chromium a test skips in one line, and fails when CI is set.
func TestNewWithoutChromium(t *testing.T) {
	t.Setenv("AGENT_CHROMIUM", "")
	t.Setenv("PATH", t.TempDir())
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); New(r) }()
		<-done
		switch {
		case ci == "" && (r.skipped != ErrNotFound.Error() || r.failed != ""):
			t.Errorf("without CI: skipped %q, failed %q", r.skipped, r.failed)
		case ci != "" && (r.skipped != "" || !strings.HasPrefix(r.failed, ErrNotFound.Error()) || strings.Contains(r.failed, "\n")):
			t.Errorf("under CI: skipped %q, failed %q", r.skipped, r.failed)
		}
	}
}
