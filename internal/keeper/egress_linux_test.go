package keeper

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/egress"
	"github.com/edgeagent/agent/internal/landlock"
)

// netClientEnv makes the test binary a network client (netClient) instead
// of running tests: what an attempt's executor runs in these tests.
const netClientEnv = "KEEPER_TEST_NET_CLIENT"

// netClient tries each of its arguments and prints one line for each:
//
//	get URL            an HTTP GET, through $HTTP_PROXY unless the host is loopback
//	connect HOST:PORT  a CONNECT through $HTTPS_PROXY
//	status             what the process holds: CapEff, and the proxy it was given
func netClient(args []string) int {
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	for i := 0; i+1 < len(args); i += 2 {
		what, arg := args[i], args[i+1]
		switch what {
		case "get":
			resp, err := client.Get(arg)
			if err != nil {
				fmt.Printf("get %s: error %v\n", arg, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("get %s: %d %s\n", arg, resp.StatusCode, strings.TrimSpace(string(b)))
		case "connect":
			u, _ := url.Parse(os.Getenv("HTTPS_PROXY"))
			c, err := net.DialTimeout("tcp", u.Host, 20*time.Second)
			if err != nil {
				fmt.Printf("connect %s: error %v\n", arg, err)
				continue
			}
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", arg, arg)
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if err != nil {
				fmt.Printf("connect %s: error %v\n", arg, err)
			} else {
				fmt.Printf("connect %s: %d\n", arg, resp.StatusCode)
			}
			c.Close()
		case "status":
			b, _ := os.ReadFile("/proc/self/status")
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "CapEff:") {
					fmt.Printf("status: CapEff %s uid %d proxy %s\n", strings.TrimSpace(strings.TrimPrefix(l, "CapEff:")), os.Getuid(), os.Getenv("HTTPS_PROXY"))
				}
			}
		case "read":
			b, err := os.ReadFile(arg)
			if err != nil {
				fmt.Printf("read %s: error %v\n", arg, err)
			} else {
				fmt.Printf("read %s: %q\n", arg, b)
			}
		}
	}
	return 0
}

// hello serves "hello PATH" on loopback; it returns its port.
func hello(t *testing.T) int {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.URL.Path) }))
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	port, _ := strconv.Atoi(u.Port())
	return port
}

