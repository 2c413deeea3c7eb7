package isolation

import (
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
