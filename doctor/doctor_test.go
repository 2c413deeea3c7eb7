package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/datadir"
	"github.com/edgeagent/agent/internal/gittest"
	"github.com/edgeagent/agent/internal/landlock"
	"github.com/edgeagent/agent/outbox"
	"github.com/edgeagent/agent/runner/acp"
	"github.com/edgeagent/agent/runner/claude"
	"github.com/edgeagent/agent/runner/cli"
	"github.com/edgeagent/agent/runner/codex"
	"github.com/edgeagent/agent/runner/exec"
	"github.com/edgeagent/agent/workspace"
)

// checkNamed finds a check among Run's.
func checkNamed(t *testing.T, checks []Check, name CheckName) Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", name, checks)
	return Check{}
}

func wantCheck(t *testing.T, c Check, result CheckResult, detail, fix string) {
	t.Helper()
	if c.Result != result || !strings.Contains(c.Detail, detail) || !strings.Contains(c.Fix, fix) {
		t.Errorf("%s: got %s %q (fix %q), want %s with %q (fix %q)", c.Name, c.Result, c.Detail, c.Fix, result, detail, fix)
	}
	if (c.Result == CheckFail) != (c.Fix != "") && c.Result != CheckWarn {
		t.Errorf("%s: a failure, and only a failure or a warning, has a fix: %+v", c.Name, c)
	}
}

func TestClockResult(t *testing.T) {
	for _, tc := range []struct {
		skew time.Duration
		want CheckResult
	}{
		{0, CheckPass},
		{ClockWarnSkew, CheckPass},
		{-ClockWarnSkew, CheckPass},
		{ClockWarnSkew + time.Second, CheckWarn},
		{-ClockWarnSkew - time.Second, CheckWarn},
		{ClockFailSkew, CheckWarn},
		{ClockFailSkew + time.Second, CheckFail},
		{-time.Hour, CheckFail},
	} {
		t.Run(tc.skew.String(), func(t *testing.T) {
			if got := clockResult(tc.skew); got != tc.want {
				t.Errorf("clockResult(%s) = %s, want %s", tc.skew, got, tc.want)
			}
		})
	}
}

func TestFreeSpaceResult(t *testing.T) {
	const tb = 1 << 40
	for _, tc := range []struct {
		name        string
		free, total int64
		want        CheckResult
	}{
		{"plenty", 100 << 30, tb, CheckPass},
		{"under 5 percent", 40 << 30, tb, CheckWarn},
		{"under 1 GiB of a small disk", 900 << 20, 2 << 30, CheckWarn},
		{"1 GiB of a small disk", 1 << 30, 2 << 30, CheckPass},
		{"under 100 MiB", 99 << 20, tb, CheckFail},
		{"none", 0, tb, CheckFail},
		{"total unknown", 2 << 30, 0, CheckPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := freeSpaceResult(tc.free, tc.total); got != tc.want {
				t.Errorf("freeSpaceResult(%d, %d) = %s, want %s", tc.free, tc.total, got, tc.want)
			}
		})
	}
}

// fakeControlPlane serves /healthz and /v1/whoami on loopback, as a real
// net/http server: the Date header it sends and the token it wants are the
// test's.
type fakeControlPlane struct {
	url   string
	date  func() string // the Date header; "" sends none
	token string
}