// runClient runs the network client under a keeper with sb and returns
// its status and output.
func runClient(t *testing.T, sb Sandbox, args ...string) (Status, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if sb.User != nil {
		self = publicCopy(t)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", netClientEnv + "=1"}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := Start(cmd, sb, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Keeper.Wait()
	return p.Status(), out.String()
}

func mustRules(t *testing.T, list ...string) *egress.Policy {
	t.Helper()
	rules, err := egress.ParseRules(list)
	if err != nil {
		t.Fatal(err)
	}
	return &egress.Policy{Allow: rules}
}

// An attempt whose network is confined reaches the loopback endpoint its
// allow list names, directly as a CLI with a loopback base URL does; not
// another listener on loopback, directly or through its proxy; not a host
// off its list. What the proxy refused is counted and named. It holds no
// capability.
func TestAnAttemptReachesOnlyItsAllowList(t *testing.T) {
	if err := ProbeEgress(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	allowed, other := hello(t), hello(t)
	a, o := strconv.Itoa(allowed), strconv.Itoa(other)
	st, out := runClient(t, Sandbox{Egress: mustRules(t, "127.0.0.1:"+a, "models.example")},
		"status", "",
		"get", "http://127.0.0.1:"+a+"/direct",
		"get", "http://localhost:"+a+"/by-name",
		"get", "http://127.0.0.1:"+o+"/other",
		"connect", "127.0.0.1:"+o,
		"connect", "evil.example:443",
		"get", "http://evil.example/exfiltrate",
		"connect", "models.example:22")
	if st.ExitCode != 0 {
		t.Fatalf("status %+v; output:\n%s", st, out)
	}
	for _, want := range []string{
		"get http://127.0.0.1:" + a + "/direct: 200 hello /direct",
		"get http://localhost:" + a + "/by-name: 200 hello /by-name",
		"get http://127.0.0.1:" + o + "/other: error",
		"connect 127.0.0.1:" + o + ": 403",
		"connect evil.example:443: 403",
		"get http://evil.example/exfiltrate: 403",
		"connect models.example:22: 403",
		"status: CapEff 0000000000000000",
		"proxy http://127.0.0.1:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if st.Egress == nil || st.Egress.Count != 4 || !slices.Contains(st.Egress.Last, "evil.example:443") || !slices.Contains(st.Egress.Last, "evil.example:80") {
		t.Errorf("the keeper reported %+v refused, want 4, naming evil.example:443 and :80", st.Egress)
	}
}

// Without a network of its own, an attempt reaches loopback as before, and
// nothing is counted.
func TestAnAttemptWithoutEgressHasTheHostsNetwork(t *testing.T) {
	port := strconv.Itoa(hello(t))
	st, out := runClient(t, Sandbox{}, "get", "http://127.0.0.1:"+port+"/x")
	if !strings.Contains(out, ": 200 hello /x") || st.Egress != nil {
		t.Errorf("status %+v, output %s", st, out)
	}
}

// A stage hands the executor nothing of its own: no socket of the keeper's
// or the stage's, no listener of the proxy's.
func TestAStagedExecutorHoldsNoSocket(t *testing.T) {
	if err := ProbeEgress(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	st, out := runShell(t, Sandbox{Egress: mustRules(t, "127.0.0.1:9")}, `ls -l /proc/self/fd/ | grep -c socket || true`)
	if st.ExitCode != 0 || strings.TrimSpace(out) != "0" {
		t.Errorf("the executor holds %s socket(s) (status %+v)", strings.TrimSpace(out), st)
	}
}

// Start errors through a stage keep their reason as they do without one.
func TestStagedStartErrorsKeepTheirReason(t *testing.T) {
	if err := ProbeEgress(); err != nil {
		t.Skipf("no network namespaces here: %v", err)
	}
	cmd := exec.Command(filepath.Join(t.TempDir(), "missing"))
	_, err := Start(cmd, Sandbox{Egress: &egress.Policy{}}, time.Second, nil)
	var se *StartError
	if !errors.As(err, &se) || se.Errno != syscall.ENOENT || !strings.Contains(err.Error(), "missing") {
		t.Errorf("start: %v, want a StartError of ENOENT naming the binary", err)
	}
}

func runShell(t *testing.T, sb Sandbox, script string) (Status, string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := Start(cmd, sb, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Keeper.Wait()
	return p.Status(), out.String()
}

// taskUser makes an unprivileged user for the test (the tests run as
// root) and removes it after.
func taskUser(t *testing.T) *User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a task user takes root")
	}
	name := fmt.Sprintf("kt%d", os.Getpid()%100000)
	_ = exec.Command("userdel", name).Run() // left by a run that was killed
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &User{Uid: uint32(uid), Gid: uint32(gid)}
}

// An attempt of a root keeper cannot read the environment of the process
// that started it (the agent), of a sibling attempt, or of the sibling's
// keeper (which holds the sibling's environment): run as a task user, and
// run as root with every capability dropped, as a root agent's attempts
// run without one. It holds no capability either way.
func TestARootKeepersAttemptReadsNoOtherEnvironment(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("this is about a keeper running as root")
	}
	if landlock.ABI() == 0 {
		t.Skip("the kernel has no Landlock")
	}
	u := taskUser(t)
	for _, c := range []struct {
		name string
		user *User
		uid  int
	}{{"task user", u, int(u.Uid)}, {"root without capabilities", nil, 0}} {
		t.Run(c.name, func(t *testing.T) {
			shared, err := os.MkdirTemp("", "keeper-siblings-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(shared)
			if err := os.Chmod(shared, 0o777); err != nil {
				t.Fatal(err)
			}
			policy := &landlock.Policy{Read: []string{"/"}, Write: []string{shared, "/dev"}, ListAll: true}
			sibling := exec.Command("/bin/sh", "-c", `echo $$ > `+shared+`/sibling; exec sleep 60`)
			sibling.Env = []string{"PATH=/usr/bin:/bin", "AGENT_TASK_TOKEN=sibling-secret"}
			sp, err := Start(sibling, Sandbox{Files: policy, User: c.user}, time.Second, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				sp.Signal(syscall.SIGKILL, true)
				_ = sp.Keeper.Wait()
				sp.Status()
			}()
			waitFile(t, filepath.Join(shared, "sibling"))
			siblingPid := readPid(t, filepath.Join(shared, "sibling"))
			st, out := runClient(t, Sandbox{Files: policy, User: c.user}, "status", "",
				"read", "/proc/"+strconv.Itoa(os.Getpid())+"/environ",
				"read", "/proc/"+strconv.Itoa(siblingPid)+"/environ",
				"read", "/proc/"+strconv.Itoa(sp.Keeper.Process.Pid)+"/environ")
			if st.ExitCode != 0 {
				t.Fatalf("status %+v; output:\n%s", st, out)
			}
			if !strings.Contains(out, fmt.Sprintf("status: CapEff 0000000000000000 uid %d ", c.uid)) {
				t.Errorf("the attempt holds capabilities or runs as another uid than %d:\n%s", c.uid, out)
			}
			if strings.Contains(out, "sibling-secret") || strings.Count(out, "permission denied") != 3 {
				t.Errorf("the attempt read an environment not its own:\n%s", out)
			}
		})
	}
}

// An agent that is not root confines its attempts' network the same way,
// through a user namespace of their own: the test above, run as a user
// that is not root.
func TestAKeeperThatIsNotRootConfinesTheNetworkToo(t *testing.T) {
	u := taskUser(t)
	bin := publicCopy(t)
	dir := filepath.Dir(bin)
	cmd := exec.Command(bin, "-test.run", "^TestAnAttemptReachesOnlyItsAllowList$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.Uid, Gid: u.Gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestAnAttemptReachesOnlyItsAllowList") {
		t.Fatalf("as uid %d: %v\n%s", u.Uid, err, out)
	}
}

// publicCopy copies the test binary where any user may run it (go test
// builds it in a directory of root's alone), for the test's life.
func publicCopy(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "keeper-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "keeper.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
