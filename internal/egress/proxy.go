package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// LastDenied is how many of the latest refused destinations a Proxy
// names (Denied.Last).
const LastDenied = 5

// Denied is what a Proxy refused: how many connections, and the latest
// distinct destinations, host:port, newest last.
type Denied struct {
	Count int      `json:"count"`
	Last  []string `json:"last,omitempty"`
}

// Proxy carries an attempt's connections to where its policy allows, and
// refuses the rest. Serve it on listeners made inside the attempt's
// network namespace; it dials from wherever it runs.
type Proxy struct {
	policy Policy
	dialer net.Dialer

	mu        sync.Mutex
	denied    Denied
	closed    bool
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
	server    *http.Server
	transport *http.Transport
}

// NewProxy returns a proxy enforcing p.
func NewProxy(p Policy) *Proxy {
	x := &Proxy{policy: p, conns: map[net.Conn]struct{}{}}
	x.dialer = net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	x.transport = &http.Transport{Proxy: nil, DialContext: x.dialContext, ForceAttemptHTTP2: false,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: 0}
	x.server = &http.Server{Handler: x, ReadHeaderTimeout: 30 * time.Second,
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				x.track(c, true)
			case http.StateHijacked, http.StateClosed:
				x.track(c, false)
			}
		}}
	return x
}

// Denied says what the proxy refused so far.
func (x *Proxy) Denied() Denied {
	x.mu.Lock()
	defer x.mu.Unlock()
	return Denied{Count: x.denied.Count, Last: append([]string(nil), x.denied.Last...)}
}

func (x *Proxy) deny(target string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.denied.Count++
	last := x.denied.Last[:0:0]
	for _, t := range x.denied.Last {
		if t != target {
			last = append(last, t)
		}
	}
	last = append(last, target)
	if len(last) > LastDenied {
		last = last[len(last)-LastDenied:]
	}
	x.denied.Last = last
}

// track adds or removes a connection to close when the proxy closes; one
// added once it has closed is closed at once.
func (x *Proxy) track(c net.Conn, add bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case add && x.closed:
		c.Close()
	case add:
		x.conns[c] = struct{}{}
	default:
		delete(x.conns, c)
	}
}

// enter counts a goroutine that Close waits for; false once the proxy is
// closed.
func (x *Proxy) enter() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return false
	}
	x.wg.Add(1)
	return true
}

// ServeProxy serves the HTTP proxy on l until the proxy closes.
func (x *Proxy) ServeProxy(l net.Listener) {
	if !x.add(l) {
		return
	}
	go func() {
		defer x.wg.Done()
		_ = x.server.Serve(l)
	}()
}

// ServeForward forwards every connection accepted on l to to, as it is,
// until the proxy closes.
func (x *Proxy) ServeForward(l net.Listener, to string) {
	if !x.add(l) {
		return
	}
	go func() {
		defer x.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if !x.enter() {
				c.Close()
				return
			}
			go func() {
				defer x.wg.Done()
				x.track(c, true)
				defer x.track(c, false)
				defer c.Close()
				up, err := x.dialer.Dial("tcp", to)
				if err != nil {
					return
				}
				x.splice(c, up, nil)
			}()
		}
	}()
}

// add registers a listener, false when the proxy is closed already.
func (x *Proxy) add(l net.Listener) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		l.Close()
		return false
	}
	x.listeners = append(x.listeners, l)
	x.wg.Add(1)
	return true
}

// Close stops the listeners, ends every connection and waits for them.
func (x *Proxy) Close() {
	x.mu.Lock()
	x.closed = true
	ls := x.listeners
	conns := make([]net.Conn, 0, len(x.conns))
	for c := range x.conns {
		conns = append(conns, c)
	}
	x.mu.Unlock()
	_ = x.server.Close()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	x.wg.Wait()
	x.transport.CloseIdleConnections()
}