func startFakeControlPlane(t *testing.T, token string, date func() string, healthz http.HandlerFunc) *fakeControlPlane {
	t.Helper()
	f := &fakeControlPlane{date: date, token: token}
	mux := http.NewServeMux()
	if healthz == nil {
		healthz = func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ok"}`)) }
	}
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"unauthorized"}`))
			return
		}
		w.Write([]byte(`{"principal":"registration"}`))
	})
	withDate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := f.date(); d != "" {
			w.Header().Set("Date", d)
		} else {
			w.Header()["Date"] = nil // net/http adds none then
		}
		mux.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: withDate}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	f.url = "http://" + ln.Addr().String()
	return f
}

// patient is the tests' timeout where an answer is expected: a loaded
// machine is slow, and a test must not depend on its speed.
const patient = 5 * time.Minute

// cpOptions are options whose control plane part is c's, with a clock
// fixed on a whole second.
func cpOptions(t *testing.T, url, token string, now time.Time) Options {
	return Options{ControlPlane: url, Token: token, DataDir: filepath.Join(t.TempDir(), "data"), Version: "test",
		Now: func() time.Time { return now }, Timeout: patient}
}

func TestDoctorClockFromDate(t *testing.T) {
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		offset time.Duration // the control plane's clock minus this one
		want   CheckResult
		detail string
	}{
		{"same", 0, CheckPass, "within 1s"},
		{"within a second", 900 * time.Millisecond, CheckPass, "within 1s"},
		{"control plane 20s ahead", 20 * time.Second, CheckPass, "20s behind"},
		{"this one 2m ahead", -2 * time.Minute, CheckWarn, "1m59s ahead"},
		{"control plane 10m ahead", 10 * time.Minute, CheckFail, "10m0s behind"},
		{"this one an hour ahead", -time.Hour, CheckFail, "59m59s ahead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := startFakeControlPlane(t, "tok", func() string { return now.Add(tc.offset).UTC().Format(http.TimeFormat) }, nil)
			checks := Run(context.Background(), cpOptions(t, cp.url, "tok", now))
			wantCheck(t, checkNamed(t, checks, CheckControlPlane), CheckPass, "GET /healthz answered 200", "")
			wantCheck(t, checkNamed(t, checks, CheckAuth), CheckPass, "the token from AGENT_TOKEN accepted: the registration secret (GET /v1/whoami)", "")
			c := checkNamed(t, checks, CheckClock)
			wantCheck(t, c, tc.want, tc.detail, "")
			if tc.want != CheckPass && !strings.Contains(c.Fix, "timedatectl set-ntp true") {
				t.Errorf("clock fix %q", c.Fix)
			}
		})
	}
}

func TestDoctorControlPlane(t *testing.T) {
	now := time.Now()
	httpDate := func() string { return time.Now().UTC().Format(http.TimeFormat) }
	t.Run("wrong token", func(t *testing.T) {
		cp := startFakeControlPlane(t, "right", httpDate, nil)
		o := cpOptions(t, cp.url, "tok-not-this-one", now)
		o.TokenFile = "/etc/agent/token"
		checks := Run(context.Background(), o)
		wantCheck(t, checkNamed(t, checks, CheckControlPlane), CheckPass, "200", "")
		wantCheck(t, checkNamed(t, checks, CheckAuth), CheckFail, "refused the token from /etc/agent/token (401 Unauthorized)", "give --token-file the file of the control plane's registration secret")
		for _, c := range checks {
			if strings.Contains(c.Detail+c.Fix, "tok-not-this-one") {
				t.Errorf("the token shows in %+v", c)
			}
		}
	})
	t.Run("healthz fails", func(t *testing.T) {
		cp := startFakeControlPlane(t, "tok", httpDate, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
		checks := Run(context.Background(), cpOptions(t, cp.url, "tok", now))
		wantCheck(t, checkNamed(t, checks, CheckControlPlane), CheckFail, "answered 502 Bad Gateway", "is that the control plane?")
	})
	t.Run("redirect", func(t *testing.T) {
		cp := startFakeControlPlane(t, "tok", httpDate, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example/healthz", http.StatusMovedPermanently)
		})
		checks := Run(context.Background(), cpOptions(t, cp.url, "tok", now))
		wantCheck(t, checkNamed(t, checks, CheckControlPlane), CheckFail, "a redirect to https://elsewhere.example/healthz", "the final URL")
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		defer srv.Close()
		checks := Run(context.Background(), cpOptions(t, srv.URL, "tok", now))
		wantCheck(t, checkNamed(t, checks, CheckControlPlane), CheckFail, "certificate", "add its CA to the system's trust store")
	})
	t.Run("no Date header", func(t *testing.T) {
		cp := startFakeControlPlane(t, "tok", func() string { return "" }, nil)
		checks := Run(context.Background(), cpOptions(t, cp.url, "tok", now))
		wantCheck(t, checkNamed(t, checks, CheckClock), CheckWarn, "no Date header", "NTP")
	})
	t.Run("down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + ln.Addr().String()
		ln.Close()
		checks := Run(context.Background(), cpOptions(t, url, "tok", now))
		wantCheck(t, checkNamed(t, checks, CheckControlPlane), CheckFail, "cannot reach "+url, "start the control plane")
		wantCheck(t, checkNamed(t, checks, CheckAuth), CheckSkip, "unreachable", "")
		wantCheck(t, checkNamed(t, checks, CheckClock), CheckSkip, "unreachable", "")
	})
	for _, tc := range []struct{ name, url, detail string }{
		{"no URL", "", "no control plane URL"},
		{"http beyond loopback", "http://cp.example.com", "is not https"},
		{"password in URL", "https://me:s3cret@cp.example.com", "holds a user or password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := Run(context.Background(), cpOptions(t, tc.url, "tok", now))
			c := checkNamed(t, checks, CheckControlPlane)
			wantCheck(t, c, CheckFail, tc.detail, "--control-plane")
			if strings.Contains(c.Detail, "s3cret") {
				t.Errorf("the password shows: %q", c.Detail)
			}
			wantCheck(t, checkNamed(t, checks, CheckAuth), CheckSkip, "", "")
		})
	}
	t.Run("no token", func(t *testing.T) {
		cp := startFakeControlPlane(t, "tok", httpDate, nil)
		o := cpOptions(t, cp.url, "", now)
		o.TokenErr = errors.New("no control plane token: give --token-file FILE or set AGENT_TOKEN")
		checks := Run(context.Background(), o)
		wantCheck(t, checkNamed(t, checks, CheckToken), CheckFail, "no control plane token", "AGENT_TOKEN")
		wantCheck(t, checkNamed(t, checks, CheckAuth), CheckSkip, "no token", "")
	})
}

func TestDoctorToken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   os.FileMode // 0: from the environment
		want   CheckResult
		detail string
	}{
		{"file 0600", 0o600, CheckPass, "mode 0600"},
		{"file 0400", 0o400, CheckPass, "mode 0400"},
		{"file 0640", 0o640, CheckFail, "open to its group (mode 0640): agent run refuses it"},
		{"file 0644", 0o644, CheckFail, "readable by every user (mode 0644)"},
		{"file 0606", 0o606, CheckFail, "mode 0606"},
		{"environment", 0, CheckPass, "from AGENT_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Token: "tok-secret"}
			if tc.mode != 0 {
				o.TokenFile = filepath.Join(t.TempDir(), "token")
				if err := os.WriteFile(o.TokenFile, []byte("tok-secret\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(o.TokenFile, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			c := checkToken(o)
			fix := ""
			if tc.want != CheckPass {
				fix = "chmod 600 " + o.TokenFile
			}
			wantCheck(t, c, tc.want, tc.detail, fix)
			if strings.Contains(c.Detail+c.Fix, "tok-secret") {
				t.Errorf("the token shows: %+v", c)
			}
		})
	}
}

// fakeCLI writes an executable shell script named name that runs body.
func fakeCLI(t *testing.T, name, body string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDoctorExecutor(t *testing.T) {
	// The CLI gets the executor's environment: never the agent's token.
	t.Setenv("AGENT_TOKEN", "tok-secret")
	const noToken = `[ -z "$AGENT_TOKEN" ] || { echo "the token leaked"; exit 9; }; `
	codexCLI, claudeCLI := cli.Tested["codex"], cli.Tested["claude"]
	for _, tc := range []struct {
		name, kind, body string
		mode             os.FileMode
		timeout          time.Duration
		want             CheckResult
		detail, fix      string
	}{
		{"codex tested", "codex", noToken + `echo "codex-cli ` + codexCLI.Version + `"`, 0o700, 0, CheckPass, "codex " + codexCLI.Version + " (", ""},
		{"claude tested", "claude", noToken + `echo "` + claudeCLI.Version + ` (Claude Code)"`, 0o700, 0, CheckPass, "claude " + claudeCLI.Version, ""},
		{"codex other", "codex", noToken + `echo "codex-cli 0.1.0"`, 0o700, 0, CheckWarn, "codex 0.1.0", "npm install -g @openai/codex@" + codexCLI.Version},
		{"version fails", "codex", `echo "boom" >&2; exit 3`, 0o700, 0, CheckWarn, "exit status 3: boom", "--version by hand"},
		{"no version number", "claude", `echo "hello"`, 0o700, 0, CheckWarn, `no version number: "hello"`, "--version by hand"},
		{"hangs", "codex", `exec sleep 1000`, 0o700, 50 * time.Millisecond, CheckWarn, "no answer", "--version by hand"},
		{"not executable", "codex", `echo "codex-cli 0.1.0"`, 0o600, 0, CheckFail, "not executable", "chmod +x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := fakeCLI(t, tc.kind, tc.body, tc.mode)
			o := Options{ExecutorKind: tc.kind, Timeout: tc.timeout}
			if tc.kind == "codex" {
				o.Executor, o.ExecutorErr = codex.New(codex.Config{Base: cli.Base{Bin: bin}})
			} else {
				o.Executor, o.ExecutorErr = claude.New(claude.Config{Base: cli.Base{Bin: bin}})
			}
			if o.Timeout == 0 {
				o.Timeout = patient
			}
			c := checkExecutor(context.Background(), o)
			wantCheck(t, c, tc.want, tc.detail, tc.fix)
			if strings.Contains(c.Detail, "leaked") {
				t.Errorf("the CLI got the agent's token: %+v", c)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		exe, err := codex.New(codex.Config{Base: cli.Base{Bin: "/nonexistent/codex"}})
		if err != nil {
			t.Fatal(err)
		}
		c := checkExecutor(context.Background(), Options{ExecutorKind: "codex", Executor: exe, Timeout: patient})
		wantCheck(t, c, CheckFail, "executor not found: /nonexistent/codex", "npm install -g @openai/codex@"+codexCLI.Version+", or give --executor-bin")
	})
	t.Run("exec", func(t *testing.T) {
		exe, err := exec.New(exec.Config{Argv: []string{"sh", "-c", "true"}})
		if err != nil {
			t.Fatal(err)
		}
		c := checkExecutor(context.Background(), Options{ExecutorKind: "exec", Executor: exe, Timeout: patient})
		wantCheck(t, c, CheckPass, "exec: exec (/", "")
	})
	t.Run("not built", func(t *testing.T) {
		c := checkExecutor(context.Background(), Options{ExecutorKind: "exec", ExecutorErr: errors.New("--executor exec needs --executor-command")})
		wantCheck(t, c, CheckFail, "needs --executor-command", "--executor-command")
	})
}

// The versions doctor compares with are the ones the tests install, and
// they install from a lock: scripts/tools/package.json pins each CLI
// exactly, package-lock.json holds every package (the linux-x64 platform
// packages, which carry the binaries, too) with a sha512 integrity and no
// download address, and scripts/tools.sh installs it with npm ci
// --ignore-scripts, never npm install.
func TestToolsLockPinsTestedCLIs(t *testing.T) {
	dir := filepath.Join("..", "scripts", "tools")
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var lock struct {
		LockfileVersion int `json:"lockfileVersion"`
		Packages        map[string]struct {
			Name, Version, Integrity, Resolved string
			Optional                           bool
		} `json:"packages"`
	}
	for file, v := range map[string]any{"package.json": &pkg, "package-lock.json": &lock} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if lock.LockfileVersion < 2 || len(lock.Packages) < 2 {
		t.Fatalf("package-lock.json: lockfileVersion %d with %d packages: not a lock npm ci can install", lock.LockfileVersion, len(lock.Packages))
	}
	// What the tests install of each tested CLI: its package, or (OpenCode,
	// whose other platforms' packages the registry does not all hold) the
	// package of its Linux x64 binary; and the optional package that
	// carries the binary, for those that have one. The ACP agents
	// (acp.Tested) are pinned beside them.
	tested := map[string]cli.TestedCLI{}
	for kind, tc := range cli.Tested {
		tested[kind] = tc
	}
	for name, tc := range acp.Tested {
		tested[name] = tc
	}
	installs := map[string]string{"opencode": "opencode-linux-x64"}
	platform := map[string]string{"codex": "@openai/codex-linux-x64", "claude": "@anthropic-ai/claude-code-linux-x64",
		"codex-acp": "@zed-industries/codex-acp-linux-x64"}
	if len(pkg.Dependencies) != len(tested) {
		t.Errorf("package.json installs %v, want exactly %v", pkg.Dependencies, tested)
	}
	for kind, tc := range tested {
		name := tc.Package
		if n, ok := installs[kind]; ok {
			name = n
		}
		if got := pkg.Dependencies[name]; got != tc.Version {
			t.Errorf("package.json pins %s at %q, want exactly %s (%s)", name, got, tc.Version, kind)
		}
		if got := lock.Packages["node_modules/"+name].Version; got != tc.Version {
			t.Errorf("package-lock.json has %s %q, want %s", name, got, tc.Version)
		}
		if platform[kind] == "" {
			continue
		}
		if p, ok := lock.Packages["node_modules/"+platform[kind]]; !ok || !p.Optional || !strings.HasPrefix(p.Version, tc.Version) {
			t.Errorf("package-lock.json lacks %s's optional linux-x64 package %s (got %+v)", name, platform[kind], p)
		}
	}
	sha512 := regexp.MustCompile(`^sha512-[A-Za-z0-9+/]{86}==$`)
	for path, p := range lock.Packages {
		if path == "" {
			continue // the project itself
		}
		if !sha512.MatchString(p.Integrity) {
			t.Errorf("package-lock.json: %s has integrity %q, want a sha512", path, p.Integrity)
		}
		if p.Resolved != "" {
			t.Errorf("package-lock.json: %s names where it was downloaded (%q): npm ci needs only name, version and integrity", path, p.Resolved)
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "scripts", "tools.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	if !regexp.MustCompile(`(?m)^[^#\n]*\bnpm ci --ignore-scripts\b`).MatchString(script) {
		t.Error("scripts/tools.sh does not install with npm ci --ignore-scripts")
	}
	if m := regexp.MustCompile(`(?m)^[^#\n]*\bnpm (install|i|add)\b.*`).FindString(script); m != "" {
		t.Errorf("scripts/tools.sh runs npm install, which may resolve other versions and runs install scripts: %s", m)
	}
}

