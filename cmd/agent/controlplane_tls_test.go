package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/internal/testkit"
)

// testCA is a certificate authority made for one test, and a server
// certificate it signed for 127.0.0.1 and localhost.
type testCA struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agent test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	c := testCA{caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"),
		pool: x509.NewCertPool()}
	c.pool.AddCert(ca)
	must(t, os.WriteFile(c.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644))
	must(t, os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(t, os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return c
}

// Bad TLS settings: one line each, and nothing served.
func TestControlPlaneServeTLSErrors(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	openKey := filepath.Join(t.TempDir(), "key.pem")
	b, err := os.ReadFile(ca.keyFile)
	must(t, err)
	must(t, os.WriteFile(openKey, b, 0o644))
	certAsKey := filepath.Join(t.TempDir(), "key.pem")
	b, err = os.ReadFile(ca.certFile)
	must(t, err)
	must(t, os.WriteFile(certAsKey, b, 0o600))
	notPEM := filepath.Join(t.TempDir(), "cert.pem")
	must(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"cert without key", []string{"--tls-cert", ca.certFile}, "--tls-cert and --tls-key go together"},
		{"key without cert", []string{"--tls-key", ca.keyFile}, "--tls-cert and --tls-key go together"},
		{"missing key", []string{"--tls-cert", ca.certFile, "--tls-key", "/nonexistent/key.pem"}, "--tls-key: open /nonexistent/key.pem"},
		{"missing cert", []string{"--tls-cert", "/nonexistent/cert.pem", "--tls-key", ca.keyFile}, "--tls-cert: open /nonexistent/cert.pem"},
		{"key open to others", []string{"--tls-cert", ca.certFile, "--tls-key", openKey}, "chmod 600 " + openKey},
		{"not PEM", []string{"--tls-cert", notPEM, "--tls-key", ca.keyFile}, "failed to find any PEM data"},
		{"switched", []string{"--tls-cert", ca.keyFile, "--tls-key", certAsKey}, "PEM inputs may have been switched"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := freeAddr(t)
			args := append([]string{"controlplane", "serve", "--addr", addr, "--data-dir", privateDir(t)}, c.args...)
			r := runAgent(t, args...)
			wantOneLineError(t, r, 1, c.want)
			if strings.Contains(r.stderr, "PRIVATE KEY") || strings.Contains(r.stderr, "BEGIN") {
				t.Errorf("the error shows the key file's content: %q", r.stderr)
			}
		})
	}
}

// --tls-cert and --tls-key serve HTTPS: the command line's client works
// with the CA it is given (SSL_CERT_FILE) and refuses the server without
// it; plain HTTP is not served; the console's session cookie is Secure.
func TestControlPlaneServeTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	dir, addr := privateDir(t), freeAddr(t)
	p := startProc(t, "controlplane", nil, "controlplane", "serve", "--addr", addr, "--data-dir", dir,
		"--tls-cert", ca.certFile, "--tls-key", ca.keyFile)
	defer p.stop()
	testkit.WaitFor(t, "the control plane to listen", func() bool { return strings.Contains(p.output(), "listening on https://") })
	base := "https://" + addr
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()

	resp, err := hc.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over https: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("GET /healthz over https: %s, TLS %v", resp.Status, resp.TLS != nil)
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP is served beside HTTPS")
		}
	}

	// The real client: submit and tasks ls, given the CA.
	operator := filepath.Join(dir, "operator-token")
	env := []string{"SSL_CERT_FILE=" + ca.caFile}
	r := runAgentEnv(t, env, "submit", "--control-plane", base, "--token-file", operator, "--prompt", "over TLS")
	if r.code != 0 || strings.TrimSpace(r.stdout) == "" {
		t.Fatalf("submit over https: %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	if r := runAgentEnv(t, env, "tasks", "ls", "--remote", "--control-plane", base, "--token-file", operator); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("tasks ls --remote over https: %+v", r)
	}
	// Without the CA the client refuses the server's certificate.
	r = runAgentEnv(t, []string{"SSL_CERT_FILE=" + filepath.Join(t.TempDir(), "none.pem")}, "submit", "--control-plane", base, "--token-file", operator, "--prompt", "x")
	wantOneLineError(t, r, 1, "certificate")

	// The console's sign-in over TLS sets a Secure cookie.
	session := signInCookie(t, hc, base, base, tokenOf(t, operator))
	if !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie over https: Secure %v HttpOnly %v SameSite %v", session.Secure, session.HttpOnly, session.SameSite)
	}
}

// Behind a reverse proxy that ends TLS, --public-url https://… makes the
// console's cookie Secure although the request came over plain HTTP, and
// the browser's Origin of the public address is the console's own.
func TestControlPlaneServeBehindProxy(t *testing.T) {
	t.Parallel()
	const public = "https://cp.example.com"
	c := startCP(t, freeAddr(t), privateDir(t), "--public-url", public)
	defer c.stop()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	session := signInCookie(t, hc, c.url(), public, tokenOf(t, c.operatorFile))
	if !session.Secure {
		t.Error("the session cookie is not Secure with an https public URL")
	}
}

// signInCookie signs in to the console at base with tok, as a browser at
// origin does, and returns the session cookie; no cookie fails t.
func signInCookie(t *testing.T, hc *http.Client, base, origin, tok string) *http.Cookie {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/signin", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "agent_session" && resp.StatusCode == http.StatusSeeOther {
			return c
		}
	}
	t.Fatalf("sign-in at %s as %s: %s, cookies %v", base, origin, resp.Status, resp.Cookies())
	return nil
}
