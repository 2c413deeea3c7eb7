package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The CLI is the one given, else the one on PATH, else .tools/'s; none
// is one line saying how to install it.
func TestCLIBinary(t *testing.T) {
	if got, err := cliBinary("codex", "/opt/codex"); got != "/opt/codex" || err != nil {
		t.Fatalf("given: %q, %v", got, err)
	}
	bin := t.TempDir()
	onPath := filepath.Join(bin, "claude")
	if err := os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	if got, err := cliBinary("claude", ""); got != onPath || err != nil {
		t.Fatalf("on PATH: %q, %v", got, err)
	}
	repo := t.TempDir()
	t.Chdir(repo)
	if err := os.MkdirAll(filepath.Join(repo, ".tools"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, ".tools", "opencode"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := cliBinary("opencode", ""); got != filepath.Join(repo, ".tools", "opencode") || err != nil {
		t.Fatalf("in .tools: %q, %v", got, err)
	}
	_, err := cliBinary("codex", "")
	if err == nil || !strings.HasPrefix(err.Error(), "codex is not installed: npm install -g @openai/codex@") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("none: %v", err)
	}
}

// Each CLI's story has the sample's five tasks, and the models its
// provider names.
func TestCLITasks(t *testing.T) {
	for kind, model := range map[string]string{"codex": "gpt-5.4-mini", "claude": "claude-haiku-4-5", "opencode": "anthropic/claude-haiku-4-5"} {
		tasks, models := cliTasks(kind)
		if len(tasks) != 5 || len(models) != 2 || models[0] != model {
			t.Errorf("%s: %d tasks, models %q", kind, len(tasks), models)
		}
	}
	if tasks, _ := cliTasks("opencode"); !strings.Contains(tasks[3].Prompt, "after=r429") {
		t.Errorf("opencode's transient failure is not a 429: %q", tasks[3].Prompt)
	}
}