func TestDoctorDataDir(t *testing.T) {
	checksFor := func(t *testing.T, dir string) []Check {
		return checkDataDir(Options{DataDir: dir, Now: time.Now})
	}
	t.Run("missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b")
		checks := checksFor(t, dir)
		wantCheck(t, checkNamed(t, checks, CheckDataDir), CheckPass, "does not exist yet", "")
		wantCheck(t, checkNamed(t, checks, CheckLock), CheckPass, "free", "")
		wantCheck(t, checkNamed(t, checks, CheckOutbox), CheckPass, "none yet", "")
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("doctor made the data directory: %v", err)
		}
	})
	t.Run("private", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		checks := checksFor(t, dir)
		wantCheck(t, checkNamed(t, checks, CheckDataDir), CheckPass, "mode 0700, yours", "")
		wantCheck(t, checkNamed(t, checks, CheckDisk), CheckPass, "free of", "")
	})
	for _, mode := range []os.FileMode{0o755, 0o750, 0o777} {
		t.Run(strconv.FormatUint(uint64(mode), 8), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			wantCheck(t, checkNamed(t, checksFor(t, dir), CheckDataDir), CheckFail, "mode 0"+strconv.FormatUint(uint64(mode), 8), "chmod 700 "+dir)
		})
	}
	t.Run("a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "data")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		checks := checksFor(t, path)
		wantCheck(t, checkNamed(t, checks, CheckDataDir), CheckFail, "is not a directory", "give --data-dir a directory")
		wantCheck(t, checkNamed(t, checks, CheckLock), CheckSkip, "not a directory", "")
	})
	t.Run("parent not writable", func(t *testing.T) {
		if os.Getuid() == 0 {
			t.Skip("root may write anywhere")
		}
		parent := t.TempDir()
		if err := os.Chmod(parent, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(parent, 0o700) })
		wantCheck(t, checkNamed(t, checksFor(t, filepath.Join(parent, "data")), CheckDataDir), CheckFail, "is not writable to make it", "mkdir -m 700")
	})
}

