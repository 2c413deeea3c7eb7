package isolation

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/edgeagent/agent/internal/keeper"
	"github.com/edgeagent/agent/internal/landlock"
)

// TestMain makes the test binary a keeper, as the agent's is: without one
// attempts are not confined, and Resolve says so.
func TestMain(m *testing.M) {
	keeper.Main()
	goleak.VerifyTestMain(m)
}

// The isolation as it resolves on this kernel: with Landlock, the data
// directory, a work root outside it, the protected files and the
// operator's denials are out of every task's reach, and the line says so;
// without it, or with isolation none, the line says attempts are not
// confined and why; landlock without Landlock is refused.
func TestResolve(t *testing.T) {
	cfg := Config{Protect: []string{"/etc/agent/agent.toml", "/etc/agent/token"}, Deny: []string{"/srv/keys"}, Write: []string{"/home/me/.cache"}, Home: "/home/me"}
	c, err := Resolve(cfg, "/srv/agent", "/scratch/work")
	if err != nil {
		t.Fatal(err)
	}
	if landlock.ABI() > 0 {
		if c.Runner == nil || !strings.HasPrefix(c.Line, "landlock (ABI ") {
			t.Fatalf("with Landlock: %+v", c)
		}
		for _, p := range []string{"/srv/agent", "/scratch/work", "/etc/agent/agent.toml", "/etc/agent/token", "/srv/keys"} {
			if !slices.Contains(c.Runner.Deny, p) {
				t.Errorf("%s is not denied: %v", p, c.Runner.Deny)
			}
		}
		for _, p := range []string{"/home/me/.ssh", "/home/me/.aws", "/home/me/.netrc", "/home/me/.docker/config.json"} {
			if !slices.Contains(c.Runner.Credentials, p) {
				t.Errorf("%s is not denied as a credential: %v", p, c.Runner.Credentials)
			}
		}
		if len(c.Denied) != 5+len(DefaultDeny) {
			t.Errorf("%d paths denied, want the agent's 4, the operator's 1 and the %d credentials: %v", len(c.Denied), len(DefaultDeny), c.Denied)
		}
		if !slices.Equal(c.Runner.Write, []string{"/home/me/.cache"}) {
			t.Errorf("write %v", c.Runner.Write)
		}
	} else if c.Runner != nil || !strings.Contains(c.Line, "a task can read the agent's token") {
		t.Errorf("without Landlock: %+v", c)
	}

	cfg.Mode = None
	if c, err := Resolve(cfg, "/srv/agent", ""); err != nil || c.Runner != nil || !strings.HasPrefix(c.Line, "none (isolation none): ") {
		t.Errorf("isolation none: %+v %v", c, err)
	}
	cfg.Mode = "sometimes"
	if _, err := Resolve(cfg, "/srv/agent", ""); err == nil || !strings.Contains(err.Error(), "want auto, landlock or none") {
		t.Errorf("a bad mode: %v", err)
	}
	cfg.Mode = Landlock
	_, err = Resolve(cfg, "/srv/agent", "")
	if (landlock.ABI() > 0) != (err == nil) {
		t.Errorf("isolation landlock with ABI %d: %v", landlock.ABI(), err)
	}
}

