package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// UnreachableError: a request got no answer. The control plane could not
// be reached (the connection was refused, the host is unknown, there is no
// route), or the connection broke or timed out before it answered. It is
// transient: the agent retries it; a command says it in one line.
type UnreachableError struct {
	// URL is the control plane's address; it holds no secret.
	URL string
	// Reason says why in a few words: "connection refused", "no answer
	// within 30s", "host cp.example.com not found".
	Reason string
	// Err is what the HTTP client said.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the control plane at %s is unreachable: %s", e.URL, e.Reason)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// requestError is what a request that got no answer fails with: err is
// what http.Client.Do returned. Its *url.Error, which repeats the method
// and the whole URL ("Post \"…\": dial tcp …: connect: …"), is replaced by
// one line that names the control plane and why it did not answer. A
// refused redirect and a stopped context keep their own words, and a
// certificate the client does not trust says so.
func (c *Client) requestError(ctx context.Context, err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	switch {
	case errors.Is(err, errRedirect), ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return ue.Err
	}
	var (
		dns   *net.DNSError
		errno syscall.Errno
		ne    net.Error
		cert  *tls.CertificateVerificationError
		unkCA x509.UnknownAuthorityError
		host  x509.HostnameError
	)
	reason := ""
	switch {
	case errors.As(err, &cert), errors.As(err, &unkCA), errors.As(err, &host):
		return fmt.Errorf("the control plane at %s: its TLS certificate is not trusted: %w", c.URL(), ue.Err)
	case errors.As(err, &dns):
		reason = fmt.Sprintf("host %s not found", dns.Name)
		if !dns.IsNotFound {
			reason = fmt.Sprintf("looking up host %s: %s", dns.Name, dns.Err)
		}
	case errors.As(err, &errno):
		reason = errno.Error() // connection refused, no route to host, connection reset by peer
	case errors.As(err, &ne) && ne.Timeout():
		reason = fmt.Sprintf("no answer within %s", c.opts.Timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		// net/http's own words when a connection closed before any
		// answer came (its error value is not exported).
		strings.Contains(ue.Err.Error(), "server closed idle connection"):
		reason = "the connection closed before an answer"
	default:
		reason = ue.Err.Error()
	}
	return &UnreachableError{URL: c.URL(), Reason: reason, Err: err}
}
