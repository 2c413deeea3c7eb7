package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServicePrintAndInstall(t *testing.T) {
	runFlags := []string{"--", "--control-plane", "https://cp.example.com", "--token-file", "/etc/agent/token", "--executor-command", "codex exec --json"}
	r := runAgent(t, append([]string{"service", "print"}, runFlags...)...)
	if r.code != 0 {
		t.Fatalf("print: %+v", r)
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", " run --control-plane https://cp.example.com --token-file /etc/agent/token --executor-command \"codex exec --json\"", "WantedBy=default.target"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("unit lacks %q:\n%s", want, r.stdout)
		}
	}
	exec := strings.Fields(strings.SplitN(strings.SplitN(r.stdout, "ExecStart=", 2)[1], "\n", 2)[0])[0]
	if !filepath.IsAbs(exec) {
		t.Errorf("ExecStart binary %q is not absolute", exec)
	}
	wantOneLineError(t, runAgent(t, "service", "print", "--", "--control-plane", "https://x"), 2, "--token-file")

	cfg := t.TempDir()
	cmd := agentCmd(t.Context(), []string{"XDG_CONFIG_HOME=" + cfg}, append([]string{"service", "install"}, runFlags...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "systemctl --user daemon-reload") {
		t.Fatalf("install: %v %s", err, out)
	}
	unit, err := os.ReadFile(filepath.Join(cfg, "systemd", "user", "agent.service"))
	if err != nil || !strings.Contains(string(unit), "ExecStart=") {
		t.Errorf("installed unit: %v %s", err, unit)
	}
}

// A flag that would inject a line into the unit, or that agent run would
// refuse, is refused when the unit is made, not when it fails to start.
func TestServiceRefusesBadFlags(t *testing.T) {
	base := []string{"service", "print", "--", "--control-plane", "https://cp.example.com", "--token-file", "/etc/agent/token"}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"newline injects a line", []string{"--agent-id", "x\nExecStartPre=/bin/rm -rf /"}, "control character"},
		{"unknown flag", []string{"--no-such-flag"}, "unknown flag"},
		{"bad value", []string{"--max-concurrent", "many"}, "max-concurrent"},
		{"stray argument", []string{"extra"}, "no arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantOneLineError(t, runAgent(t, append(append([]string{}, base...), c.args...)...), 2, c.want)
		})
	}
}
