package serve

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/testkit"
)

// lines is an io.Writer safe for Run's goroutine and the test's.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *lines) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

var listening = regexp.MustCompile(`control plane listening on (https?)://(\S+) `)

// start runs c until the test ends, and returns its base URL once it
// listens.
func start(t *testing.T, c Config) string {
	t.Helper()
	out := &lines{}
	c.Addr, c.Out = "127.0.0.1:0", out
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after its context ended: %v", err)
		}
	})
	var m []string
	testkit.WaitFor(t, "the control plane to listen", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("Run ended before it listened: %v", err)
		default:
		}
		m = listening.FindStringSubmatch(out.String())
		return m != nil
	})
	return m[1] + "://" + m[2]
}

func get(t *testing.T, hc *http.Client, url string) int {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Run makes the state directory and its credentials private, serves the
// API and metrics, and stops when its context ends.
func TestRunServesAndStops(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cp")
	metricsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := metricsLn.Addr().String()
	metricsLn.Close()
	base := start(t, Config{DataDir: dir, MetricsAddr: metricsAddr})
	if code := get(t, http.DefaultClient, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("GET /healthz: %d", code)
	}
	if code := get(t, http.DefaultClient, "http://"+metricsAddr+"/metrics"); code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("the state directory: %v, %v", info, err)
	}
	for _, f := range []string{"token", "operator-token"} {
		info, err := os.Stat(filepath.Join(dir, f))
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v", f, info, err)
		}
	}
}

// A state directory others may write to is refused before any token is
// written in it.
func TestRunRefusesAnOpenStateDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Config{DataDir: dir, Addr: "127.0.0.1:0", Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "is writable by others") {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "token")); err == nil {
		t.Fatal("a token was written in an open directory")
	}
}

func TestOpenStoreRefusesOtherURLs(t *testing.T) {
	_, _, err := OpenStore(context.Background(), "mysql://cp:hunter2@db/agents", t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "want empty (files in the data directory) or a postgres:// URL") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("OpenStore: %v", err)
	}
}

func TestReplicaName(t *testing.T) {
	host, _ := os.Hostname()
	for _, c := range []struct{ name, addr, want string }{
		{"cp-1", ":8080", "cp-1"},
		{"", "10.0.0.5:8080", "10.0.0.5:8080"},
		{"", ":8080", net.JoinHostPort(host, "8080")},
		{"", "0.0.0.0:8443", net.JoinHostPort(host, "8443")},
		{"", "no-port", "no-port"},
	} {
		if got := ReplicaName(c.name, c.addr); got != c.want {
			t.Errorf("ReplicaName(%q, %q) = %q, want %q", c.name, c.addr, got, c.want)
		}
	}
}

// certificate writes a self-signed certificate for 127.0.0.1 and its key
// (0600), and returns their files and a pool that trusts it.
func certificate(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestRunServesTLS(t *testing.T) {
	certFile, keyFile, pool := certificate(t)
	base := start(t, Config{DataDir: t.TempDir(), TLSCert: certFile, TLSKey: keyFile})
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("listening on %s", base)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer hc.CloseIdleConnections()
	if code := get(t, hc, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("GET /healthz over https: %d", code)
	}
}

// Bad TLS settings: one line each, never the key.
func TestTLSMistakes(t *testing.T) {
	certFile, keyFile, _ := certificate(t)
	openKey := filepath.Join(t.TempDir(), "key.pem")
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(openKey, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cert, key, want string }{
		{certFile, "", "--tls-cert and --tls-key go together"},
		{"", keyFile, "--tls-cert and --tls-key go together"},
		{certFile, openKey, "chmod 600 " + openKey},
		{keyFile, keyFile, "--tls-cert " + keyFile + " and --tls-key " + keyFile + ": "},
	} {
		_, err := TLS(c.cert, c.key)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "\n") {
			t.Errorf("TLS(%q, %q): %v; want one line holding %q", c.cert, c.key, err, c.want)
		}
	}
	if conf, err := TLS("", ""); conf != nil || err != nil {
		t.Errorf("TLS without files: %v, %v", conf, err)
	}
}
