// Package serve assembles and runs the reference control plane as agent
// controlplane serve does: it makes the state directory private, reads
// or makes the credentials, opens the store --store names, builds the
// server with its notifications, watchdog and metrics, and serves HTTP or
// HTTPS until its context ends, then shuts down in order. It also starts
// a small one on loopback for agent demo (Loopback).
package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/credential"
	"github.com/edgeagent/agent/controlplane/notify"
	"github.com/edgeagent/agent/controlplane/server"
	"github.com/edgeagent/agent/controlplane/store"
	"github.com/edgeagent/agent/controlplane/store/filestore"
	"github.com/edgeagent/agent/controlplane/store/pgstore"
	"github.com/edgeagent/agent/internal/private"
	"github.com/edgeagent/agent/metrics"
	"github.com/edgeagent/agent/state"
)

// Config is what agent controlplane serve's settings say.
type Config struct {
	Addr        string // where to listen, host:port
	ReplicaName string // "": this host's name and Addr's port
	DataDir     string // the state directory, made 0700 if missing
	// StoreURL is "" for files in DataDir, or a postgres:// URL.
	StoreURL     string
	TokenFile    string // the registration secret; "": DataDir/token
	OperatorFile string // the operator tokens; "": DataDir/operator-token
	TLSCert      string // with TLSKey: HTTPS; neither: HTTP
	TLSKey       string
	MetricsAddr  string // "": no metrics endpoint

	Lease, HeartbeatInterval time.Duration
	Limits                   state.Limits
	MaxAttemptOutput         int64
	Retention                time.Duration
	Delegate                 []server.DelegateRule

	Notify       notify.Settings
	NotifyLimits notify.Options // its Window, PerSubject and PerTarget

	Logger *slog.Logger
	// Out gets the one line that says where it listens and where the
	// credentials are.
	Out io.Writer
}

// Run serves the control plane until ctx ends. A mistake in the settings
// is one line, holding no secret.
func Run(ctx context.Context, c Config) error {
	log := c.Logger
	tlsConf, err := TLS(c.TLSCert, c.TLSKey)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	// Before a token is written there: nobody else may read or plant
	// files in it.
	if err := private.Dir("state directory", c.DataDir); err != nil {
		return err
	}
	token, where, err := credential.Registration(c.TokenFile, c.DataDir)
	if err != nil {
		return err
	}
	operators, opWhere, err := credential.Operators(c.OperatorFile, c.DataDir)
	if err != nil {
		return err
	}
	if err := c.Notify.CheckPublicURL(); err != nil {
		return err
	}
	targets, secretWhere, err := c.Notify.Targets(c.DataDir, true)
	if err != nil {
		return err
	}
	st, storeWhere, err := OpenStore(ctx, c.StoreURL, c.DataDir, log)
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := server.New(server.Options{Store: st, Token: token, OperatorTokens: operators, Lease: c.Lease, HeartbeatInterval: c.HeartbeatInterval,
		Limits: c.Limits, MaxAttemptOutput: c.MaxAttemptOutput, Retention: c.Retention, Logger: log,
		PublicURL: c.Notify.PublicURL, Notify: serverTargets(targets), Delegate: c.Delegate, Replica: ReplicaName(c.ReplicaName, c.Addr)})
	if err != nil {
		return err
	}
	defer srv.Close()
	log.Info("control plane store", "store", storeWhere)
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	go srv.RunWatchdog(ctx, time.Second)
	logTargets(log, targets, secretWhere)
	counts := notify.NewCounts(targets)
	defer startNotify(ctx, srv.Store(), targets, counts, log, c.NotifyLimits)()
	handler := srv.Handler()
	if c.MetricsAddr != "" {
		m := metrics.NewControlPlane(srv)
		m.Overload(srv)
		if len(targets) > 0 {
			m.Notifications(counts)
		}
		handler = m.Instrument(handler)
		ms, err := metrics.Listen(c.MetricsAddr, m.Registry())
		if err != nil {
			return err
		}
		defer ms.Close()
		log.Info("serving metrics", "url", "http://"+ms.Addr()+"/metrics")
	}
	// Timeouts so that a slow or silent client cannot hold a connection
	// (and its goroutine) forever.
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, TLSConfig: tlsConf}
	// Claims waiting for work answer at once: the shutdown waits for
	// requests in flight.
	hs.RegisterOnShutdown(srv.StopWaits)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	fmt.Fprintf(c.Out, "control plane listening on %s://%s (registration secret for agents %s; operator tokens for people %s)\n", scheme, ln.Addr(), where, opWhere)
	log.Info("control plane listening", "addr", ln.Addr().String(), "data_dir", c.DataDir, "tls", tlsConf != nil)
	serve := hs.Serve
	if tlsConf != nil {
		serve = func(ln net.Listener) error { return hs.ServeTLS(ln, "", "") }
	}
	if err := serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// TLS reads the certificate and key of --tls-cert and --tls-key: both or
