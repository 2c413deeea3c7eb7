package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRulesParseAndSayWhatIsWrong(t *testing.T) {
	for in, want := range map[string]string{
		"api.openai.com":          "api.openai.com",
		"API.OpenAI.com.":         "api.openai.com",
		"api.openai.com:8443":     "api.openai.com:8443",
		"*.githubusercontent.com": "*.githubusercontent.com",
		"127.0.0.1:8080":          "127.0.0.1:8080",
		"[::1]:8080":              "[::1]:8080",
		"::1":                     "[::1]",
		"10.0.0.7":                "10.0.0.7",
	} {
		r, err := ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                       "empty",
		"https://api.openai.com": "not a URL",
		"api.openai.com:0":       "not 1-65535",
		"api.openai.com:http":    "not 1-65535",
		"bad host":               "not a URL",
		"-x.example":             "not a host name",
		"a..b":                   "not a host name",
	} {
		if _, err := ParseRule(in); err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("ParseRule(%q) = %v, want one line saying %q", in, err, want)
		}
	}
}

func TestRulesAllowOnlyWhatTheyName(t *testing.T) {
	rules, err := ParseRules([]string{"api.openai.com", "*.example.com:8443", "127.0.0.1:4000", "10.1.2.3:22"})
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{Allow: rules}
	for _, c := range []struct {
		host string
		port int
		want bool
	}{
		{"api.openai.com", 443, true},
		{"API.OPENAI.COM.", 80, true},
		{"api.openai.com", 22, false},
		{"evil.openai.com", 443, false},
		{"openai.com", 443, false},
		{"a.b.example.com", 8443, true},
		{"example.com", 8443, false},
		{"a.example.com", 443, false},
		{"127.0.0.1", 4000, true},
		{"localhost", 4000, true},
		{"[::1]", 4000, true},
		{"127.0.0.1", 5432, false},
		{"10.1.2.3", 22, true},
		{"10.1.2.3", 443, false},
	} {
		if got := p.Allows(c.host, c.port); got != c.want {
			t.Errorf("Allows(%s, %d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	if got := p.Forwards(); len(got) != 1 || got[0].String() != "127.0.0.1:4000" {
		t.Errorf("forwards %v, want the loopback port alone", got)
	}
}

// A task's own list keeps what the agent's allows, and nothing more.
func TestATaskNarrowsAndNeverWidens(t *testing.T) {
	agent, _ := ParseRules([]string{"api.openai.com", "*.github.com", "pypi.org:443"})
	task, _ := ParseRules([]string{"api.github.com", "pypi.org", "evil.example", "*.github.com", "*.com"})
	got := Policy{Allow: agent}.Narrow(task).Strings()
	want := []string{"api.github.com", "*.github.com"}
	if !slices.Equal(got, want) {
		t.Errorf("narrowed to %v, want %v (pypi.org alone would add port 80, evil.example and *.com are not the agent's)", got, want)
	}
	if got := (Policy{Allow: agent}).Narrow(nil).Strings(); len(got) != 3 {
		t.Errorf("no list of the task's own: %v, want the agent's", got)
	}
}

func TestEndpointsOfBaseURLs(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.openai.com/v1": "api.openai.com:443",
		"http://127.0.0.1:41234/v1": "127.0.0.1:41234",
		"http://localhost":          "localhost:80",
		"https://[::1]:9000/":       "[::1]:9000",
	} {
		r, ok := Endpoint(in)
		if !ok || r.String() != want {
			t.Errorf("Endpoint(%q) = %v, %v; want %s", in, r, ok, want)
		}
	}
	if _, ok := Endpoint("not a url at all"); ok {
		t.Error("a URL without a host gave an endpoint")
	}
}

// upstream is a loopback HTTP server that answers "hello from PATH".
func upstream(t *testing.T) (*httptest.Server, int) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	port, _ := strconv.Atoi(u.Port())
	return s, port
}

// serve runs a proxy for p on a loopback listener and returns its address.
func serve(t *testing.T, p Policy) (*Proxy, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x := NewProxy(p)
	x.ServeProxy(l)
	t.Cleanup(x.Close)
	return x, l.Addr().String()
}

