package agent

import (
	"errors"
	"strings"
	"testing"
)

// An isolation the agent cannot have is a configuration error: it does not
// start. (How isolation resolves is the isolation package's, and tested
// there.)
func TestIsolationRefusedIsAConfigError(t *testing.T) {
	t.Parallel()
	cfg := Config{DataDir: "/srv/agent"}
	cfg.Isolation.Mode = "sometimes"
	if _, err := cfg.confine(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "want auto, landlock or none") {
		t.Errorf("a bad mode: %v", err)
	}
	cfg.Isolation.Mode = ""
	cfg.Isolation.Egress = "sometimes"
	if _, err := cfg.confine(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "want auto, allowlist or open") {
		t.Errorf("a bad egress mode: %v", err)
	}
	cfg.Isolation.Egress, cfg.Isolation.EgressAllow = "", []string{"https://github.com/"}
	if _, err := cfg.confine(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "egress allow: ") {
		t.Errorf("a bad egress rule: %v", err)
	}
}

// Egress open is said wherever unconfined files are: the health reason
// carries it, whatever the grade.
func TestEgressOpenIsSaidInHealth(t *testing.T) {
	t.Parallel()
	_, cfg := fixture(t)
	cfg.Isolation.Egress = "open"
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s := a.health.Snapshot(); !strings.Contains(s.Reason, "attempts are not confined: ") || !strings.Contains(s.Reason, "network open (egress open): ") {
		t.Errorf("health reason %q", s.Reason)
	}
}
