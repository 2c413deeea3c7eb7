package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/private"
)

// Token files. Every command that reaches a control plane, and the control
// plane itself, reads its credentials here, under one rule: the file is
// its owner's alone (no group or other permission bits), and a token is
// one word of at least api.MinTokenLen characters (128 bits as
// hex). No error holds a token.

// readToken reads the control plane token from a file, else from
// AGENT_TOKEN, and refuses a file others may read and a short token.
func readToken(file string) (string, error) {
	if file != "" {
		return readTokenFile("token file", file, true)
	}
	return tokenFromEnv()
}

// readTokenForDoctor is readToken without the file's permission check:
// agent doctor reports that itself, with the fix, beside the other checks.
func readTokenForDoctor(file string) (string, error) {
	if file != "" {
		return readTokenFile("token file", file, false)
	}
	return tokenFromEnv()
}

func tokenFromEnv() (string, error) {
	tok := strings.TrimSpace(os.Getenv("AGENT_TOKEN"))
	if tok == "" {
		return "", usagef("no control plane token: give --token-file FILE or set AGENT_TOKEN")
	}
	if strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", fmt.Errorf("AGENT_TOKEN does not hold one token (visible characters, no spaces)")
	}
	if err := api.CheckToken(tok); err != nil {
		return "", fmt.Errorf("AGENT_TOKEN: %w", err)
	}
	return tok, nil
}

// readSecretFile reads a file that holds secrets, refusing it when others
// may read it (unless checkPerm is false).
func readSecretFile(what, file string, checkPerm bool) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s is not a regular file", what, file)
	}
	if checkPerm {
		if err := private.SecretFile(what, file, info); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// readTokenFile reads a file of one token.
func readTokenFile(what, file string, checkPerm bool) (string, error) {
	b, err := readSecretFile(what, file, checkPerm)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s %s is empty", what, file)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%s %s does not hold one token (one line of visible characters); is it the right file?", what, file)
	}
	if err := api.CheckToken(tok); err != nil {
		return "", fmt.Errorf("%s %s: %w", what, file, err)
	}
	return tok, nil
}

// readOperatorTokens reads an operator token file: one token per line, one
// per person; blank lines and lines starting with # are skipped. An error
// names the line, never the token.
func readOperatorTokens(file string) ([]string, error) {
	const what = "operator token file"
	b, err := readSecretFile(what, file, true)
	if err != nil {
		return nil, err
	}
	var toks []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := api.CheckToken(line); err != nil {
			return nil, fmt.Errorf("%s %s, line %d: %w", what, file, n, err)
		}
		toks = append(toks, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, file, err)
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("%s %s holds no token (one per line; # starts a comment)", what, file)
	}
	return toks, nil
}

// ownToken reads the token the control plane made in path before, or
// makes one (256 bits, 0600). It returns the token and where it is, never
// the token in a message.
func ownToken(what, path string) (token, where string, err error) {
	token, err = readTokenFile(what, path, true)
	switch {
	case err == nil:
		return token, "in " + path, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", "", err
	}
	buf := make([]byte, 32)
	rand.Read(buf)
	token = hex.EncodeToString(buf)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("write %s: %w", what, err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return "", "", fmt.Errorf("write %s: %w", what, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", "", fmt.Errorf("write %s: %w", what, err)
	}
	if err := f.Close(); err != nil {
		return "", "", fmt.Errorf("write %s: %w", what, err)
	}
	return token, "written to " + filepath.Clean(path), nil
}
