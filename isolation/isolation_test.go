package isolation

import (
	"errors"
	"os"
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
	cfg := Config{Protect: []string{"/etc/agent/agent.toml", "/etc/agent/token"}, Deny: []string{"/home/me/.ssh"}, Write: []string{"/home/me/.cache"}}
	c, err := Resolve(cfg, "/srv/agent", "/scratch/work")
	if err != nil {
		t.Fatal(err)
	}
	if landlock.ABI() > 0 {
		if c.Runner == nil || !strings.HasPrefix(c.Line, "landlock (ABI ") {
			t.Fatalf("with Landlock: %+v", c)
		}
		for _, p := range []string{"/srv/agent", "/scratch/work", "/etc/agent/agent.toml", "/etc/agent/token", "/home/me/.ssh"} {
			if !slices.Contains(c.Runner.Deny, p) {
				t.Errorf("%s is not denied: %v", p, c.Runner.Deny)
			}
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