// The network as it resolves: confined where the kernel lets the agent
// make a network namespace, the allow list named; where it does not, auto
// says so and why (not confined, for health), allowlist refuses; open is
// said as loudly; a bad mode or rule is refused in one line.
func TestResolveEgress(t *testing.T) {
	e, line, err := ResolveEgress(Config{EgressAllow: []string{"github.com", "127.0.0.1:11434"}})
	if err != nil {
		t.Fatal(err)
	}
	if keeper.ProbeEgress() == nil {
		if e == nil || len(e.Allow) != 2 || !strings.Contains(line, "github.com, 127.0.0.1:11434, through the agent's proxy") {
			t.Errorf("confined: %+v %q", e, line)
		}
	}
	if e, line, err := ResolveEgress(Config{Egress: EgressOpen}); err != nil || e != nil || !strings.HasPrefix(line, "network open (egress open): ") {
		t.Errorf("open: %+v %q %v", e, line, err)
	}
	for _, c := range []Config{{Egress: "sometimes"}, {EgressAllow: []string{"https://github.com"}}} {
		if _, _, err := ResolveEgress(c); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want a one-line error", c, err)
		}
	}

	refused := errors.New("the kernel does not let this user make a user and network namespace (operation not permitted)")
	probe := probeEgress
	probeEgress = func() error { return refused }
	defer func() { probeEgress = probe }()
	e, line, err = ResolveEgress(Config{})
	if err != nil || e != nil || !strings.HasPrefix(line, "network open: "+refused.Error()) {
		t.Errorf("auto on a kernel that refuses: %+v %q %v", e, line, err)
	}
	if _, _, err := ResolveEgress(Config{Egress: EgressAllowlist}); err == nil || !strings.HasPrefix(err.Error(), "egress allowlist: "+refused.Error()) {
		t.Errorf("allowlist on a kernel that refuses: %v", err)
	}
	c, err := Resolve(Config{}, "/srv/agent", "")
	if err != nil || c.Confined() || !strings.Contains(c.Summary(), "; network open: ") {
		t.Errorf("the whole confinement on a kernel that refuses: confined %v, %q, %v", c.Confined(), c.Summary(), err)
	}
}

// Who tasks run as: another user only for a root agent, and an
// unprivileged one; a root agent's confined tasks drop its capabilities,
// unconfined ones keep them, said as a warning.
func TestResolveUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if _, _, _, err := ResolveUser(Config{TaskUser: "nobody"}, true); err == nil || !strings.Contains(err.Error(), "only an agent running as root") {
			t.Errorf("a task user for an agent that is not root: %v", err)
		}
		return
	}
	if u, line, warn, err := ResolveUser(Config{TaskUser: "nobody"}, true); err != nil || u == nil || u.Uid == 0 || warn || !strings.HasPrefix(line, "tasks run as nobody (uid ") {
		t.Errorf("nobody: %+v %q %v %v", u, line, warn, err)
	}
	for _, name := range []string{"root", "no-such-user-here"} {
		if _, _, _, err := ResolveUser(Config{TaskUser: name}, true); err == nil {
			t.Errorf("task user %s was taken", name)
		}
	}
	if _, line, warn, _ := ResolveUser(Config{}, true); warn || !strings.HasPrefix(line, "tasks run as root without capabilities") {
		t.Errorf("root, confined: %q %v", line, warn)
	}
	if _, line, warn, _ := ResolveUser(Config{}, false); !warn || !strings.HasPrefix(line, "tasks run as root with every capability") {
		t.Errorf("root, unconfined: %q %v", line, warn)
	}
}

// tree makes files under a temporary root, resolved, and returns it.
func tree(t *testing.T, files ...string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// paths are the denied paths of d, relative to root where they lie in it.
func paths(root string, d []Denied) map[string]Denied {
	m := map[string]Denied{}
	for _, e := range d {
		rel, err := filepath.Rel(root, e.Path)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = e.Path
		}
		m[rel] = e
	}
	return m
}

