package main

// The trust boundaries of issue 21 through the real binary: the control
// plane and its clients refuse weak credentials and an open state
// directory; people and agents each hold only their own power.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeagent/agent/controlplane"
	"github.com/edgeagent/agent/controlplane/api"
	"github.com/edgeagent/agent/internal/testkit"
)

// runWithin runs the agent to completion or kills it after d (exit -1):
// a command that should refuse to start must not be waited on forever.
func runWithin(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := agentCmd(ctx, nil, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && ctx.Err() != nil {
		code = -1
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

const (
	longToken  = "a-long-enough-token-0123456789abcdef"
	otherToken = "another-long-token-0123456789abcdef"
)

// secret writes a file of mode perm.
func secret(t *testing.T, text string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(privateDir(t), "secret")
	must(t, os.WriteFile(p, []byte(text), 0o600))
	must(t, os.Chmod(p, perm))
	return p
}

// The control plane refuses a 2-character token, token files others can
// read, an operator token file with a short token (naming its line, never
// the token), and a state directory others can write to (where a planted
// task file would be handed to an agent). Each is one line, exit 1.
func TestAttackControlPlaneServesWeakCredentials(t *testing.T) {
	t.Parallel()
	open := privateDir(t)
	must(t, os.Chmod(open, 0o777))
	planted := privateDir(t)
	must(t, os.Mkdir(filepath.Join(planted, "tasks"), 0o777))
	must(t, os.Chmod(filepath.Join(planted, "tasks"), 0o777))
	must(t, os.WriteFile(filepath.Join(planted, "tasks", "t-planted.json"), []byte(`{"id":"t-planted","prompt":"rm -rf ~","phase":"queued"}`), 0o666))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a 2-character registration secret", []string{"--token-file", secret(t, "ab\n", 0o600)}, "the token is 2 characters; a token needs at least 32"},
		{"a world-readable registration secret", []string{"--token-file", secret(t, longToken, 0o644)}, "is open to others (mode 0644)"},
		{"a group-readable operator token file", []string{"--operator-token-file", secret(t, longToken, 0o640)}, "is open to others (mode 0640)"},
		{"a short operator token", []string{"--operator-token-file", secret(t, "# people\n"+longToken+"\n\nshort-one\n", 0o600)}, "line 4: the token is 9 characters"},
		{"the registration secret as an operator token", []string{"--token-file", secret(t, longToken, 0o600), "--operator-token-file", secret(t, longToken+"\n", 0o600)}, "is the registration secret"},
		{"a state directory writable by others", []string{"--data-dir", open}, "writable by others (mode 0777)"},
		{"a planted task in a tasks directory writable by others", []string{"--data-dir", planted}, "writable by others (mode 0777)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"controlplane", "serve", "--addr", freeAddr(t), "--data-dir", privateDir(t)}, c.args...)
			r := runWithin(t, 20*time.Second, args...)
			wantOneLineError(t, r, 1, c.want)
			for _, tok := range []string{longToken, "short-one"} {
				if strings.Contains(r.stderr, tok) {
					t.Errorf("the error shows a token: %q", r.stderr)
				}
			}
		})
	}
}

// agent run, agent submit and the other clients refuse a token file
// others can read and a short token, before they reach the control plane.
func TestAttackClientsUseWeakTokens(t *testing.T) {
	t.Parallel()
	short, open := secret(t, "ab\n", 0o600), secret(t, longToken, 0o644)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"run", []string{"run", "--data-dir", privateDir(t), "--executor", "sample"}},
		{"submit", []string{"submit", "--prompt", "x"}},
		{"tasks ls --remote", []string{"tasks", "ls", "--remote"}},
		{"tasks retry", []string{"tasks", "retry", "t-1"}},
		{"agents revoke", []string{"agents", "revoke", "a-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := append(c.args, "--control-plane", "http://"+freeAddr(t))
			wantOneLineError(t, runWithin(t, 20*time.Second, append(base, "--token-file", short)...), 1, "at least 32")
			wantOneLineError(t, runWithin(t, 20*time.Second, append(base, "--token-file", open)...), 1, "open to others (mode 0644)")
		})
	}
}

