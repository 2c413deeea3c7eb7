// Package credential reads and makes the control plane's credentials as
// files: the token a client holds, the registration secret and the
// operator tokens the control plane serves its principals with, and any
// other secret file (a TLS key, a webhook's key). Every file is its
// owner's alone (no group or other permission bits), and a token is one
// word of at least api.MinTokenLen characters. No error holds a token.
package credential

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

// ReadSecretFile reads a file that holds secrets (1 MiB at most), refusing
// one that is not a regular file and, when checkPerm is set, one that
// others may read. what names the file in an error.
func ReadSecretFile(what, file string, checkPerm bool) ([]byte, error) {
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

// ReadTokenFile reads a file of one token.
func ReadTokenFile(what, file string, checkPerm bool) (string, error) {
	b, err := ReadSecretFile(what, file, checkPerm)
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

// FromEnv reads the token in AGENT_TOKEN: "" and no error when it is
// unset or blank, so that the caller says which flag would give it.
func FromEnv() (string, error) {
	tok := strings.TrimSpace(os.Getenv("AGENT_TOKEN"))
	if tok == "" {
		return "", nil
	}
	if strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", fmt.Errorf("AGENT_TOKEN does not hold one token (visible characters, no spaces)")
	}
	if err := api.CheckToken(tok); err != nil {
		return "", fmt.Errorf("AGENT_TOKEN: %w", err)
	}
	return tok, nil
}

// ReadOperatorTokens reads an operator token file: one token per line,
// one per person; blank lines and lines starting with # are skipped. An
// error names the line, never the token.
func ReadOperatorTokens(file string) ([]string, error) {
	const what = "operator token file"
	b, err := ReadSecretFile(what, file, true)
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

// Own reads the token the control plane made in path before, or makes
// one (256 bits, 0600). It returns the token and where it is ("in PATH",
// "written to PATH"), never the token in a message.
func Own(what, path string) (token, where string, err error) {
	token, err = ReadTokenFile(what, path, true)
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

// Registration is the registration secret: file's, or DIR/token's, made
// if missing; and where it is, for the line that says so.
func Registration(file, dir string) (token, where string, err error) {
	if file != "" {
		token, err = ReadTokenFile("token file", file, true)
		return token, "from " + file, err
	}
	return Own("registration secret", filepath.Join(dir, "token"))
}

// Operators are the operator tokens: file's, or DIR/operator-token's,
// made if missing; and where they are.
func Operators(file, dir string) ([]string, string, error) {
	if file != "" {
		toks, err := ReadOperatorTokens(file)
		return toks, fmt.Sprintf("from %s (%d)", file, len(toks)), err
	}
	tok, where, err := Own("operator token", filepath.Join(dir, "operator-token"))
	return []string{tok}, where, err
}