// The person's credentials are denied by default, relative to the home
// directory, whether they exist or not (each says which); isolation-allow
// lifts an entry of the list, or grants a path inside one, and nothing
// else: the agent's own files and the operator's denials stay, each
// refusal one line naming the path.
func TestTheDefaultDenyListAndWhatAllowLifts(t *testing.T) {
	root := tree(t, "home/.ssh/id_ed25519", "home/.ssh/deploy", "home/.aws/credentials", "home/notes", "data/agent-token", "agent.toml", "token", "keys/k")
	home, data := filepath.Join(root, "home"), filepath.Join(root, "data")
	cfg := Config{Home: home, Protect: []string{filepath.Join(root, "agent.toml"), filepath.Join(root, "token")}, Deny: []string{filepath.Join(root, "keys")}}
	d, err := deniedOf(cfg, data, "")
	if err != nil {
		t.Fatal(err)
	}
	got := paths(root, d.list)
	for _, c := range []struct {
		path       string
		credential bool
		exists     bool
	}{
		{"data", false, true}, {"agent.toml", false, true}, {"token", false, true}, {"keys", false, true},
		{"home/.ssh", true, true}, {"home/.aws", true, true}, {"home/.netrc", true, false}, {"home/.config/gh", true, false},
	} {
		e, ok := got[c.path]
		if !ok || e.Credential != c.credential || e.Exists != c.exists || e.Why == "" {
			t.Errorf("%s: %+v (denied %v), want credential %v, exists %v, a reason", c.path, e, ok, c.credential, c.exists)
		}
	}
	if _, ok := got["home/notes"]; ok {
		t.Errorf("home/notes is denied")
	}

	cfg.Allow = []string{filepath.Join(home, ".aws"), filepath.Join(home, ".ssh", "deploy")}
	d, err = deniedOf(cfg, data, "")
	if err != nil {
		t.Fatal(err)
	}
	got = paths(root, d.list)
	if _, ok := got["home/.aws"]; ok {
		t.Errorf("isolation-allow of ~/.aws left it denied")
	}
	if _, ok := got["home/.ssh"]; !ok {
		t.Errorf("isolation-allow of a key in ~/.ssh lifted all of ~/.ssh")
	}
	if !slices.Equal(d.allow, []string{filepath.Join(home, ".ssh", "deploy")}) {
		t.Errorf("read grants %v, want the deploy key alone", d.allow)
	}

	for _, c := range []struct{ allow, want string }{
		{filepath.Join(root, "token"), "it stays denied: " + filepath.Join(root, "token") + " is an agent's config, token file or data directory"},
		{filepath.Join(data, "agent-token"), "is the agent's data directory"},
		{root, "it stays denied"}, // holds the agent's files
		{filepath.Join(root, "keys", "k"), "is isolation-deny"},
		{filepath.Join(home, "notes"), "not on the default deny list"},
		{"/etc", "not on the default deny list"},
	} {
		cfg.Allow = []string{c.allow}
		_, err := Resolve(cfg, data, "")
		if err == nil || !strings.HasPrefix(err.Error(), "isolation-allow "+c.allow+": ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("isolation-allow %s: %v, want one line saying %q", c.allow, err, c.want)
		}
	}
}

// A token file in a control plane's state directory (the README's
// agent run --token-file ./cp/token) has the whole directory denied: the
// operator token and the key that signs task tokens are beside it. A
// token file elsewhere is denied alone; the control plane's directory the
// environment names is denied when it looks like one; one that holds the
// home directory is not denied whole, its secrets are.
func TestAControlPlanesStateDirectoryIsDenied(t *testing.T) {
	root := tree(t, "cp/token", "cp/operator-token", "cp/secrets/task-token-key", "cp/lock",
		"keys/token", "other-cp/operator-token", "home/token", "home/operator-token", "home/notes", "data/x")
	data := filepath.Join(root, "data")
	cfg := Config{Home: filepath.Join(root, "home"), Protect: []string{filepath.Join(root, "cp/token"), filepath.Join(root, "keys/token"), filepath.Join(root, "home/token")},
		ControlPlaneDirs: []string{filepath.Join(root, "other-cp"), filepath.Join(root, "not-there")}}
	d, err := deniedOf(cfg, data, "")
	if err != nil {
		t.Fatal(err)
	}
	got := paths(root, d.list)
	for _, p := range []string{"cp", "keys/token", "other-cp", "home/token", "home/operator-token", "home/secrets"} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s is not denied (%v)", p, got)
		}
	}
	for _, p := range []string{"keys", "home", "not-there"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s is denied whole", p)
		}
	}
	if !strings.Contains(got["cp"].Why, "control plane's state directory") {
		t.Errorf("cp: %+v", got["cp"])
	}
	cfg.Allow = []string{filepath.Join(root, "cp/operator-token")}
	if _, err := deniedOf(cfg, data, ""); err == nil || !strings.Contains(err.Error(), "control plane's state directory") {
		t.Errorf("isolation-allow of the operator token: %v", err)
	}
}
