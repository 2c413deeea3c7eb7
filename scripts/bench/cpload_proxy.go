package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// With -cp-replicas N > 1 the agents see one address: a round-robin
// reverse proxy on loopback, each request to the next replica. It runs as
// a child process of the harness (this binary again, told by proxyEnv),
// pinned with the load: its CPU is the load generator's side, measured
// apart. A process of its own so that its connections do not share the
// harness's file limit with the simulated agents'.

const proxyEnv = "BENCH_CPLOAD_PROXY" // the replicas' URLs, comma-separated

// proxyMain runs the proxy when the environment asks for it, and reports
// whether it did (it returns when the process is told to stop).
func proxyMain() bool {
	list := os.Getenv(proxyEnv)
	if list == "" {
		return false
	}
	var targets []*url.URL
	for s := range strings.SplitSeq(list, ",") {
		u, err := url.Parse(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench proxy:", err)
			os.Exit(1)
		}
		targets = append(targets, u)
	}
	raiseNoFile()
	var next atomic.Uint64
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 2048,
		// With the load's 8,000 in, within the 20,000 files a process
		// may hold here.
		MaxConnsPerHost:    10000 / len(targets),
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(targets[(next.Add(1)-1)%uint64(len(targets))])
			r.Out.Host = r.In.Host
		},
		Transport: tr,
		// A request the harness cut at the window's end is not an error
		// to tell; others are 502s, which the load counts.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				fmt.Fprintln(os.Stderr, "bench proxy:", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench proxy:", err)
		os.Exit(1)
	}
	fmt.Printf("proxy listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	srv.Serve(ln)
	return true
}

// cpProxy is the proxy's process.
type cpProxy struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
}

// startProxy starts the proxy in front of backends, pinned to cpu (-1:
// not pinned).
func startProxy(backends []string, cpu int) (*cpProxy, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), proxyEnv+"="+strings.Join(backends, ","))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := startPinned(cmd, cpu); err != nil {
		return nil, err
	}
	p := &cpProxy{cmd: cmd, exited: make(chan struct{})}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("the proxy did not say where it listens")
	}
	const prefix = "proxy listening on "
	p.url = strings.TrimPrefix(sc.Text(), prefix)
	go func() { cmd.Wait(); close(p.exited) }()
	return p, nil
}

func (p *cpProxy) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// raiseNoFile raises this process's open files limit as far as it may
// (root: past the hard limit), for the processes it starts too: with
// 10,000 agents, each with a heartbeat and a claim or events batch in
// flight, the load, the proxy and a control plane each hold up to 20,000
// connections, the limit this machine gives.
func raiseNoFile() {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return
	}
	for _, n := range []uint64{1 << 20, 1 << 18, lim.Max} {
		if n >= lim.Cur && unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: max(n, lim.Max)}) == nil {
			return
		}
	}
}