// An agent holding the lock is a pass that names it; what its outbox holds
// is read without the lock.
func TestDoctorLockAndOutbox(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l := datadir.Layout{Dir: dir}
	o, err := outbox.Open(l.Outbox(), outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := l.WritePID(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := o.Append(outbox.Record{Kind: outbox.KindProgress, TaskID: "t-1", Attempt: 1, Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	checks := checkDataDir(Options{DataDir: dir, Now: time.Now})
	wantCheck(t, checkNamed(t, checks, CheckLock), CheckPass, "agent running, pid "+strconv.Itoa(os.Getpid()), "")
	wantCheck(t, checkNamed(t, checks, CheckOutbox), CheckPass, "3 pending", "")
	// The lock is still the agent's.
	if err := o.CheckLock(); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Open(l.Outbox(), outbox.Options{}); !errors.Is(err, outbox.ErrLocked) {
		t.Fatalf("a second writer got in after doctor: %v", err)
	}

	if err := o.MarkDead("refused", 1); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * OutboxStaleAge)
	c := checkOutbox(dir, true, later)
	wantCheck(t, c, CheckWarn, "1 dead records", "agent outbox ls --dead")
	wantCheck(t, c, CheckWarn, "pending for more than", "see the control-plane and auth checks")

	// Stopped by a crash, with a torn tail, the zeroed stretch after it
	// (not torn: Open cuts it quietly), and lines an earlier start set
	// aside.
	o.Close()
	f, err := os.OpenFile(filepath.Join(l.Outbox(), outbox.FileName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":9,"kin`)
	f.Write(make([]byte, 1<<20))
	f.Close()
	if err := os.WriteFile(filepath.Join(l.Outbox(), outbox.QuarantineName), []byte("{}\n{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.RemovePID()
	checks = checkDataDir(Options{DataDir: dir, Now: time.Now})
	wantCheck(t, checkNamed(t, checks, CheckLock), CheckPass, "free: no agent running", "")
	c = checkNamed(t, checks, CheckOutbox)
	wantCheck(t, c, CheckWarn, "13 torn bytes", "it cuts the torn tail")
	wantCheck(t, c, CheckWarn, "2 quarantined lines", "then remove it")
}

func TestFailed(t *testing.T) {
	if Failed([]Check{{Result: CheckPass}, {Result: CheckWarn}, {Result: CheckSkip}}) {
		t.Error("warnings and skips count as a failure")
	}
	if !Failed([]Check{{Result: CheckPass}, {Result: CheckFail}}) {
		t.Error("a failure is not one")
	}
}

func TestDoctorConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.toml")
	if err := os.WriteFile(file, []byte("max-concurent = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "none.toml")
	for _, tc := range []struct {
		name        string
		file        string
		err         error
		want        CheckResult
		detail, fix string
	}{
		{"no file", "", nil, CheckPass, "no config file", ""},
		{"file read", file, nil, CheckPass, file + " read", ""},
		{"bad key", file, errors.New("config " + file + `:1: unknown key "max-concurent"`), CheckFail, file + ":1", "edit " + file + " at the line named"},
		{"missing file", missing, errors.New("config file: open " + missing + ": no such file or directory"), CheckFail, missing, "give --config"},
		{"bad variable", "", errors.New("AGENT_MAX_CONCURRENT: 0: want at least 1"), CheckFail, "AGENT_MAX_CONCURRENT", "correct the setting named"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCheck(t, checkConfig(Options{ConfigFile: tc.file, ConfigErr: tc.err}), tc.want, tc.detail, tc.fix)
		})
	}
}

// The workspaces check: a repository that is not one fails, naming it;
// workspaces that hold work warn; otherwise it says what they take.
func TestCheckWorkspaces(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	repo := filepath.Join(gittest.OutOfReach(t), "app")
	for _, args := range [][]string{{"init", "-q", "-b", "main", repo}, {"-C", repo, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := osexec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	notRepo := t.TempDir()
	wantCheck(t, checkWorkspaces(ctx, Options{DataDir: dataDir, Repos: []workspace.Repo{{Name: "app", Path: repo}, {Name: "docs", Path: notRepo}}}),
		CheckFail, `repository "docs": `+notRepo+" is not a git repository", "[[repo]]")
	wantCheck(t, checkWorkspaces(ctx, Options{DataDir: dataDir}), CheckPass, "no repository served ([[repo]] in the config); no workspaces in "+filepath.Join(dataDir, "work"), "")

	o := Options{DataDir: dataDir, Repos: []workspace.Repo{{Name: "app", Path: repo}}}
	m, err := workspace.New(filepath.Join(dataDir, "work"), o.Repos)
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Prepare(ctx, "t1", "app", "")
	if err != nil {
		t.Fatal(err)
	}
	wantCheck(t, checkWorkspaces(ctx, o), CheckPass, "serves app; 1 workspace taking ", "")
	if err := os.WriteFile(filepath.Join(w.Dir, "wip"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantCheck(t, checkWorkspaces(ctx, o), CheckWarn, "1 kept, holding work", "agent workspaces ls")

	// A repository every confined task may write (in /tmp) is refused, as
	// agent run refuses it.
	if landlock.ABI() == 0 {
		t.Fatal("no Landlock on this kernel: these machines have it; the refusal cannot be checked without")
	}
	inTmp := filepath.Join(t.TempDir(), "app")
	if out, err := osexec.Command("git", "init", "-q", inTmp).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	wantCheck(t, checkWorkspaces(ctx, Options{DataDir: dataDir, Repos: []workspace.Repo{{Name: "tmp", Path: inTmp}}}),
		CheckFail, `repository "tmp": `+inTmp+" is in /tmp, which every confined task may write", "not in /tmp")
}