// connect asks the proxy at proxy for a tunnel to target and, when it is
// granted, sends a GET through it.
func connect(t *testing.T, proxy, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTheProxyTunnelsWhereAllowedAndCountsWhatItRefuses(t *testing.T) {
	_, port := upstream(t)
	_, other := upstream(t)
	rules, _ := ParseRules([]string{"127.0.0.1:" + strconv.Itoa(port)})
	x, addr := serve(t, Policy{Allow: rules})

	if code, body := connect(t, addr, "127.0.0.1:"+strconv.Itoa(port)); code != 200 || body != "hello from /tunnel" {
		t.Fatalf("allowed tunnel: %d %q", code, body)
	}
	for _, target := range []string{"127.0.0.1:" + strconv.Itoa(other), "evil.example:443", "127.0.0.1:" + strconv.Itoa(other)} {
		if code, body := connect(t, addr, target); code != http.StatusForbidden || !strings.Contains(body, target) {
			t.Errorf("tunnel to %s: %d %q, want 403 naming it", target, code, body)
		}
	}
	d := x.Denied()
	if d.Count != 3 || !slices.Equal(d.Last, []string{"evil.example:443", "127.0.0.1:" + strconv.Itoa(other)}) {
		t.Errorf("denied %+v, want 3 and the two destinations, newest last", d)
	}
}

func TestTheProxyForwardsPlainHTTPWhereAllowed(t *testing.T) {
	_, port := upstream(t)
	rules, _ := ParseRules([]string{"localhost:" + strconv.Itoa(port)})
	x, addr := serve(t, Policy{Allow: rules})
	proxyURL, _ := url.Parse("http://" + addr)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	defer client.CloseIdleConnections()

	resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/v1/responses")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello from /v1/responses" {
		t.Fatalf("allowed request: %d %q", resp.StatusCode, b)
	}
	resp, err = client.Get("http://metadata.example/latest")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || x.Denied().Count != 1 {
		t.Errorf("refused request: %d, denied %+v", resp.StatusCode, x.Denied())
	}
}

// A name on the list that resolves to this machine or its link does not
// reach it: only a rule naming loopback (or the address) does.
func TestANameThatResolvesToThisMachineIsRefused(t *testing.T) {
	rules, _ := ParseRules([]string{"models.example", "169.254.169.254:80"})
	x := NewProxy(Policy{Allow: rules})
	defer x.Close()
	for _, addr := range []string{"127.0.0.1:443", "[::1]:443", "0.0.0.0:443", "169.254.169.254:443"} {
		if err := x.checkResolved("models.example", addr); err == nil {
			t.Errorf("models.example resolving to %s was let through", addr)
		}
	}
	if err := x.checkResolved("models.example", "93.184.215.14:443"); err != nil {
		t.Errorf("a public address: %v", err)
	}
	if err := x.checkResolved("169.254.169.254", "169.254.169.254:80"); err != nil {
		t.Errorf("an address a rule names: %v", err)
	}
	if err := x.checkResolved("localhost", "127.0.0.1:8080"); err != nil {
		t.Errorf("localhost to loopback: %v", err)
	}
}

func TestAForwardCarriesConnectionsAsTheyAre(t *testing.T) {
	s, _ := upstream(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x := NewProxy(Policy{})
	defer x.Close()
	x.ServeForward(l, strings.TrimPrefix(s.URL, "http://"))
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + l.Addr().String() + "/direct")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello from /direct" {
		t.Errorf("forwarded: %q", b)
	}
}

// Close ends tunnels still open: nothing of the proxy outlives it.
func TestCloseEndsOpenTunnels(t *testing.T) {
	_, port := upstream(t)
	rules, _ := ParseRules([]string{"127.0.0.1:" + strconv.Itoa(port)})
	x := NewProxy(Policy{Allow: rules})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x.ServeProxy(l)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("tunnel: %v %v", resp, err)
	}
	x.Close() // returns once the open tunnel is gone (goleak checks the rest)
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the tunnel is still open after Close")
	}
}
