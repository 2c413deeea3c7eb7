package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ResolveAddr turns a --metrics-addr value into the address to listen on:
// a port alone ("9464", ":9464") is on loopback (127.0.0.1), and a host
// with a port ("0.0.0.0:9464", "[::1]:9464") is taken as given. Empty
// means off and stays empty.
func ResolveAddr(addr string) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// A port alone has no colon.
		host, port = "", addr
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("metrics address %q: want a port (9464) or host:port (0.0.0.0:9464)", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Server serves a Registry at /metrics, and nothing else, until Close.
type Server struct {
	ln   net.Listener
	hs   *http.Server
	done chan struct{}
	once sync.Once
}

// Listen resolves addr (see ResolveAddr), listens on it at once (so that
// an address in use is an error now, not a log line later), and serves reg
// at /metrics in a goroutine that Close ends.
func Listen(addr string, reg *Registry) (*Server, error) {
	resolved, err := ResolveAddr(addr)
	if err != nil {
		return nil, err
	}
	if resolved == "" {
		return nil, errors.New("metrics: no address")
	}
	ln, err := net.Listen("tcp", resolved)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", resolved, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg)
	s := &Server{ln: ln, done: make(chan struct{}),
		// Timeouts so that a slow or silent client cannot hold a
		// connection (and its goroutine) for long.
		hs: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}}
	go func() {
		defer close(s.done)
		s.hs.Serve(ln) // ends with ErrServerClosed at Close
	}()
	return s, nil
}

// Addr is the address the server listens on (with the port it got, when
// asked for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server: it stops listening, waits briefly for scrapes
// under way, closes what remains, and returns once its goroutines ended.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		if err = s.hs.Shutdown(ctx); err != nil {
			err = s.hs.Close()
		}
		<-s.done
	})
	return err
}

// closeGrace bounds how long Close waits for scrapes under way.
const closeGrace = 2 * time.Second
