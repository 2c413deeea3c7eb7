// Package browsertest runs a real headless Chromium for tests, driven with
// chromedp: the web console's browser tests sign in, click and watch pages
// the way a person does.
//
// The browser is the distribution's Chromium (AGENT_CHROMIUM names another
// binary; else chromium, chromium-browser or google-chrome on PATH). Where
// none is installed a test that needs one is skipped, saying so in one
// line; but when the environment variable CI is set it fails, for the CI
// machine has it (make tools installs it).
//
// Each browser gets a temporary profile and reaches loopback only: every
// other address goes through a proxy that does not exist, so a page cannot
// fetch anything from the network. The browser is closed at the test's
// end, and every process it started with it: chromedp's cancel waits for
// the main process and kills the children that outlive it; then New's
// cleanup reads the process list, and a Chromium process still there
// (the main one, or any naming the profile directory) fails the test.
//
// Screenshots: Browser.Screenshot writes a full-page PNG at a fixed
// viewport into the test's output directory; with AGENT_UPDATE_SCREENSHOTS=1
// it writes docs/console/NAME.png in the repository instead, for the docs.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/edgeagent/agent/internal/clitest"
)

// Candidates are the names Find looks for on PATH, in order, when
// AGENT_CHROMIUM is not set.
var Candidates = []string{"chromium", "chromium-browser", "google-chrome"}

// ErrNotFound is Find's error when no Chromium is installed.
var ErrNotFound = errors.New("no Chromium: install the distribution's chromium package or run make tools")

// actionLimit bounds one Run: a page that never answers fails the test
// instead of hanging it. It is a guard, not a measure.
const actionLimit = time.Minute

// Find returns the Chromium binary: AGENT_CHROMIUM when set (it must
// exist), else the first of Candidates on PATH.
func Find() (string, error) {
	if p := os.Getenv("AGENT_CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("AGENT_CHROMIUM %s: %w", p, err)
		}
		return path, nil
	}
	for _, name := range Candidates {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", ErrNotFound
}

// Browser is one headless Chromium with one tab, owned by a test.
type Browser struct {
	// Path is the binary that runs.
	Path  string
	ctx   context.Context
	close func()
}

// New starts Chromium for t and closes it when t ends. Without Chromium t
// is skipped (failed when CI is set).
func New(t testing.TB) *Browser {
	t.Helper()
	path, err := Find()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v; but CI is set, and the CI machine has it: failing", err)
		}
		t.Skip(err.Error())
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		// Chromium's sandbox needs user namespaces, which root in a
		// container rarely has; as anyone else it stays on.
		chromedp.Flag("no-sandbox", os.Getuid() == 0),
		// Loopback only: a proxy that refuses every connection carries
		// whatever is not loopback (loopback is never proxied), and no
		// name but localhost and the loopback addresses resolves.
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE [::1]"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.WindowSize(int(desktop.Width), int(desktop.Height)),
	)
	// The browser's own lifetime is the test's, ended in cleanup: a
	// context cancelled with the test would kill it before the cleanups
	// that still use it.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(func(string, ...any) {}))
	var once sync.Once
	b := &Browser{Path: path, ctx: ctx, close: func() {
		once.Do(func() {
			// Close the browser gracefully, then cancel what is left;
			// the allocator's cancel waits until the process has exited
			// and its leftovers are killed.
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			chromedp.Cancel(sctx)
			cancel()
			cancelTab()
			cancelAlloc()
		})
	}}
	t.Cleanup(b.Close)
	// The first action starts the browser.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	// Registered after Close, so run before it: close, then look.
	pid, dir := b.PID(), b.ProfileDir()
	t.Cleanup(func() {
		b.Close()
		if left := leftovers(pid, dir); len(left) > 0 {
			t.Errorf("Chromium processes %v outlived the browser; killing them", left)
			for _, p := range left {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	return b
}

// leftovers are the processes of the browser pid with profile dir that
// still run.
func leftovers(pid int, dir string) []int {
	var left []int
	if dir != "" {
		left = ProcessesUsing(dir)
	}
	if pid > 0 && alive(pid) && !slices.Contains(left, pid) {
		left = append(left, pid)
	}
	return left
}

// Close closes the browser and waits until its processes have exited.
// The test's end does it too.
func (b *Browser) Close() { b.close() }

// Context is the tab's chromedp context, for chromedp.Run and Do.
func (b *Browser) Context() context.Context { return b.ctx }

// PID is the browser's main process.
func (b *Browser) PID() int {
	c := chromedp.FromContext(b.ctx)
	if c == nil || c.Browser == nil || c.Browser.Process() == nil {
		return 0
	}
	return c.Browser.Process().Pid
}

// Do runs actions in the tab and fails t on the first error, saying what
// it was doing.
func (b *Browser) Do(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionLimit)
	defer cancel()
	for try := 1; ; try++ {
		err := chromedp.Do(ctx, actions...)
		if err == nil {
			return
		}
		// A live page replaces elements as updates come (the console's
		// stream swaps a card's or an approval's outerHTML): a node found
		// by a query may be gone when the action reaches it, before the
		// action did anything. Found again, it is the new one.
		if try < 3 && strings.Contains(err.Error(), "node with given id") {
			continue
		}
		t.Fatalf("%s: %v", what, err)
	}
}

// Run runs one action in the tab and returns its value; an error fails t.
func Run[T any](t testing.TB, b *Browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionLimit)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// WaitJS evaluates a JavaScript expression in the page every 50 ms until
// it is true, for up to limit, and fails t with what otherwise. The page
// may navigate meanwhile (a form posted, a redirect): an evaluation that
// fails because the page went away is tried again on the next one.
func (b *Browser) WaitJS(t testing.TB, limit time.Duration, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`Boolean(`+expr+`)`))
		cancel()
		if err == nil && ok {
			return
		}
		if err != nil {
			last = err
		}
		if b.ctx.Err() != nil || time.Now().After(deadline) {
			loc, _ := chromedp.Run(b.ctx, chromedp.Location())
			t.Fatalf("gave up waiting %s for %s (page %s; last error %v)", limit, what, loc, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](t testing.TB, b *Browser, expr string) T {
	t.Helper()
	return Run(t, b, "evaluate "+expr, chromedp.Evaluate[T](expr))
}

// Cookies returns the browser's cookies for url.
func (b *Browser) Cookies(t testing.TB, url string) []*network.Cookie {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionLimit)
	defer cancel()
	r, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		t.Fatalf("cookies of %s: %v", url, err)
	}
	return r.Cookies
}

