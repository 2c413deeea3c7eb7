package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeagent/agent/controlplane"
)

// The control plane reads AGENT_CP_* and not an agent's AGENT_DATA_DIR,
// and a token file with a trailing newline (as editors write it) works.
func TestControlPlaneServeEnvAndTokenFile(t *testing.T) {
	dir, agentDir := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "token"), []byte(longToken+"\n"), 0o600))
	t.Setenv("AGENT_DATA_DIR", agentDir)
	t.Setenv("AGENT_CP_STALL_LIMIT", "not-a-duration")
	wantOneLineError(t, runAgent(t, "controlplane", "serve", "--data-dir", dir, "--addr", freeAddr(t)), 2, "AGENT_CP_STALL_LIMIT")
	t.Setenv("AGENT_CP_STALL_LIMIT", "")
	os.Unsetenv("AGENT_CP_STALL_LIMIT")

	c := startCP(t, freeAddr(t), dir)
	defer c.stop()
	reg, err := controlplane.NewClient(c.url(), longToken, controlplane.ClientOptions{Tries: 1})
	must(t, err)
	if who, err := reg.WhoAmI(t.Context()); err != nil || who.Principal != "registration" {
		t.Fatalf("the token with its trailing newline trimmed is refused: %+v %v", who, err)
	}
	if entries, _ := os.ReadDir(agentDir); len(entries) != 0 {
		t.Fatalf("the control plane wrote into the agent's AGENT_DATA_DIR: %v", entries)
	}
}
