// Package gittest makes real git repositories for tests.
package gittest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Identity is who the tests' commits are by, whatever the machine's git
// config says: git's -c options.
var Identity = []string{"-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgSign=false", "-c", "init.defaultBranch=main"}

// Env is the test process's environment without GIT_ variables, with
// the commit identity set for git run by other processes (a task).
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com")
}

// Git runs git with args in dir and returns its trimmed output; it fails
// the test on an error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append(Identity, args...)...)
	cmd.Dir = dir
	cmd.Env = Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// NewRepo makes a repository on branch main with one commit, a README,
// in a directory of OutOfReach: the agent refuses to serve a repository
// a confined task could write, as it could one under /tmp.
func NewRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(OutOfReach(t), "repo")
	Git(t, t.TempDir(), "init", "-q", "-b", "main", dir)
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("one\ntwo\nthree\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

// OutOfReach returns a new directory, removed when the test ends, that a
// confined task cannot write: not under /tmp or /dev, which every task
// may write (t.TempDir is under /tmp), but under /var/tmp or, failing
// that, the user's cache directory.
func OutOfReach(t testing.TB) string {
	t.Helper()
	var bases []string
	if os.Getenv("AGENT_TEST_OUT_OF_REACH") != "" {
		bases = append(bases, os.Getenv("AGENT_TEST_OUT_OF_REACH"))
	}
	bases = append(bases, "/var/tmp")
	if cache, err := os.UserCacheDir(); err == nil {
		bases = append(bases, cache)
	}
	for _, base := range bases {
		if real, err := filepath.EvalSymlinks(base); err != nil || underTaskWritable(real) || unix.Access(real, unix.W_OK|unix.X_OK) != nil {
			continue
		}
		dir, err := os.MkdirTemp(base, "agent-test-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { removeAll(dir) })
		return dir
	}
	t.Fatalf("no directory out of a task's reach to make a repository in (tried %v); set AGENT_TEST_OUT_OF_REACH", bases)
	return ""
}

// underTaskWritable reports whether dir is under /tmp or /dev.
func underTaskWritable(dir string) bool {
	for _, w := range []string{"/tmp", "/dev"} {
		if dir == w || strings.HasPrefix(dir, w+"/") {
			return true
		}
	}
	return false
}

// removeAll removes dir, giving back first the rights a test (or a task)
// took from its directories.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
