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
	cfg := Config{DataDir: "/srv/agent"}
	cfg.Isolation.Mode = "sometimes"
	if _, err := cfg.confine(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "want auto, landlock or none") {
		t.Errorf("a bad mode: %v", err)
	}
}
