package workspace

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/internal/landlock"
)

// confinedEnv, when set, makes the test binary a confined git: it
// confines itself with the Landlock policy the variable holds (JSON),
// then becomes git with the arguments in confinedArgs, as an attempt's
// git would be.
const (
	confinedEnv  = "WORKSPACE_TEST_CONFINED_POLICY"
	confinedArgs = "WORKSPACE_TEST_CONFINED_ARGS"
)

func TestMain(m *testing.M) {
	if p := os.Getenv(confinedEnv); p != "" {
		os.Exit(runConfined(p, os.Getenv(confinedArgs)))
	}
	goleak.VerifyTestMain(m)
}

func runConfined(policy, args string) int {
	var p landlock.Policy
	var argv []string
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	runtime.LockOSThread()
	if _, err := landlock.RestrictThread(p); err != nil {
		fmt.Fprintln(os.Stderr, "confine:", err)
		return 3
	}
	git, err := exec.LookPath("git")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WORKSPACE_TEST_") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(git, append([]string{"git"}, argv...), env)
	fmt.Fprintln(os.Stderr, "exec git:", err)
	return 3
}

// confinedGit runs git with args in dir, confined to write only write
// (and to read everything), and returns its output and error.
func confinedGit(t *testing.T, dir string, write []string, args ...string) (string, error) {
	t.Helper()
	p, _ := json.Marshal(landlock.Policy{Read: []string{"/"}, Write: append(write, "/dev/null")})
	a, _ := json.Marshal(append(identity(), args...))
	cmd := exec.Command(os.Args[0])
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), confinedEnv+"="+string(p), confinedArgs+"="+string(a))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// identity is who the tests' commits are by, whatever the machine's git
// config says.
func identity() []string {
	return []string{"-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgSign=false", "-c", "init.defaultBranch=main"}
}

// cleanEnv is the test process's environment without GIT_ variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// git runs git in dir as a person (or a task) would, discovering the
// repository from dir, and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitErr(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, out)
	}
	return out
}

func gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append(identity(), args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// write writes files (name, content pairs) under dir.
func write(t *testing.T, dir string, nameContent ...string) {
	t.Helper()
	for i := 0; i < len(nameContent); i += 2 {
		p := filepath.Join(dir, nameContent[i])
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(nameContent[i+1]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// newRepo makes a repository on branch main with one commit: README (3
// lines) and old.txt (4 lines), and ignores *.log.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	git(t, t.TempDir(), "init", "-q", "-b", "main", dir)
	write(t, dir, "README", "one\ntwo\nthree\n", "old.txt", "a\nb\nc\nd\n", ".gitignore", "*.log\n")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}
