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
