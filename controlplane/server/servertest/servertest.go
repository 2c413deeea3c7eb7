// Package servertest starts the reference control plane for tests: in
// process, on loopback, in a test's temporary directory, with the tests'
// credentials (RegistrationToken for agents; a person's token, which the
// Operator client holds), stopped when the test ends. Tests that need a
// control plane to talk to take this one rather than a fixture of their
// own.
package servertest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/store/filestore"
)

// RegistrationToken is the registration secret agents enrol with, at
// every control plane Start starts unless its options give another.
const RegistrationToken = "reg-0123456789abcdef0123456789abcdef"

// operatorToken is a person's token, unless the options give others.
const operatorToken = "op-0123456789abcdef0123456789abcdef0"

// Options configure Start. Zero fields take the defaults their comments
// give.
type Options struct {
	// Server configures the server. Its Store defaults to a file store in
	// Dir, Token to RegistrationToken, OperatorTokens to one token of the
	// package's, and Logger to one that discards.
	Server server.Options
	// Dir is the file store's directory when Server.Store is nil: a
	// temporary directory of the test by default. Another control plane
	// started on it later finds what this one left.
	Dir string
	// Wrap, when set, serves what it makes of the server's handler: a
	// proxy that loses answers or rewrites requests, or metrics'
	// instrumentation.
	Wrap func(srv *server.Server, api http.Handler) http.Handler
}

// ControlPlane is a reference control plane serving on loopback.
type ControlPlane struct {
	// URL is where it listens: http://127.0.0.1:PORT.
	URL string
	// Server is the server itself.
	Server *server.Server
	// Operator is a person's client: the first operator token, and the
	// client's defaults.
	Operator *controlplane.Client

	registration string
	http         *httptest.Server
	opened       *filestore.Store // the store Start opened, closed by Close
	close        sync.Once
}

// Start starts a control plane for t and stops it when t ends.
func Start(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	o := opts.Server
	if o.Token == "" {
		o.Token = RegistrationToken
	}
	if len(o.OperatorTokens) == 0 {
		o.OperatorTokens = []string{operatorToken}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var opened *filestore.Store
	if o.Store == nil {
		dir := opts.Dir
		if dir == "" {
			dir = t.TempDir()
		}
		fs, err := filestore.Open(dir, filestore.Options{Logger: o.Logger, Now: o.Now})
		if err != nil {
			t.Fatalf("open the control plane's store: %v", err)
		}
		o.Store, opened = fs, fs
	}
	srv, err := server.New(o)
	if err != nil {
		if opened != nil {
			opened.Close()
		}
		t.Fatalf("start the control plane: %v", err)
	}
	var h http.Handler = srv.Handler()
	if opts.Wrap != nil {
		h = opts.Wrap(srv, h)
	}
	cp := &ControlPlane{Server: srv, registration: o.Token, http: httptest.NewServer(h), opened: opened}
	cp.URL = cp.http.URL
	t.Cleanup(cp.Close)
	if cp.Operator, err = controlplane.NewClient(cp.URL, o.OperatorTokens[0], controlplane.ClientOptions{}); err != nil {
		t.Fatal(err)
	}
	return cp
}

// Agent returns a client for agent id, tried once: it registers with the
// registration secret for a token of its own at its first request.
func (c *ControlPlane) Agent(t testing.TB, id string) *controlplane.Client {
	t.Helper()
	a, err := controlplane.NewClient(c.URL, c.registration, controlplane.ClientOptions{Tries: 1, AgentID: id})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Close stops the control plane and releases its directory, as a crash
// would leave it: another can start on it. It is safe to call again.
func (c *ControlPlane) Close() {
	c.close.Do(func() {
		c.Server.StopWaits() // the HTTP server's Close waits for requests in flight
		c.http.Close()
		c.Server.Close()
		if c.opened != nil {
			c.opened.Close()
		}
	})
}