// neither (nil, plain HTTP). The key is a secret: its file must be its
// owner's alone. An error is one line and never holds the key.
func TLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("--tls-cert and --tls-key go together: give both (HTTPS) or neither (HTTP)")
	}
	certPEM, err := credential.ReadSecretFile("--tls-cert", certFile, false)
	if err != nil {
		return nil, err
	}
	keyPEM, err := credential.ReadSecretFile("--tls-key", keyFile, true)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// OpenStore opens the store url names: "" for files in dir, or a
// postgres:// URL. where says which, for the log, without a password.
func OpenStore(ctx context.Context, url, dir string, log *slog.Logger) (st store.Store, where string, err error) {
	switch {
	case url == "":
		st, err := filestore.Open(dir, filestore.Options{Logger: log})
		if err != nil {
			return nil, "", err
		}
		return st, "files in the data directory", nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		st, err := pgstore.Open(ctx, url, pgstore.Options{Logger: log})
		if err != nil {
			return nil, "", fmt.Errorf("--store: %w", err)
		}
		return st, "postgresql " + controlplane.RedactURL(url), nil
	default:
		return nil, "", fmt.Errorf("--store %q: want empty (files in the data directory) or a postgres:// URL", controlplane.RedactURL(url))
	}
}

// ReplicaName is the replica's name: name, or this host's name and the
// port of the address it listens on (its host when it names one).
func ReplicaName(name, addr string) string {
	if name != "" {
		return name
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host, _ = os.Hostname()
	}
	return net.JoinHostPort(host, port)
}

// serverTargets are the targets as the server writes records for them.
func serverTargets(ts []notify.Target) []server.NotifyTarget {
	out := make([]server.NotifyTarget, len(ts))
	for i, t := range ts {
		out[i] = server.NotifyTarget{Name: t.Name, Events: slices.Clone(t.Events)}
	}
	return out
}

// logTargets says the targets once at start: "notifications: 2 targets
// (ops-slack, hooks)", and where the --notify-webhook targets' key is.
func logTargets(log *slog.Logger, ts []notify.Target, secretWhere string) {
	if len(ts) == 0 {
		log.Info("notifications: 0 targets")
		return
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	msg := fmt.Sprintf("notifications: %d targets (%s)", len(ts), strings.Join(names, ", "))
	if secretWhere != "" {
		log.Info(msg, "webhook_secret", secretWhere)
		return
	}
	log.Info(msg)
}

// startNotify starts delivering st's notifications to targets, counting
// the tries in counts, under limits' Window, PerSubject and PerTarget,
// until ctx ends or the function it returns is called, which waits for
// the deliveries in flight.
func startNotify(ctx context.Context, st notify.Store, targets []notify.Target, counts *notify.Counts, log *slog.Logger, limits notify.Options) (stop func()) {
	if len(targets) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		notify.Run(ctx, st, targets, notify.Options{Logger: log, Counts: counts, Window: limits.Window, PerSubject: limits.PerSubject, PerTarget: limits.PerTarget})
	}()
	return func() { cancel(); <-done }
}

// Loopback starts a reference control plane over files in dir on a free
// port of loopback, as agent demo asks for one, and returns its URL and
// the function that stops it.
func Loopback(dir, token, operatorToken string, heartbeat time.Duration, log *slog.Logger) (url string, stop func(), err error) {
	st, err := filestore.Open(dir, filestore.Options{Logger: log})
	if err != nil {
		return "", nil, err
	}
	srv, err := server.New(server.Options{Store: st, Token: token, OperatorTokens: []string{operatorToken}, HeartbeatInterval: heartbeat, Logger: log})
	if err != nil {
		st.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		st.Close()
		return "", nil, err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String(), func() { hs.Close(); srv.Close(); st.Close() }, nil
}