// ServeHTTP implements http.Handler: CONNECT tunnels, and plain HTTP
// requests in absolute form.
func (x *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !x.enter() {
		http.Error(w, "agent egress: the attempt is over", http.StatusServiceUnavailable)
		return
	}
	defer x.wg.Done()
	if r.Method == http.MethodConnect {
		x.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "the agent's egress proxy takes CONNECT host:port, or a request for an http:// URL", http.StatusBadRequest)
		return
	}
	host, port, ok := hostPort(r.URL.Host, 80)
	if !ok {
		http.Error(w, "egress: no host in "+r.URL.Host, http.StatusBadRequest)
		return
	}
	if !x.allowed(w, host, port) {
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.Host
			pr.Out.RequestURI = ""
			pr.Out.Header.Del("Proxy-Authorization")
		},
		Transport:     x.transport,
		FlushInterval: -1, // streamed answers (SSE) go through as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			x.failed(w, net.JoinHostPort(host, strconv.Itoa(port)), err)
		},
	}
	rp.ServeHTTP(w, r)
}

// connect serves a CONNECT tunnel.
func (x *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, port, ok := hostPort(r.Host, 0)
	if !ok || port == 0 {
		http.Error(w, "egress: CONNECT wants host:port, not "+r.Host, http.StatusBadRequest)
		return
	}
	if !x.allowed(w, host, port) {
		return
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	up, err := x.dialContext(r.Context(), "tcp", target)
	if err != nil {
		x.failed(w, target, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	x.track(c, true)
	defer x.track(c, false)
	defer c.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		up.Close()
		return
	}
	x.splice(c, up, buf.Reader)
}

// allowed answers 403 and counts the refusal when host:port is not
// allowed.
func (x *Proxy) allowed(w http.ResponseWriter, host string, port int) bool {
	if x.policy.Allows(host, port) {
		return true
	}
	target := net.JoinHostPort(canonicalHost(host), strconv.Itoa(port))
	x.deny(target)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "agent egress: %s is not on this task's allow list (agent run --egress-allow)\n", target)
	return false
}

// failed answers a dial or upstream error; an address the policy refuses
// once resolved is counted as refused.
func (x *Proxy) failed(w http.ResponseWriter, target string, err error) {
	var refused *refusedAddress
	if errors.As(err, &refused) {
		x.deny(target)
		http.Error(w, "agent egress: "+refused.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "agent egress: "+target+": "+err.Error(), http.StatusBadGateway)
}

// splice copies both ways until either side is done; in is what the
// client sent already, buffered.
func (x *Proxy) splice(c, up net.Conn, in *bufio.Reader) {
	x.track(up, true)
	defer x.track(up, false)
	defer up.Close()
	var from io.Reader = c
	if in != nil && in.Buffered() > 0 {
		from = io.MultiReader(io.LimitReader(in, int64(in.Buffered())), c)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(up, from)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, _ = io.Copy(c, up)
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	<-done
}

// dialContext dials for the attempt; checkAddress vets where the name led.
func (x *Proxy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, ok := hostPort(addr, 0)
	if !ok || !x.policy.Allows(host, port) {
		return nil, &refusedAddress{addr: addr, why: "not on this task's allow list"}
	}
	d := x.dialer
	d.Control = func(_, address string, c syscall.RawConn) error { return x.checkResolved(host, address) }
	return d.DialContext(ctx, network, addr)
}

// checkResolved refuses an address a name resolved to that the name's
// rule did not mean to reach: this machine (loopback, unspecified) or the
// link-local network (a cloud's metadata service), unless a rule names
// that address and port, or the name is loopback's own.
func (x *Proxy) checkResolved(name, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &refusedAddress{addr: address, why: "not an address"}
	}
	ip := ap.Addr().Unmap()
	if !(ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
		return nil
	}
	if isLoopbackHost(canonicalHost(name)) && ip.IsLoopback() {
		return nil
	}
	for _, r := range x.policy.Allow {
		if a, err := netip.ParseAddr(r.Host); err == nil && a == ip && r.allowsPort(int(ap.Port())) {
			return nil
		}
	}
	return &refusedAddress{addr: name + " (" + ip.String() + ")", why: "resolves to an address on this machine or its link, which no rule names"}
}

// refusedAddress is a destination the policy refuses.
type refusedAddress struct{ addr, why string }

func (e *refusedAddress) Error() string { return e.addr + ": " + e.why }

// hostPort splits host:port (port def when it has none); false when there
// is no host or the port is not a number.
func hostPort(s string, def int) (string, int, bool) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		if def == 0 {
			return "", 0, false
		}
		host, p = s, strconv.Itoa(def)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 || host == "" {
		return "", 0, false
	}
	return host, n, true
}
