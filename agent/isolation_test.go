package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edgeagent/agent/internal/landlock"
)

// The agent's isolation as it resolves on this kernel: with Landlock, the
// data directory, a work root outside it, the protected files and the
// operator's denials are out of every task's reach, and the line says so;
// without it, or with isolation none, the line says attempts are not
// confined and why; landlock without Landlock is a configuration error.
func TestIsolationResolves(t *testing.T) {
	cfg := Config{DataDir: "/srv/agent", WorkDir: "/scratch/work",
		Isolation: Isolation{Protect: []string{"/etc/agent/agent.toml", "/etc/agent/token"}, Deny: []string{"/home/me/.ssh"}, Write: []string{"/home/me/.cache"}}}
	c, err := cfg.confine()
	if err != nil {
		t.Fatal(err)
	}
	if landlock.ABI() > 0 {
		if c.iso == nil || !strings.HasPrefix(c.line, "landlock (ABI ") {
			t.Fatalf("with Landlock: %+v", c)
		}
		for _, p := range []string{"/srv/agent", "/scratch/work", "/etc/agent/agent.toml", "/etc/agent/token", "/home/me/.ssh"} {
			if !slices.Contains(c.iso.Deny, p) {
				t.Errorf("%s is not denied: %v", p, c.iso.Deny)
			}
		}
		if !slices.Equal(c.iso.Write, []string{"/home/me/.cache"}) {
			t.Errorf("write %v", c.iso.Write)
		}
	} else if c.iso != nil || !strings.Contains(c.line, "a task can read the agent's token") {
		t.Errorf("without Landlock: %+v", c)
	}

	cfg.Isolation.Mode = IsolationNone
	if c, err := cfg.confine(); err != nil || c.iso != nil || !strings.HasPrefix(c.line, "none (isolation none): ") {
		t.Errorf("isolation none: %+v %v", c, err)
	}
	cfg.Isolation.Mode = "sometimes"
	if _, err := cfg.confine(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "want auto, landlock or none") {
		t.Errorf("a bad mode: %v", err)
	}
	cfg.Isolation.Mode = IsolationLandlock
	_, err = cfg.confine()
	if (landlock.ABI() > 0) != (err == nil) {
		t.Errorf("isolation landlock with ABI %d: %v", landlock.ABI(), err)
	}
}

// Doctor says how attempts would be confined: a warning, with the fix, for
// isolation none.
func TestDoctorSaysTheIsolation(t *testing.T) {
	c := checkIsolation(DoctorOptions{DataDir: t.TempDir(), Isolation: Isolation{Mode: IsolationNone}})
	if c.Result != CheckWarn || !strings.Contains(c.Fix, "drop --isolation none") {
		t.Errorf("isolation none: %+v", c)
	}
	c = checkIsolation(DoctorOptions{DataDir: t.TempDir()})
	if want := CheckPass; landlock.ABI() == 0 {
		want = CheckWarn
		if c.Result != want {
			t.Errorf("no Landlock: %+v", c)
		}
	} else if c.Result != want || !strings.HasPrefix(c.Detail, "landlock (ABI ") {
		t.Errorf("with Landlock: %+v", c)
	}
}
