package credential

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tok = "0123456789abcdef0123456789abcdef" // 32 characters: the shortest taken

func write(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, content string
		mode          os.FileMode
		checkPerm     bool
		want          string // an error holding this, or "" for tok
	}{
		{"one token", tok + "\n", 0o600, true, ""},
		{"open to others", tok, 0o644, true, "is open to others (mode 0644)"},
		{"open to others, unchecked", tok, 0o644, false, ""},
		{"empty", "\n \n", 0o600, true, "is empty"},
		{"two words", tok + " " + tok, 0o600, true, "does not hold one token"},
		{"short", "short-secret", 0o600, true, "a token needs at least 32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := write(t, filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")), c.content, c.mode)
			got, err := ReadTokenFile("token file", path, c.checkPerm)
			switch {
			case c.want == "" && (err != nil || got != tok):
				t.Fatalf("ReadTokenFile = %q, %v; want the token", got, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("ReadTokenFile error %v; want %q", err, c.want)
			case err != nil && (strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), "short-secret")):
				t.Fatalf("the error holds the token: %v", err)
			}
		})
	}
	if _, err := ReadTokenFile("token file", dir, true); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Fatalf("a directory: %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	for _, c := range []struct{ env, want, err string }{
		{"", "", ""},
		{"  " + tok + "\n", tok, ""},
		{"short", "", "AGENT_TOKEN: the token is 5 characters"},
		{tok + "\x01x", "", "AGENT_TOKEN does not hold one token"},
	} {
		t.Setenv("AGENT_TOKEN", c.env)
		got, err := FromEnv()
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("AGENT_TOKEN=%q: %q, %v; want %q, %q", c.env, got, err, c.want, c.err)
		}
	}
}

func TestReadOperatorTokens(t *testing.T) {
	dir := t.TempDir()
	other := strings.Repeat("b", 40)
	toks, err := ReadOperatorTokens(write(t, filepath.Join(dir, "ops"), "# alice\n"+tok+"\n\n  # bob\n"+other+"\n", 0o600))
	if err != nil || len(toks) != 2 || toks[0] != tok || toks[1] != other {
		t.Fatalf("ReadOperatorTokens = %q, %v", toks, err)
	}
	_, err = ReadOperatorTokens(write(t, filepath.Join(dir, "bad"), tok+"\nshort-secret\n", 0o600))
	if err == nil || !strings.Contains(err.Error(), "line 2:") || strings.Contains(err.Error(), "short-secret") {
		t.Fatalf("a short token on line 2: %v", err)
	}
	_, err = ReadOperatorTokens(write(t, filepath.Join(dir, "none"), "# nobody yet\n", 0o600))
	if err == nil || !strings.Contains(err.Error(), "holds no token") {
		t.Fatalf("no token: %v", err)
	}
}

// The control plane's own tokens are made once, private, and read back
// on the next start.
func TestOwnMakesThenReads(t *testing.T) {
	dir := t.TempDir()
	first, where, err := Registration("", dir)
	path := filepath.Join(dir, "token")
	if err != nil || len(first) != 64 || where != "written to "+path {
		t.Fatalf("Registration = %d characters, %q, %v", len(first), where, err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v, %v", info, err)
	}
	again, where, err := Registration("", dir)
	if err != nil || again != first || where != "in "+path {
		t.Fatalf("the second start: %q, %v (same token: %v)", where, err, again == first)
	}
	ops, where, err := Operators("", dir)
	if err != nil || len(ops) != 1 || ops[0] == first || where != "written to "+filepath.Join(dir, "operator-token") {
		t.Fatalf("Operators = %d, %q, %v", len(ops), where, err)
	}
	// A token file made open to others is refused, not made anew.
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Registration("", dir); err == nil || !strings.Contains(err.Error(), "open to others") {
		t.Fatalf("an open token file: %v", err)
	}
}

func TestGivenFiles(t *testing.T) {
	dir := t.TempDir()
	file := write(t, filepath.Join(dir, "reg"), tok, 0o600)
	if got, where, err := Registration(file, dir); err != nil || got != tok || where != "from "+file {
		t.Fatalf("Registration(file) = %q, %v", where, err)
	}
	ops := write(t, filepath.Join(dir, "ops"), tok+"\n"+strings.Repeat("c", 32)+"\n", 0o600)
	if got, where, err := Operators(ops, dir); err != nil || len(got) != 2 || where != "from "+ops+" (2)" {
		t.Fatalf("Operators(file) = %q, %v", where, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "token")); err == nil {
		t.Fatal("a token was made although a file was given")
	}
}
