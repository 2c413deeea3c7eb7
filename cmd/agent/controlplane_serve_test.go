package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/internal/testkit"
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
	// The first line says where the registration secret is, not where
	// the store is.
	if want := "registration secret for agents in " + filepath.Join(dir, "token") + ";"; !strings.Contains(c.output(), want) {
		t.Errorf("serve does not say %q:\n%s", want, c.output())
	}
	if entries, _ := os.ReadDir(agentDir); len(entries) != 0 {
		t.Fatalf("the control plane wrote into the agent's AGENT_DATA_DIR: %v", entries)
	}
}

// People's tokens come from the operator token file, named by flag,
// AGENT_CP_OPERATOR_TOKEN_FILE or the config file: each token in it works,
// comments and blank lines are skipped, and no DIR/operator-token is made.
func TestControlPlaneOperatorTokenFile(t *testing.T) {
	dir := privateDir(t)
	file := secret(t, "# alice\n"+longToken+"\n\n# bob\n"+otherToken+"\n", 0o600)
	t.Setenv("AGENT_CP_OPERATOR_TOKEN_FILE", file)
	addr := freeAddr(t)
	p := startProc(t, "controlplane", nil, "controlplane", "serve", "--addr", addr, "--data-dir", dir)
	defer p.stop()
	testkit.WaitFor(t, "the control plane to listen", func() bool { return strings.Contains(p.output(), "listening") })
	for _, tok := range []string{longToken, otherToken} {
		c, err := controlplane.NewClient("http://"+addr, tok, controlplane.ClientOptions{Tries: 1})
		must(t, err)
		if who, err := c.WhoAmI(t.Context()); err != nil || who.Principal != "operator" {
			t.Errorf("an operator token from the file: %+v %v", who, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "operator-token")); err == nil {
		t.Error("DIR/operator-token was made although a file was given")
	}
	if !strings.Contains(p.output(), "operator tokens for people from "+file+" (2)") {
		t.Errorf("serve does not say where the operator tokens come from:\n%s", p.output())
	}
}
