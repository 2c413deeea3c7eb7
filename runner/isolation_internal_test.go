package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/edgeagent/agent/internal/keeper"
)

// The person's credentials are denied to every attempt but where its own
// CLI keeps its state: a Codex attempt reads Codex's login (it is that
// CLI), not Claude Code's; an attempt with no CLI state reads neither.
// The agent's own files stay denied whatever the CLI keeps.
func TestAnAttemptsCLIStateKeepsItsOwnLoginOnly(t *testing.T) {
	iso := &Isolation{Deny: []string{"/h/.local/state/agent"}, Credentials: []string{"/h/.codex/auth.json", "/h/.claude/.credentials.json", "/h/.ssh"},
		Allow: []string{"/h/.ssh/deploy"}}
	var spec AttemptSpec
	iso.confine(&spec, "/h/.local/state/agent/work", "/h/.local/state/agent/work/t-1")
	if !slices.Contains(spec.Confine.Read, "/h/.ssh/deploy") {
		t.Errorf("the allowed key is not readable: %v", spec.Confine.Read)
	}
	for _, c := range []struct {
		state  []string
		denied []string
		read   []string
	}{
		{nil, []string{"/h/.codex/auth.json", "/h/.claude/.credentials.json", "/h/.ssh"}, nil},
		{[]string{"/h/.codex"}, []string{"/h/.claude/.credentials.json", "/h/.ssh"}, []string{"/h/.codex/auth.json"}},
		{[]string{"/h/.claude"}, []string{"/h/.codex/auth.json", "/h/.ssh"}, []string{"/h/.claude/.credentials.json"}},
		{[]string{"/h/.local/state/agent"}, []string{"/h/.local/state/agent"}, nil},
	} {
		p := spec.Confinement(c.state...)
		for _, d := range append(c.denied, "/h/.local/state/agent", "/h/.local/state/agent/work") {
			if !slices.Contains(p.Deny, d) {
				t.Errorf("CLI state %v: %s is not denied: %v", c.state, d, p.Deny)
			}
		}
		for _, r := range c.read {
			if slices.Contains(p.Deny, r) {
				t.Errorf("CLI state %v: its own %s is denied", c.state, r)
			}
		}
	}
	if spec.Confinement("/h/.codex"); len(spec.Confine.Deny) != 2 {
		t.Errorf("Confinement changed the spec's own policy: %v", spec.Confine.Deny)
	}
	var unconfined AttemptSpec
	if p := unconfined.Confinement("/h/.codex"); p != nil {
		t.Errorf("an unconfined attempt got a policy: %+v", p)
	}
}

// An attempt's serve directory is the agent's: a task user may enter it
// (0711) and open what the executor gave it there, not list it or write
// it; without a task user it is private to the agent's user (0700), and
// its confinement reads it only.
func TestAServeDirectoryIsTheAgentsAndReadOnlyToItsTask(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving files to a task user needs root")
	}
	root := t.TempDir()
	u := &TaskUser{Name: "agent-task", User: keeper.User{Uid: 4242, Gid: 4242}}
	for _, c := range []struct {
		user *TaskUser
		mode os.FileMode
	}{{nil, 0o700}, {u, 0o711}} {
		dir, err := attemptServeDir(filepath.Join(root, "work"), "att-"+strconv.Itoa(int(c.mode)), c.user)
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(dir)
		if err != nil || info.Mode().Perm() != c.mode || info.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Fatalf("%s: %v (%v), want the agent's, %04o", dir, info.Mode().Perm(), err, c.mode)
		}
		token := filepath.Join(dir, "ask.token")
		if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
			t.Fatal(err)
		}
		spec := AttemptSpec{ServeDir: dir, TaskUser: c.user}
		if err := spec.GiveToTask(token); err != nil {
			t.Fatal(err)
		}
		want := uint32(0)
		if c.user != nil {
			want = c.user.Uid
		}
		if info, err := os.Stat(token); err != nil || info.Sys().(*syscall.Stat_t).Uid != want {
			t.Errorf("the token given to the task is owned by %v (%v), want %d", info.Sys().(*syscall.Stat_t).Uid, err, want)
		}
		if info, _ := os.Stat(dir); info.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("giving the token away gave the directory too")
		}
		iso := &Isolation{}
		iso.confine(&spec, filepath.Join(root, "work"))
		if !slices.Contains(spec.Confine.Read, dir) || slices.Contains(spec.Confine.Write, dir) {
			t.Errorf("the confinement's read %v, write %v: want %s read only", spec.Confine.Read, spec.Confine.Write, dir)
		}
	}
}