// Viewport is a screen size the page is laid out for.
type Viewport struct {
	Width, Height int64
	// Mobile lays the page out as a phone's browser does (the meta
	// viewport applies, touch events).
	Mobile bool
}

var (
	desktop = Viewport{Width: 1280, Height: 800}
	// Desktop is a laptop's window.
	Desktop = desktop
	// Phone is a phone's screen held upright (an iPhone 14's CSS pixels).
	Phone = Viewport{Width: 390, Height: 844, Mobile: true}
)

// SetViewport lays the page out for v, as a person on that screen sees it.
func (b *Browser) SetViewport(t testing.TB, v Viewport) {
	t.Helper()
	var opts []chromedp.EmulateViewportOption
	if v.Mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	b.Do(t, fmt.Sprintf("set the viewport to %dx%d", v.Width, v.Height), chromedp.EmulateViewport(v.Width, v.Height, opts...))
}

// SetColorScheme lays the page out as a system that prefers scheme does
// (prefers-color-scheme: "dark" or "light"); "" is the browser's own
// again.
func (b *Browser) SetColorScheme(t testing.TB, scheme string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, actionLimit)
	defer cancel()
	var features []*emulation.MediaFeature
	if scheme != "" {
		features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features}); err != nil {
		t.Fatalf("prefer the %q colour scheme: %v", scheme, err)
	}
}

// UpdateScreenshots is the variable that makes Screenshot write the
// repository's docs/console/ instead of the test's output.
const UpdateScreenshots = "AGENT_UPDATE_SCREENSHOTS"

// Screenshot lays the page out for v and writes a full-page PNG named
// name.png: into docs/console/ of the repository when
// AGENT_UPDATE_SCREENSHOTS=1, else into the test's output directory. It
// returns the file's path. The viewport stays v afterwards.
func (b *Browser) Screenshot(t testing.TB, name string, v Viewport) string {
	t.Helper()
	b.SetViewport(t, v)
	png := Run(t, b, "screenshot "+name, chromedp.FullScreenshot(100))
	dir := t.TempDir()
	if os.Getenv(UpdateScreenshots) == "1" {
		root, err := clitest.Root()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "docs", "console")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name+".png")
	// Screenshots are documentation, meant to be read: 0644.
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Processes returns the browser's processes: the main one and every
// process whose command line names its profile directory (the zygote,
// renderers, the GPU and network services), alive now.
func (b *Browser) Processes() []int {
	pid := b.PID()
	if pid == 0 {
		return nil
	}
	dir := profileDir(pid)
	if dir == "" {
		return []int{pid}
	}
	return ProcessesUsing(dir)
}

// ProfileDir is the browser's --user-data-dir, read from its command line.
func (b *Browser) ProfileDir() string { return profileDir(b.PID()) }

func profileDir(pid int) string {
	for _, arg := range cmdline(pid) {
		if d, ok := strings.CutPrefix(arg, "--user-data-dir="); ok {
			return d
		}
	}
	return ""
}

func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// ProcessesUsing lists the live (not zombie) processes whose command line
// has --user-data-dir=dir: a Chromium's, and its children's. Chromium's
// children rewrite their title, so their command line is one string of
// arguments joined by spaces, not one argument per NUL.
func ProcessesUsing(dir string) []int {
	want := "--user-data-dir=" + dir
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		for _, arg := range cmdline(pid) {
			if slices.Contains(strings.Fields(arg), want) && alive(pid) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}
