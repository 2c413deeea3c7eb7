package main

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// serveTLS reads the certificate and key of --tls-cert and --tls-key:
// both or neither (nil, plain HTTP). The key is a secret: its file must
// be its owner's alone. An error is one line and never holds the key.
func serveTLS(certFile, keyFile string) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, errors.New("--tls-cert and --tls-key go together: give both (HTTPS) or neither (HTTP)")
	}
	certPEM, err := readSecretFile("--tls-cert", certFile, false)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readSecretFile("--tls-key", keyFile, true)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s and --tls-key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