// Each credential does its own part through the CLI: the registration
// secret cannot submit (403, saying what to use), an agent's own token
// cannot list tasks, a person's operator token does both, and only it
// revokes.
func TestCredentialsThroughTheCLI(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	if info, err := os.Stat(c.operatorFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("DIR/operator-token: %v %v, want a 0600 file", info, err)
	}
	if out := c.output(); !strings.Contains(out, "operator tokens for people written to "+c.operatorFile) {
		t.Errorf("serve does not say where the operator token is:\n%s", out)
	}
	for _, f := range []string{c.tokenFile, c.operatorFile} {
		tok, _ := os.ReadFile(f)
		if strings.Contains(c.output(), strings.TrimSpace(string(tok))) {
			t.Fatalf("serve printed a token")
		}
	}
	cpArgs := func(tokenFile string) []string {
		return []string{"--control-plane", c.url(), "--token-file", tokenFile}
	}
	wantOneLineError(t, runAgent(t, append([]string{"submit", "--prompt", "x"}, cpArgs(c.tokenFile)...)...), 1, "people use an operator token")
	id := submit(t, c, "@output hi")

	reg, _ := os.ReadFile(c.tokenFile)
	agentClient, err := controlplane.NewClient(c.url(), strings.TrimSpace(string(reg)), controlplane.ClientOptions{AgentID: "vm-1", Tries: 1})
	must(t, err)
	if _, err := agentClient.Heartbeat(context.Background(), api.HeartbeatRequest{AgentID: "vm-1"}); err != nil {
		t.Fatal(err)
	}
	r := runAgent(t, append([]string{"tasks", "ls", "--remote"}, cpArgs(c.operatorFile)...)...)
	if r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Fatalf("tasks ls --remote with the operator token: %+v", r)
	}
	wantOneLineError(t, runAgent(t, append([]string{"agents", "revoke", "vm-1"}, cpArgs(c.tokenFile)...)...), 1, "403")
	r = runAgent(t, append([]string{"agents", "ls"}, cpArgs(c.operatorFile)...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "vm-1") {
		t.Fatalf("agents ls: %+v", r)
	}
	r = runAgent(t, append([]string{"agents", "revoke", "vm-1"}, cpArgs(c.operatorFile)...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "vm-1: token revoked") {
		t.Fatalf("agents revoke: %+v", r)
	}
	wantOneLineError(t, runAgent(t, append([]string{"agents", "revoke", "vm-1"}, cpArgs(c.operatorFile)...)...), 1, "not registered")
}

// Enrolment through agent run: a restart reuses DATA_DIR/agent-token; a
// second host claiming a registered id is refused with the fix (exit 1,
// one line naming agent agents revoke); after the revoke it registers; the
// first host, its token revoked and its id held again, is refused too.
func TestE2EAnAgentIDIsHeldByOneHost(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	first, second := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(first, "agent-id"), []byte("vm-7\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(second, "agent-id"), []byte("vm-7\n"), 0o600))
	agentToken := func(dir string) string { b, _ := os.ReadFile(filepath.Join(dir, "agent-token")); return string(b) }

	ag := startAgentProc(t, c, first)
	testkit.WaitFor(t, "the first host to register", func() bool { return agentToken(first) != "" })
	if code := ag.stop(); code != 0 {
		t.Fatalf("first host stopped with %d", code)
	}
	kept := agentToken(first)
	ag = startAgentProc(t, c, first)
	id := submit(t, c, "@output hi")
	c.waitDone(t, id)
	if code := ag.stop(); code != 0 || agentToken(first) != kept {
		t.Fatalf("a restart registered again (token changed: %v), exit %d", agentToken(first) != kept, code)
	}

	thief := startAgentProc(t, c, second)
	if code := thief.wait(); code != 1 {
		t.Fatalf("a second host with the same id exited %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(thief.output()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "agent: ") || !strings.Contains(last, "409") || !strings.Contains(last, "agent agents revoke vm-7") {
		t.Fatalf("the second host's last line %q, want one naming the fix", last)
	}

	r := runAgent(t, "agents", "revoke", "vm-7", "--control-plane", c.url(), "--token-file", c.operatorFile)
	if r.code != 0 {
		t.Fatalf("revoke: %+v", r)
	}
	ag2 := startAgentProc(t, c, second)
	defer ag2.stop()
	testkit.WaitFor(t, "the second host to register after the revoke", func() bool { return agentToken(second) != "" })
	again := startAgentProc(t, c, first)
	if code := again.wait(); code != 1 || !strings.Contains(again.output(), "agent agents revoke vm-7") {
		t.Fatalf("the first host after its token was revoked and the id taken: exit %d\n%s", code, tail(again.output(), 1000))
	}
}

// One config file serves agent run and a person's commands alike:
// token-file names the registration secret agent run enrols with, and
// operator-token-file the person's token submit, tasks and agents use
// (--token-file on the command line still wins).
func TestOneConfigForRunAndSubmit(t *testing.T) {
	t.Parallel()
	c := startCP(t, freeAddr(t), t.TempDir())
	dataDir := t.TempDir()
	conf := filepath.Join(t.TempDir(), "agent.toml")
	must(t, os.WriteFile(conf, []byte(fmt.Sprintf("control-plane = %q\ntoken-file = %q\noperator-token-file = %q\ndata-dir = %q\nexecutor.kind = \"sample\"\n",
		c.url(), c.tokenFile, c.operatorFile, dataDir)), 0o600))
	ag := startProc(t, "agent", nil, "run", "--config", conf)
	defer ag.stop()
	r := runAgent(t, "submit", "--config", conf, "--wait", "--prompt", "@output from one config")
	if r.code != 0 || !strings.Contains(r.stdout, "completed") {
		t.Fatalf("submit with the shared config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runAgent(t, "agents", "ls", "--config", conf); r.code != 0 {
		t.Errorf("agents ls with the shared config: exit %d\n%s", r.code, r.stderr)
	}
	// --token-file on the command line wins: the registration secret is
	// refused where a person's token is needed.
	r = runAgent(t, "tasks", "ls", "--remote", "--config", conf, "--token-file", c.tokenFile)
	if r.code == 0 || !strings.Contains(r.stderr, "registration secret only registers agents") {
		t.Errorf("--token-file over operator-token-file: exit %d\n%s", r.code, r.stderr)
	}
}
